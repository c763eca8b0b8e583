// Optimized cross-entropy: one pass over the logits, one kernel. Each row's threads (2 to 32 lanes
// for rows up to 8192 classes, so short rows pack several to a warp; 512 threads beyond: see
// loss::row_lanes) stream the row with 16-byte loads and keep a running maximum and a running sum
// of exp(x - max), rescaling the sum whenever the maximum grows (the online softmax); the group
// merges its partial (max, sum) pairs with shuffles. The label's logit is picked from the chunk
// that holds it as the row streams by (no second, dependent load), and the group's lane 0 writes
// the row's log-sum-exp, which the backward reads. The losses never go to memory: each block adds
// its rows' losses, and the last block to finish (a counter) adds the blocks' sums, in a fixed
// order, and divides by N. The logits cross memory once, where the unfused version reads them
// twice, and a launch and a pass over N row losses are gone.
// Run: make ch03 && ./ch03_kernels/optimized_cross_entropy
#include "losses.cuh"

namespace {
template <int kLanes, int V>
__global__ void __launch_bounds__(rows::block_threads<kLanes>())
    online_loss(const float* __restrict__ logits, const std::int32_t* __restrict__ labels, float* __restrict__ lse,
                float* __restrict__ block_loss, unsigned* __restrict__ finished, float* __restrict__ loss_out,
                long long* bad_row, int rows, int classes) {
  using Chunk = rows::Chunk<V>;
  constexpr int kThreads = rows::block_threads<kLanes>();
  __shared__ loss::Online scratch[32];
  __shared__ float sums[32];
  __shared__ bool last;
  const int lane = threadIdx.x % kLanes;
  const std::size_t row = std::size_t(blockIdx.x) * rows::rows_per_block<kLanes>() + threadIdx.x / kLanes;
  float row_loss = 0.f;  // the row's loss in its group's lane 0; 0 elsewhere and past the last row
  if (row < std::size_t(rows)) {  // a whole row group (for a block per row, the whole block)
    const int label = labels[row];
    const float* x = logits + row * classes;
    loss::Online acc = loss::Online::empty();
    float picked = 0.f;  // x[label], in the one lane whose chunk holds it
#pragma unroll 4
    for (int c = lane * V; c < classes; c += kLanes * V) {
      const Chunk v = Chunk::load(x + c);
      float m = v.v[0];
#pragma unroll
      for (int i = 1; i < V; ++i) m = fmaxf(m, v.v[i]);
      loss::Online chunk{m, 0.f};
#pragma unroll
      for (int i = 0; i < V; ++i) {
        chunk.s += __expf(v.v[i] - m);
        if (c + i == label) picked = v.v[i];
      }
      acc.merge(chunk);
    }
    acc = loss::group_merge<kLanes>(acc, scratch);
    picked = rows::group_sum<kLanes>(picked, sums);  // one nonzero term: exact
    if (lane == 0) {
      const float row_lse = acc.lse();
      lse[row] = row_lse;  // the backward's statistic: 4 bytes a row beside the row's 4 C
      row_loss = loss::label_ok(label, classes, row, bad_row) ? row_lse - picked : NAN;
    }
  }
  // The block's rows, added in a fixed order (the same shuffle tree every run).
  const float block_sum = rows::group_sum<kThreads>(row_loss, sums);
  if (threadIdx.x == 0) {
    block_loss[blockIdx.x] = block_sum;
    __threadfence();  // the sum is visible to every block before the counter says so
    last = atomicAdd(finished, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  // The last block: every block's sum, in block order a thread then a fixed tree, over N. __ldcg
  // reads the L2, where the other blocks' sums are (this SM's L1 may not have seen them).
  float s = 0.f;
#pragma unroll 8
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kThreads) s += __ldcg(block_loss + b);
  s = rows::group_sum<kThreads>(s, sums);
  if (threadIdx.x == 0) {
    *loss_out = static_cast<float>(double(s) / rows);
    *finished = 0;  // ready for the next launch
  }
}

// The variant's scratch: one sum a block, and the count of finished blocks (zero between runs).
struct OnePass {
  using Topic = CrossEntropy;
  lab::DeviceBuffer<float> block_loss;
  lab::DeviceBuffer<unsigned> finished;
  static unsigned blocks(const CrossEntropy::Problem& p) {
    unsigned n = 0;
    loss::with_row_lanes(p.classes, [&](auto lanes, auto) { n = rows::blocks_for_rows<decltype(lanes)::value>(p.rows); });
    return n;
  }
  explicit OnePass(const CrossEntropy::Problem& p) : block_loss(blocks(p)), finished(1) {
    LAB_CHECK(cudaMemset(finished.data(), 0, sizeof(unsigned)));
  }
  static lab::Declared declared() { return {.writes = {"lse"}}; }

  void run(CrossEntropy::Problem& p, cudaStream_t stream) {
    p.clear_bad_row(stream);
    loss::with_row_lanes(p.classes, [&](auto lanes, auto vec) {
      constexpr int kLanes = decltype(lanes)::value, V = decltype(vec)::value;
      online_loss<kLanes, V><<<rows::blocks_for_rows<kLanes>(p.rows), rows::block_threads<kLanes>(), 0, stream>>>(
          p.logits.data(), p.labels.data(), p.lse.data(), block_loss.data(), finished.data(), p.loss.data(),
          p.bad_row.data(), p.rows, p.classes);
      LAB_CHECK_LAUNCH();
    });
  }
};
}  // namespace

LAB_VARIANT_CLASS(OnePass, optimized, "one kernel: online softmax, float4 loads, 2 lanes to 512 threads a row, the mean by the last block");
