// Optimized cross-entropy backward: one kernel, one read of the logits and one write of the
// gradient. Each row's threads (a warp for short rows, 512 threads for long ones) load the row's
// log-sum-exp and label once, then stream the row with 16-byte loads and stores, writing
// (exp(x - lse) - [j == label]) dloss / K directly (K the rows counted; a row labelled
// ignore_index is written as zeros, its logits not read): softmax, one-hot and scale fused,
// nothing written twice.
// On bf16 and fp16 storage (the twins, optimized_cross_entropy_backward_bf16 and _fp16) the same
// kernel reads and writes half the bytes: four 16-bit values a load, exp in fp32, each gradient
// rounded once on the store.
// Run: make ch03 && ./ch03_kernels/optimized_cross_entropy_backward
// lab-storage: bf16 fp16
#include "losses.cuh"

namespace {
template <int kLanes, int V>
__global__ void __launch_bounds__(rows::block_threads<kLanes>())
    fused_grad(const lab::Stored* __restrict__ logits, const std::int32_t* __restrict__ labels,
               const float* __restrict__ lse, const float* __restrict__ dloss, const float* __restrict__ count,
               lab::Stored* __restrict__ grad, long long* bad_row, int rows, int classes, int ignore_index) {
  using Chunk = rows::Chunk<V>;
  const int lane = threadIdx.x % kLanes;
  const std::size_t row = std::size_t(blockIdx.x) * rows::rows_per_block<kLanes>() + threadIdx.x / kLanes;
  if (row >= std::size_t(rows)) return;
  const int label = labels[row];
  const bool ignored = label == ignore_index, ok = !ignored && label >= 0 && label < classes;
  if (!ok && !ignored && lane == 0) loss::label_kind(label, classes, ignore_index, row, bad_row);
  lab::Stored* g = grad + row * classes;
  if (ignored) {
#pragma unroll 4
    for (int c = lane * V; c < classes; c += kLanes * V) Chunk{}.store(g + c);  // zeros
    return;
  }
  const float shift = lse[row], scale = dloss[0] / count[0];
  const lab::Stored* x = logits + row * classes;
#pragma unroll 4
  for (int c = lane * V; c < classes; c += kLanes * V) {
    const Chunk v = Chunk::load(x + c);
    Chunk out;
#pragma unroll
    for (int i = 0; i < V; ++i)
      out.v[i] = ok ? (__expf(v.v[i] - shift) - (c + i == label ? 1.f : 0.f)) * scale : NAN;
    out.store(g + c);
  }
}

}  // namespace

LAB_VARIANT(CrossEntropyBackward, optimized,
            "one kernel: softmax, one-hot and dloss/K fused, four values a load and a store") {
  p.clear_bad_row(stream);
  loss::with_row_lanes(p.classes, [&](auto lanes, auto vec) {
    constexpr int kLanes = decltype(lanes)::value, V = decltype(vec)::value;
    fused_grad<kLanes, V><<<rows::blocks_for_rows<kLanes>(p.rows), rows::block_threads<kLanes>(), 0, stream>>>(
        p.logits.data(), p.labels.data(), p.lse.data(), p.dloss.data(), p.count.data(), p.dlogits.data(),
        p.bad_row.data(), p.rows, p.classes, p.ignore_index);
    LAB_CHECK_LAUNCH();
  });
}
