// Optimized cross-entropy: one pass over the logits. Each row's threads (a warp for rows up to
// 8192 classes, 512 threads beyond) stream the row with 16-byte loads and keep a running maximum
// and a running sum of exp(x - max), rescaling the sum whenever the maximum grows (the online
// softmax); the group merges its partial (max, sum) pairs with shuffles, and one thread gathers
// the label's logit and writes the row's loss, and its log-sum-exp, which the backward reads. The
// logits cross memory once, where the unfused version reads them twice. A small kernel adds the
// row losses in a fixed order and divides by N.
// Run: make ch03 && ./ch03_kernels/optimized_cross_entropy
#include "losses.cuh"

namespace {
template <int kLanes, int V>
__global__ void __launch_bounds__(rows::block_threads<kLanes>())
    online_loss(const float* __restrict__ logits, const std::int32_t* __restrict__ labels,
                float* __restrict__ row_loss, float* __restrict__ lse, long long* bad_row, int rows, int classes) {
  using Chunk = rows::Chunk<V>;
  __shared__ loss::Online scratch[32];
  const int lane = threadIdx.x % kLanes;
  const std::size_t row = std::size_t(blockIdx.x) * rows::rows_per_block<kLanes>() + threadIdx.x / kLanes;
  if (row >= std::size_t(rows)) return;
  const float* x = logits + row * classes;
  loss::Online acc = loss::Online::empty();
#pragma unroll 4
  for (int c = lane * V; c < classes; c += kLanes * V) {
    const Chunk v = Chunk::load(x + c);
    float m = v.v[0];
#pragma unroll
    for (int i = 1; i < V; ++i) m = fmaxf(m, v.v[i]);
    loss::Online chunk{m, 0.f};
#pragma unroll
    for (int i = 0; i < V; ++i) chunk.s += __expf(v.v[i] - m);
    acc.merge(chunk);
  }
  acc = loss::group_merge<kLanes>(acc, scratch);
  if (lane == 0) {
    const int label = labels[row];
    const float row_lse = acc.lse();
    lse[row] = row_lse;  // the backward's statistic: 4 bytes a row beside the row's 4 C
    row_loss[row] = loss::label_ok(label, classes, row, bad_row) ? row_lse - x[label] : NAN;
  }
}


// The variant's intermediate: one loss a row, summed in a fixed order by a second kernel.
struct OnePass {
  using Topic = CrossEntropy;
  lab::DeviceBuffer<float> row_loss;
  explicit OnePass(const CrossEntropy::Problem& p) : row_loss(p.rows) {}
  static lab::Declared declared() { return {.writes = {"lse"}}; }

  void run(CrossEntropy::Problem& p, cudaStream_t stream) {
    p.clear_bad_row(stream);
    loss::with_row_lanes(p.classes, [&](auto lanes, auto vec) {
      constexpr int kLanes = decltype(lanes)::value, V = decltype(vec)::value;
      online_loss<kLanes, V><<<rows::blocks_for_rows<kLanes>(p.rows), rows::block_threads<kLanes>(), 0, stream>>>(
          p.logits.data(), p.labels.data(), row_loss.data(), p.lse.data(), p.bad_row.data(), p.rows, p.classes);
      LAB_CHECK_LAUNCH();
    });
    loss::sum_over(row_loss.data(), p.rows, p.rows, p.loss.data(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS(OnePass, optimized, "one pass: online softmax, float4 loads, a warp or 512 threads a row");
