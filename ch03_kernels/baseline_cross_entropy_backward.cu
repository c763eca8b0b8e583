// Baseline cross-entropy backward: three kernels, as the formula reads. softmax: a thread per
// logit writes exp(x - lse) into dlogits; then a thread per row subtracts 1 at its label (or zeroes
// the row, labelled ignore_index); then a thread per element scales by dloss/K. The gradient is written, read back and written again: two
// reads and two writes of an N x C tensor where one read and one write are the minimum.
// On bf16 and fp16 storage (the twins, baseline_cross_entropy_backward_bf16 and _fp16) the first two
// kernels work in an fp32 scratch tensor and the last writes dlogits in 16 bits, rounded once (three
// roundings to bf16 would be three errors of 2^-8 where PyTorch's gradient has one).
// Run: make ch03 && ./ch03_kernels/baseline_cross_entropy_backward
// lab-storage: bf16 fp16
#include <type_traits>

#include "losses.cuh"

namespace {
constexpr int kThreads = 256;

__global__ void softmax(const lab::Stored* __restrict__ logits, const float* __restrict__ lse,
                        float* __restrict__ out, int rows, int classes) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < std::size_t(rows) * classes) out[i] = __expf(lab::to_f32(logits[i]) - lse[i / classes]);
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

// out = grad dloss / K, the mean's backward (K the rows counted); in place for fp32 (out is grad).
// grad and out carry no __restrict__: they are one tensor in fp32.
__global__ void scale(const float* grad, lab::Stored* out, std::size_t n, const float* __restrict__ dloss,
                      const float* __restrict__ count) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n)  // K = 0: every row ignored, already 0
    out[i] = lab::from_f32<lab::Stored>(count[0] > 0.f ? grad[i] * (dloss[0] / count[0]) : grad[i]);
}

constexpr bool kInPlace = std::is_same_v<lab::Stored, float>;

// The variant's scratch: the fp32 gradient the first two kernels write, on 16-bit storage (in fp32
// they write dlogits itself).
struct ThreeKernels {
  using Topic = CrossEntropyBackward;
  lab::DeviceBuffer<float> work;
  explicit ThreeKernels(const CrossEntropyBackward::Problem& p) : work(kInPlace ? 0 : p.logits.size()) {}

  void run(CrossEntropyBackward::Problem& p, cudaStream_t stream) {
    p.clear_bad_row(stream);
    const std::size_t n = p.logits.size();
    const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
    // fp32: dlogits itself (the cast is the identity there); bf16 and fp16: the scratch.
    float* grad = kInPlace ? reinterpret_cast<float*>(p.dlogits.data()) : work.data();
    softmax<<<blocks, kThreads, 0, stream>>>(p.logits.data(), p.lse.data(), grad, p.rows, p.classes);
    LAB_CHECK_LAUNCH();
    subtract_one_hot<<<(p.rows + kThreads - 1) / kThreads, kThreads, 0, stream>>>(p.labels.data(), grad,
                                                                                   p.bad_row.data(), p.rows,
                                                                                   p.classes, p.ignore_index);
    LAB_CHECK_LAUNCH();
    scale<<<blocks, kThreads, 0, stream>>>(grad, p.dlogits.data(), n, p.dloss.data(), p.count.data());
    LAB_CHECK_LAUNCH();
  }
};
}  // namespace

LAB_VARIANT_CLASS(ThreeKernels, baseline, "three kernels: softmax, subtract the one-hot, scale by dloss/K");
