// The AdamW operator of the bridge: the fused GPT-2 step's flat AdamW (flat_adamw.cuh), over the
// caller's four arrays (see bridge.hpp).
#include <cstdint>
#include <stdexcept>
#include <string>

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

}  // namespace bridge
