// The AdamW operators of the bridge: the fused GPT-2 step's flat AdamW (flat_adamw.cuh), over the
// caller's four arrays, and the same step with each tensor's gradient where autograd left it (the list
// kernel below; see bridge.hpp).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bridge.hpp"
#include "gpt2/fused/flat_adamw.cuh"

namespace bridge {

std::string adamw_validate(std::int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay) {
  // torch.optim.AdamW's own checks, and the step its bias corrections need.
  if (step < 1) return "step must be at least 1 (the first step is 1), not " + std::to_string(step);
  if (!(lr >= 0)) return "lr must be at least 0, not " + std::to_string(lr);
  if (!(beta1 >= 0 && beta1 < 1)) return "beta1 must be in [0, 1), not " + std::to_string(beta1);
  if (!(beta2 >= 0 && beta2 < 1)) return "beta2 must be in [0, 1), not " + std::to_string(beta2);
  if (!(eps >= 0)) return "eps must be at least 0, not " + std::to_string(eps);
  if (!(weight_decay >= 0)) return "weight_decay must be at least 0, not " + std::to_string(weight_decay);
  return "";
}

void adamw_step(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step, double lr,
                double beta1, double beta2, double eps, double weight_decay, cudaStream_t s) {
  if (const std::string why = adamw_validate(step, lr, beta1, beta2, eps, weight_decay); !why.empty())
    throw std::invalid_argument("adamw: " + why);
  // The kernel reads quads at 16-byte boundaries of each array: four arrays that share their address
  // modulo 16 (fresh tensors, and views at one offset into such) are run from the boundary below
  // them, the elements before the first one being the range's loose ends.
  const auto misalign = [](const void* a) { return reinterpret_cast<std::uintptr_t>(a) % 16; };
  const std::uintptr_t k = misalign(p);
  if (misalign(g) != k || misalign(m) != k || misalign(v) != k || k % 4 != 0)
    throw std::invalid_argument(
        "adamw: param, grad, exp_avg and exp_avg_sq must lie at the same address modulo 16 bytes "
        "(fresh tensors do; so do views at one offset into tensors of one size)");
  if (n <= 0) return;
  const std::size_t shift = k / 4;
  flat_adamw::step(p - shift, g - shift, m - shift, v - shift, shift, shift + std::size_t(n),
                   flat_adamw::Coef::at_step(lr, beta1, beta2, step),
                   flat_adamw::Hyper::of(lr, beta1, beta2, eps, weight_decay), s);
}

namespace {

// The tensors of one launch of the list kernel, in its parameters (about 3 KiB of the 4 KiB a kernel's
// parameters may take): more tensors run as more launches.
constexpr int kListTensors = 128;
struct GradList {
  const float* g[kListTensors];                // tensor t's gradient
  unsigned long long quad0[kListTensors + 1];  // its quads in the flat arrays, from this launch's first
  unsigned long long n[kListTensors];          // its elements
  int tensors;
};

// AdamW over the quads [0, quad0[tensors]) of p, m, v (16-byte aligned at this launch's first tensor),
// each quad's gradient read from its tensor's own: the flat kernel's 28 bytes a parameter, with the
// gradients where backward wrote them. A tensor whose size is not a multiple of 4 ends in a partial
// quad: its last elements one at a time, the quad's padding left as it is. The table stays in the
// kernel's parameter space (__grid_constant__): a warp's quads mostly share a tensor, so the binary
// search's loads are broadcasts.
__global__ void adamw_list_kernel(float* __restrict__ p, float* __restrict__ m, float* __restrict__ v,
                                  const __grid_constant__ GradList list, flat_adamw::Coef coef, flat_adamw::Hyper h) {
  const float step_size = coef.step_size, inv_sqrt_bc2 = coef.inv_sqrt_bc2;
  auto one = [&](float& pp, float& mm, float& vv, float gg) {
    flat_adamw::update(pp, mm, vv, gg, step_size, inv_sqrt_bc2, h);
  };
  for (std::size_t q : lab::grid_stride(list.quad0[list.tensors])) {
    int lo = 0, hi = list.tensors - 1;  // the last tensor whose first quad is at or before q
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (list.quad0[mid] <= q) lo = mid; else hi = mid - 1;
    }
    const std::size_t e = 4 * (q - list.quad0[lo]);  // the quad's first element in tensor lo
    if (e + 4 <= list.n[lo]) {
      float4 pi = reinterpret_cast<float4*>(p)[q], mi = reinterpret_cast<float4*>(m)[q],
             vi = reinterpret_cast<float4*>(v)[q];
      const float4 gi = reinterpret_cast<const float4*>(list.g[lo] + e)[0];
      one(pi.x, mi.x, vi.x, gi.x), one(pi.y, mi.y, vi.y, gi.y), one(pi.z, mi.z, vi.z, gi.z), one(pi.w, mi.w, vi.w, gi.w);
      reinterpret_cast<float4*>(p)[q] = pi, reinterpret_cast<float4*>(m)[q] = mi, reinterpret_cast<float4*>(v)[q] = vi;
    } else {
      for (std::size_t k = e; k < list.n[lo]; ++k)
        one(p[4 * q + k - e], m[4 * q + k - e], v[4 * q + k - e], list.g[lo][k]);
    }
  }
}

std::int64_t padded(std::int64_t size) { return (size + 3) / 4 * 4; }

}  // namespace

