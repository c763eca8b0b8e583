// Baseline LayerNorm: the formula written as three kernels, one statistic each, as a framework
// without fusion runs it: the row means (a block per row), the row variances around them (x read
// again), then y element by element (x read a third time, mean and rstd gathered per element).
// Every kernel is coalesced; the cost is the passes: 3 reads of x and one write of y, where one
// read and one write are the minimum.
// On bf16 and fp16 storage (the twins, baseline_layernorm_bf16 and _fp16) the same three kernels
// widen each value as they read it and round y as they write it: 3 reads of x and a write of y, in
// half the bytes.
// Run: make ch03 && ./ch03_kernels/baseline_layernorm
// lab-storage: bf16 fp16
#include "lab/launch.hpp"
#include "layernorm.cuh"

namespace {

constexpr int kThreads = 256;  // a block per row for the statistics, a thread per element for y

__global__ void row_mean(const lab::Stored* __restrict__ x, float* __restrict__ mean, int dim) {
  __shared__ float scratch[32];
  const lab::Stored* row = x + std::size_t(blockIdx.x) * dim;
  float s = 0.f;
  for (int j = threadIdx.x; j < dim; j += kThreads) s += lab::to_f32(row[j]);
  s = rows::group_sum<kThreads>(s, scratch);
  if (threadIdx.x == 0) mean[blockIdx.x] = s / dim;
}

__global__ void row_rstd(const lab::Stored* __restrict__ x, const float* __restrict__ mean, float* __restrict__ rstd,
                         int dim) {
  __shared__ float scratch[32];
  const lab::Stored* row = x + std::size_t(blockIdx.x) * dim;
  const float mu = mean[blockIdx.x];
  float s = 0.f;
  for (int j = threadIdx.x; j < dim; j += kThreads) {
    const float c = lab::to_f32(row[j]) - mu;
    s += c * c;
  }
  s = rows::group_sum<kThreads>(s, scratch);
  if (threadIdx.x == 0) rstd[blockIdx.x] = rsqrtf(s / dim + ln::kEps);
}

__global__ void normalize(const lab::Stored* __restrict__ x, const lab::Stored* __restrict__ gamma,
                          const lab::Stored* __restrict__ beta, const float* __restrict__ mean,
                          const float* __restrict__ rstd, lab::Stored* __restrict__ y, int rows, int dim) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= std::size_t(rows) * dim) return;
  const std::size_t r = i / dim, j = i % dim;
  y[i] = lab::from_f32<lab::Stored>((lab::to_f32(x[i]) - mean[r]) * rstd[r] * lab::to_f32(gamma[j]) +
                                    lab::to_f32(beta[j]));
}

}  // namespace

LAB_VARIANT(LayerNorm, baseline, "three kernels: row means, row variances, normalize") {
  row_mean<<<p.rows, kThreads, 0, stream>>>(p.x.data(), p.mean.data(), p.dim);
  LAB_CHECK_LAUNCH();
  row_rstd<<<p.rows, kThreads, 0, stream>>>(p.x.data(), p.mean.data(), p.rstd.data(), p.dim);
  LAB_CHECK_LAUNCH();
  // A thread per element, every element (2^31 - 1 blocks of 256 cover any shape the topic takes).
  normalize<<<lab::grid_for(std::size_t(p.rows) * p.dim, kThreads, 0x7fffffff), kThreads, 0, stream>>>(
      p.x.data(), p.gamma.data(), p.beta.data(), p.mean.data(), p.rstd.data(), p.y.data(), p.rows, p.dim);
  LAB_CHECK_LAUNCH();
}
