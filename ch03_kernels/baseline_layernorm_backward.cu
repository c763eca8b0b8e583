// Baseline LayerNorm backward: three kernels, as the formula reads. The two row sums of
// g = dy gamma (a block per row: reads x and dy), then dx element by element (reads x and dy
// again), then dgamma and dbeta with a thread per column walking down every row (reads x and dy a
// third time; only D threads, so a tall matrix leaves most of the GPU idle). Six reads of an
// N x D tensor where two are the minimum.
// On bf16 and fp16 storage (the twins, baseline_layernorm_backward_bf16 and _fp16) the same three
// kernels widen each value as they read it and round dx, dgamma and dbeta as they write them.
// Run: make ch03 && ./ch03_kernels/baseline_layernorm_backward
// lab-storage: bf16 fp16
#include "lab/launch.hpp"
#include "layernorm.cuh"

namespace {

constexpr int kThreads = 256;  // a block per row for the row sums, a thread per element or column after

__global__ void row_grad_sums(const lab::Stored* __restrict__ x, const lab::Stored* __restrict__ gamma,
                              const float* __restrict__ mean, const float* __restrict__ rstd,
                              const lab::Stored* __restrict__ dy, float* __restrict__ sum_g,
                              float* __restrict__ sum_gx, int dim) {
  __shared__ float scratch[32];
  const std::size_t base = std::size_t(blockIdx.x) * dim;
  const float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
  float s1 = 0.f, s2 = 0.f;
  for (int j = threadIdx.x; j < dim; j += kThreads) {
    const float g = lab::to_f32(dy[base + j]) * lab::to_f32(gamma[j]);
    s1 += g;
    s2 += g * (lab::to_f32(x[base + j]) - mu) * rs;
  }
  s1 = rows::group_sum<kThreads>(s1, scratch);
  s2 = rows::group_sum<kThreads>(s2, scratch);
  if (threadIdx.x == 0) sum_g[blockIdx.x] = s1, sum_gx[blockIdx.x] = s2;
}

__global__ void input_grad(const lab::Stored* __restrict__ x, const lab::Stored* __restrict__ gamma,
                           const float* __restrict__ mean, const float* __restrict__ rstd,
                           const lab::Stored* __restrict__ dy, const float* __restrict__ sum_g,
                           const float* __restrict__ sum_gx, lab::Stored* __restrict__ dx, int rows, int dim) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= std::size_t(rows) * dim) return;
  const std::size_t r = i / dim, j = i % dim;
  const float rs = rstd[r], xhat = (lab::to_f32(x[i]) - mean[r]) * rs;
  dx[i] = lab::from_f32<lab::Stored>(
      rs * (lab::to_f32(dy[i]) * lab::to_f32(gamma[j]) - sum_g[r] / dim - xhat * sum_gx[r] / dim));
}

// A thread per column walks down all the rows, adding in double: a float sum down 16384 rows
// drifts by about 1e-3 (partial sums near 100, ulps near 1e-5, 16384 of them), which the check
// rejects. The optimized kernels add short runs of rows and then the runs, and stay in float.
__global__ void param_grads(const lab::Stored* __restrict__ x, const float* __restrict__ mean,
                            const float* __restrict__ rstd, const lab::Stored* __restrict__ dy,
                            lab::Stored* __restrict__ dgamma, lab::Stored* __restrict__ dbeta, int rows, int dim) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= dim) return;
  double dg = 0, db = 0;
  for (int r = 0; r < rows; ++r) {
    const std::size_t i = std::size_t(r) * dim + j;
    const float d = lab::to_f32(dy[i]);
    dg += d * (lab::to_f32(x[i]) - mean[r]) * rstd[r];
    db += d;
  }
  dgamma[j] = lab::from_f32<lab::Stored>(static_cast<float>(dg));
  dbeta[j] = lab::from_f32<lab::Stored>(static_cast<float>(db));
}

// A thread per element, every element (2^31 - 1 blocks of 256 cover any shape the topic takes).
unsigned element_blocks(const LayerNormBackward::Problem& p) {
  return lab::grid_for(std::size_t(p.rows) * p.dim, kThreads, 0x7fffffff);
}

// The variant's scratch: the row sums the dx kernel reads, two a row.
struct Unfused {
  using Topic = LayerNormBackward;
  lab::DeviceBuffer<float> row_sums;
  explicit Unfused(const LayerNormBackward::Problem& p) : row_sums(2 * std::size_t(p.rows)) {}

  void run(LayerNormBackward::Problem& p, cudaStream_t stream) {
    float *sum_g = row_sums.data(), *sum_gx = row_sums.data() + p.rows;
    row_grad_sums<<<p.rows, kThreads, 0, stream>>>(p.x.data(), p.gamma.data(), p.mean.data(), p.rstd.data(),
                                                   p.dy.data(), sum_g, sum_gx, p.dim);
    LAB_CHECK_LAUNCH();
    input_grad<<<element_blocks(p), kThreads, 0, stream>>>(
        p.x.data(), p.gamma.data(), p.mean.data(), p.rstd.data(), p.dy.data(), sum_g, sum_gx, p.dx.data(), p.rows,
        p.dim);
    LAB_CHECK_LAUNCH();
    param_grads<<<lab::grid_for(std::size_t(p.dim), kThreads), kThreads, 0, stream>>>(
        p.x.data(), p.mean.data(), p.rstd.data(), p.dy.data(), p.dgamma.data(), p.dbeta.data(), p.rows, p.dim);
    LAB_CHECK_LAUNCH();
  }
};
}  // namespace

LAB_VARIANT_CLASS(Unfused, baseline, "three kernels: row sums, dx, column sums");