std::string adamw_list_validate(const float* p, const float* m, const float* v, std::int64_t n,
                                const std::vector<const float*>& g, const std::vector<std::int64_t>& sizes) {
  const auto aligned = [](const void* a) { return reinterpret_cast<std::uintptr_t>(a) % 16 == 0; };
  if (!aligned(p) || !aligned(m) || !aligned(v))
    return "param, exp_avg and exp_avg_sq must start at a 16-byte boundary (fresh tensors do)";
  if (g.size() != sizes.size()) return "one size a gradient";
  std::int64_t total = 0;
  for (std::size_t t = 0; t < g.size(); ++t) {
    if (sizes[t] < 0) return "gradient " + std::to_string(t) + " has a negative size";
    if (!aligned(g[t]))
      return "grads[" + std::to_string(t) + "] must start at a 16-byte boundary (a fresh tensor does; this one is a view)";
    total += padded(sizes[t]);
  }
  if (total != n)
    return "param has " + std::to_string(n) + " elements; the gradients' sizes, each rounded up to 4, add up to " +
           std::to_string(total);
  return "";
}

void adamw_list_step(float* p, float* m, float* v, std::int64_t n, const std::vector<const float*>& g,
                     const std::vector<std::int64_t>& sizes, std::int64_t step, double lr, double beta1, double beta2,
                     double eps, double weight_decay, cudaStream_t s) {
  if (const std::string why = adamw_validate(step, lr, beta1, beta2, eps, weight_decay); !why.empty())
    throw std::invalid_argument("adamw_list: " + why);
  if (const std::string why = adamw_list_validate(p, m, v, n, g, sizes); !why.empty())
    throw std::invalid_argument("adamw_list: " + why);
  const flat_adamw::Coef coef = flat_adamw::Coef::at_step(lr, beta1, beta2, step);
  const flat_adamw::Hyper h = flat_adamw::Hyper::of(lr, beta1, beta2, eps, weight_decay);
  std::int64_t at = 0;  // the launch's first element in the flat arrays
  for (std::size_t t0 = 0; t0 < g.size(); t0 += kListTensors) {
    GradList list{};
    list.tensors = int(std::min<std::size_t>(kListTensors, g.size() - t0));
    unsigned long long quads = 0;
    for (int t = 0; t < list.tensors; ++t) {
      list.g[t] = g[t0 + t];
      list.n[t] = static_cast<unsigned long long>(sizes[t0 + t]);
      list.quad0[t] = quads;
      quads += static_cast<unsigned long long>(padded(sizes[t0 + t]) / 4);
    }
    list.quad0[list.tensors] = quads;
    if (quads > 0) {
      adamw_list_kernel<<<lab::grid_for(quads, flat_adamw::kThreads), flat_adamw::kThreads, 0, s>>>(
          p + at, m + at, v + at, list, coef, h);
      LAB_CHECK(cudaGetLastError());
    }
    at += std::int64_t(4 * quads);
  }
}

}  // namespace bridge
