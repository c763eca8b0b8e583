// Baseline cross-entropy: the formula as separate kernels, as eager frameworks run it: each row's
// maximum (a block per row), then each row's sum of exp(x - max) (the row read again), then a
// thread per row takes log, adds the max back and subtracts the label's logit (the gather; a row
// labelled ignore_index gets 0 and is not counted), then the mean over the rows counted. Two full
// reads of the logits where one is the minimum, and four launches.
// On bf16 and fp16 storage (the twins, baseline_cross_entropy_bf16 and _fp16) the same four kernels
// widen each logit as they read it; the losses and the mean stay fp32.
// Run: make ch03 && ./ch03_kernels/baseline_cross_entropy
// lab-storage: bf16 fp16
#include "losses.cuh"

namespace {
constexpr int kThreads = 256;

__global__ void row_max(const lab::Stored* __restrict__ logits, float* __restrict__ out, int classes) {
  __shared__ float scratch[32];
  const lab::Stored* row = logits + std::size_t(blockIdx.x) * classes;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < classes; j += kThreads) m = fmaxf(m, lab::to_f32(row[j]));
  m = rows::group_reduce<kThreads>(m, rows::Max{}, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = m;
}

__global__ void row_sum_exp(const lab::Stored* __restrict__ logits, const float* __restrict__ row_max,
                            float* __restrict__ out, int classes) {
  __shared__ float scratch[32];
  const lab::Stored* row = logits + std::size_t(blockIdx.x) * classes;
  const float m = row_max[blockIdx.x];
  float s = 0.f;
  for (int j = threadIdx.x; j < classes; j += kThreads) s += __expf(lab::to_f32(row[j]) - m);
  s = rows::group_sum<kThreads>(s, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

// row_loss holds the row maxima on entry and the losses on exit; row_sum the sums of exp; counted
// gets 1 for a row that counts, 0 for one labelled ignore_index (its loss 0).
__global__ void gather_loss(const lab::Stored* __restrict__ logits, const std::int32_t* __restrict__ labels,
                            const float* __restrict__ row_sum, float* __restrict__ row_loss,
                            std::uint8_t* __restrict__ counted, long long* bad_row, int rows, int classes,
                            int ignore_index) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const int label = labels[r];
  const loss::Label kind = loss::label_kind(label, classes, ignore_index, r, bad_row);
  row_loss[r] = kind == loss::Label::kUsed
                    ? row_loss[r] + __logf(row_sum[r]) - lab::to_f32(logits[std::size_t(r) * classes + label])
                : kind == loss::Label::kBad ? NAN
                                            : 0.f;
  counted[r] = kind != loss::Label::kIgnored;
}

// The variant's intermediates: the row maxima (which become the row losses in place), the row
// sums of exp, and the rows' counted flags, one a row each.
struct FourKernels {
  using Topic = CrossEntropy;
  lab::DeviceBuffer<float> row_loss, row_sum;
  lab::DeviceBuffer<std::uint8_t> counted;
  explicit FourKernels(const CrossEntropy::Problem& p) : row_loss(p.rows), row_sum(p.rows), counted(p.rows) {}

  void run(CrossEntropy::Problem& p, cudaStream_t stream) {
    p.clear_bad_row(stream);
    float* maxima = row_loss.data();  // becomes the row losses in place
    row_max<<<p.rows, kThreads, 0, stream>>>(p.logits.data(), maxima, p.classes);
    LAB_CHECK_LAUNCH();
    row_sum_exp<<<p.rows, kThreads, 0, stream>>>(p.logits.data(), maxima, row_sum.data(), p.classes);
    LAB_CHECK_LAUNCH();
    gather_loss<<<(p.rows + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
        p.logits.data(), p.labels.data(), row_sum.data(), maxima, counted.data(), p.bad_row.data(), p.rows,
        p.classes, p.ignore_index);
    LAB_CHECK_LAUNCH();
    loss::mean_over_counted(maxima, counted.data(), p.rows, p.loss.data(), p.count.data(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS(FourKernels, baseline, "four kernels: row max, sum of exp, log and gather, mean over the rows counted");
