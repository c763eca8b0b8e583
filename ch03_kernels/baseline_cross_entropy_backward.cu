// Baseline cross-entropy backward: three kernels, as the formula reads. softmax: a thread per
// logit writes exp(x - lse) into dlogits; then a thread per row subtracts 1 at its label (or zeroes
// the row, labelled ignore_index); then a thread per element scales by dloss/K. The gradient is written, read back and written again: two
// reads and two writes of an N x C tensor where one read and one write are the minimum.
// Run: make ch03 && ./ch03_kernels/baseline_cross_entropy_backward
#include "losses.cuh"

namespace {
constexpr int kThreads = 256;

__global__ void softmax(const float* __restrict__ logits, const float* __restrict__ lse, float* __restrict__ out,
                        int rows, int classes) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < std::size_t(rows) * classes) out[i] = __expf(logits[i] - lse[i / classes]);
}

__global__ void subtract_one_hot(const std::int32_t* __restrict__ labels, float* __restrict__ grad, long long* bad_row,
                                 int rows, int classes, int ignore_index) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const int label = labels[r];
  float* row = grad + std::size_t(r) * classes;
  const loss::Label kind = loss::label_kind(label, classes, ignore_index, r, bad_row);
  if (kind == loss::Label::kUsed)
    row[label] -= 1.f;
  else
    for (int j = 0; j < classes; ++j) row[j] = kind == loss::Label::kIgnored ? 0.f : NAN;
}

// grad *= dloss / K, the mean's backward (K the rows counted).
__global__ void scale(float* __restrict__ grad, std::size_t n, const float* __restrict__ dloss,
                      const float* __restrict__ count) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n && count[0] > 0.f) grad[i] *= dloss[0] / count[0];  // K = 0: every row ignored, already 0
}
}  // namespace

LAB_VARIANT(CrossEntropyBackward, baseline, "three kernels: softmax, subtract the one-hot, scale by dloss/K") {
  p.clear_bad_row(stream);
  const std::size_t n = p.logits.size();
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  softmax<<<blocks, kThreads, 0, stream>>>(p.logits.data(), p.lse.data(), p.dlogits.data(), p.rows, p.classes);
  LAB_CHECK_LAUNCH();
  subtract_one_hot<<<(p.rows + kThreads - 1) / kThreads, kThreads, 0, stream>>>(p.labels.data(), p.dlogits.data(),
                                                                                 p.bad_row.data(), p.rows, p.classes,
                                                                                 p.ignore_index);
  LAB_CHECK_LAUNCH();
  scale<<<blocks, kThreads, 0, stream>>>(p.dlogits.data(), n, p.dloss.data(), p.count.data());
  LAB_CHECK_LAUNCH();
}
