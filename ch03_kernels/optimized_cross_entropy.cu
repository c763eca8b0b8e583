// Optimized cross-entropy: one pass over the logits, one kernel. Each row's threads (2 to 32 lanes
// for rows up to 8192 classes, so short rows pack several to a warp; 512 threads beyond: see
// loss::row_lanes) read the row with 16-byte loads. A row that fits in its lanes' registers (at
// most 4 chunks a lane: every row up to 512 classes; a warp's row up to 1024 in 8 chunks a lane)
// is loaded whole, then its maximum found, then sum exp(x - max) taken from the registers: one exp
// an element. A longer row streams by, with a
// running maximum and a running sum of exp(x - max) rescaled whenever the maximum grows (the
// online softmax, two more exps a chunk). The group merges its lanes' parts with shuffles. The
// label's logit is picked from the chunk that holds it as the row goes by (no second, dependent
// load), and the group's lane 0 writes the row's log-sum-exp, which the backward reads.
//
// The losses never go to memory. Each block adds its rows' losses (and counts the rows that count:
// a row labelled ignore_index adds nothing) and ends by publishing one sum and one count and
// counting itself done (a fence and an atomic on one counter), and the last to finish adds the
// blocks' sums in a fixed order and divides by the rows counted. For rows up to 8192
// classes the blocks are persistent (as many as are resident at once, each taking row tiles in a
// grid stride): one block a tile paid that microsecond per tile (4096 blocks at 262144 x 64, 8192
// at 65536 x 512) while the SM's next tile waited behind it; now it is paid once a block. The
// logits cross memory once, where the unfused version reads them twice, and a launch and a pass
// over N row losses are gone.
// On bf16 and fp16 storage (the twins, optimized_cross_entropy_bf16 and _fp16) the same kernels read
// half the bytes: four 16-bit logits a load (8 bytes), widened to fp32 in registers; everything
// after is the same.
// Run: make ch03 && ./ch03_kernels/optimized_cross_entropy
// lab-storage: bf16 fp16
#include "losses.cuh"

namespace {
// Chunks a lane keeps in registers: loss::row_lanes leaves at most 4 below 32 lanes. A warp's row
// of 513 to 1024 classes (V = 4) is held too, in 8 chunks a lane, by a kernel of its own
// (online_loss<32, V, true>): streamed by the online softmax, as 4 chunks a lane left it, 32 x 2048
// rows of 768 classes took 0.0757 ms on the H100 (88% of a plain read of the same bytes); held,
// 0.0728 (91%).
constexpr int kHeld = 4;
constexpr int kWideHeld = 8;

// The row's log-sum-exp from its lanes' registers: the row loaded whole, its maximum, then one exp
// an element. `picked` gets x[label] in the lane that holds it.
template <int kLanes, int V, int kChunks>
__device__ __forceinline__ float held_lse(const lab::Stored* x, int lane, int classes, int label, float& picked,
                                          float* sums) {
  using Chunk = rows::Chunk<V>;
  Chunk v[kChunks];
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const int c = (lane + k * kLanes) * V;
    if (c < classes) {
      v[k] = Chunk::load(x + c);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        m = fmaxf(m, v[k].v[i]);
        if (c + i == label) picked = v[k].v[i];
      }
    }
  }
  m = rows::group_reduce<kLanes>(m, rows::Max{}, sums);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kChunks; ++k)
    if ((lane + k * kLanes) * V < classes) {
#pragma unroll
      for (int i = 0; i < V; ++i) s += __expf(v[k].v[i] - m);
    }
  return m + __logf(rows::group_sum<kLanes>(s, sums));
}

// The same for a row that streams by: the online softmax.
template <int kLanes, int V>
__device__ __forceinline__ float streamed_lse(const lab::Stored* x, int lane, int classes, int label, float& picked,
                                              loss::Online* scratch) {
  using Chunk = rows::Chunk<V>;
  loss::Online acc = loss::Online::empty();
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
  return loss::group_merge<kLanes>(acc, scratch).lse();
}

// A block per long row: four of them an SM (32 registers a thread), as the one-pass version ran.
// kWide: a warp's row of up to 8 chunks a lane, always held (its 32 registers of logits; four
// blocks an SM, as many as the 4-chunk kernels' 48 registers gave five).
template <int kLanes, int V, bool kWide = false>
__global__ void __launch_bounds__(rows::block_threads<kLanes>(), kLanes > 32 || kWide ? 4 : 1)
    online_loss(const lab::Stored* __restrict__ logits, const std::int32_t* __restrict__ labels,
                float* __restrict__ lse, float* __restrict__ block_loss, unsigned* __restrict__ block_counted,
                unsigned* __restrict__ finished,
                float* __restrict__ loss_out, float* __restrict__ count_out, long long* seen_bad,
                long long* __restrict__ bad_row, int rows, int classes, int ignore_index) {
  constexpr int kThreads = rows::block_threads<kLanes>();
  constexpr int kRows = rows::rows_per_block<kLanes>();
  __shared__ loss::Online scratch[32];
  __shared__ float sums[32];
  __shared__ unsigned counts[kThreads / 32];
  __shared__ unsigned rows_counted;  // a block a row: the rows that count, kept by thread 0
  if (threadIdx.x == 0) rows_counted = 0;
  __shared__ bool last;
  const int lane = threadIdx.x % kLanes;
  // A warp's row (up to 8192 classes) is held in registers when it fits, the same for every row.
  const bool held = classes <= kLanes * V * kHeld;
  const std::size_t tiles = (std::size_t(rows) + kRows - 1) / kRows;
  float my_loss = 0.f;     // the losses of this thread's rows in its group's lane 0; 0 elsewhere
  unsigned my_counted = 0;  // how many of those rows count
  for (std::size_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::size_t row = tile * kRows + threadIdx.x / kLanes;
    if (row >= std::size_t(rows)) continue;  // a whole row group (for a block per row, the whole block)
    const int label = labels[row];
    const lab::Stored* x = logits + row * classes;
    float picked = 0.f;  // x[label], in the one lane whose chunk holds it
    float row_lse;
    // Below 32 lanes the row is always held (loss::row_lanes gives a row fewer lanes only when
    // they hold it), so those kernels have no streamed path: its registers had cut them to 3
    // resident blocks an SM (80 registers a thread; now 48, 5 blocks).
    if constexpr (kWide)
      row_lse = held_lse<kLanes, V, kWideHeld>(x, lane, classes, label, picked, sums);
    else if constexpr (kLanes < 32)
      row_lse = held_lse<kLanes, V, kHeld>(x, lane, classes, label, picked, sums);
    else if constexpr (kLanes == 32)
      row_lse = held ? held_lse<kLanes, V, kHeld>(x, lane, classes, label, picked, sums)
                     : streamed_lse<kLanes, V>(x, lane, classes, label, picked, scratch);
    else
      row_lse = streamed_lse<kLanes, V>(x, lane, classes, label, picked, scratch);
    picked = rows::group_sum<kLanes>(picked, sums);  // one nonzero term: exact
    if (lane == 0) {
      lse[row] = row_lse;  // the backward's statistic: 4 bytes a row beside the row's 4 C
      const loss::Label kind = loss::label_kind(label, classes, ignore_index, row, seen_bad);
      my_loss += kind == loss::Label::kUsed ? row_lse - picked : kind == loss::Label::kBad ? NAN : 0.f;
      if constexpr (kLanes < kThreads)
        my_counted += kind != loss::Label::kIgnored;
      else
        rows_counted += kind != loss::Label::kIgnored;  // thread 0's own shared word
    }
  }
  // The block's rows, added in a fixed order (the same tiles, the same shuffle tree every run).
  // Its count. A block a row: thread 0 keeps it in a shared word, as a count kept in a register
  // through the row's loop left the 512-thread kernel, capped at 32 registers, 8 bytes of stack
  // (H200, 8192 x 32768: 302 us, against 291 now and 280 before the count). Rows packed in a block:
  // each warp's sum stored before group_sum, whose barriers (kThreads > 32) order it before thread 0
  // adds them (two more barriers of its own had cost as much at each block's end).
  static_assert(kThreads > 32);
  if constexpr (kLanes < kThreads) {
    my_counted = __reduce_add_sync(0xffffffffu, my_counted);
    if (threadIdx.x % 32 == 0) counts[threadIdx.x / 32] = my_counted;
  }
  const float block_sum = rows::group_sum<kThreads>(my_loss, sums);
  unsigned block_count = kLanes < kThreads ? my_counted : rows_counted;
  if constexpr (kLanes < kThreads)
    if (threadIdx.x == 0)
      for (int w = 1; w < kThreads / 32; ++w) block_count += counts[w];
  if (threadIdx.x == 0) {
    block_loss[blockIdx.x] = block_sum;
    block_counted[blockIdx.x] = block_count;
    __threadfence();  // the sum and count are visible to every block before the counter says so
    last = atomicAdd(finished, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  // The last block: every block's sum, in block order a thread then a fixed tree, over the rows
  // counted (every block's count, added as integers: exact in any order). __ldcg
  // reads the L2, where the other blocks' sums are (this SM's L1 may not have seen them). Thread 0
  // reads the bad row here, beside the sums: read after them, it was one more trip to the L2 on the
  // kernel's last path (H100, 32 x 2048 rows of 64: 0.0124-0.0125 ms, now 0.0122-0.0123).
  const long long bad = threadIdx.x == 0 ? __ldcg(seen_bad) : 0;
  float s = 0.f;
  unsigned k = 0;
#pragma unroll 8
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kThreads) {
    s += __ldcg(block_loss + b);
    k += __ldcg(block_counted + b);
  }
  k = __reduce_add_sync(0xffffffffu, k);
  if (threadIdx.x % 32 == 0) counts[threadIdx.x / 32] = k;  // ordered by group_sum's barriers, as above
  s = rows::group_sum<kThreads>(s, sums);
  if (threadIdx.x == 0)
    for (int w = 1; w < kThreads / 32; ++w) k += counts[w];
  if (threadIdx.x == 0) {
    *loss_out = static_cast<float>(double(s) / k);  // 0/0, NaN, when no row counts
    *count_out = static_cast<float>(k);
    *bad_row = bad;  // this run's bad label, or -1: no memset before the kernel
    *seen_bad = -1, *finished = 0;  // ready for the next launch
  }
}

// Calls f(kernel, blocks, threads) for this shape: the kernel for its row tile, and for tiles of
// short rows as many blocks as are resident at once on this GPU (fewer when there are fewer
// tiles). A row of more than 8192 classes keeps a block of its own: its 32 KB and more amortize the
// block's ending, and blocks handed out one a row stay balanced, where 8192 rows over 528 resident
// blocks (15.5 each) left half of them idle for the last sixteenth of the run (3% slower).
template <int kLanes, int V, bool kWide, class F>
void launch_with(const CrossEntropy::Problem& p, F&& f) {
  auto* kernel = &online_loss<kLanes, V, kWide>;
  static const int resident = [&] {
    int n = 0;
    LAB_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, rows::block_threads<kLanes>(), 0));
    return std::max(n, 1) * lab::current_device().sms;
  }();
  const unsigned tiles = rows::blocks_for_rows<kLanes>(p.rows);
  const unsigned blocks = kLanes > 32 ? tiles : std::min<unsigned>(tiles, resident);
  f(kernel, blocks, rows::block_threads<kLanes>());
}
template <class F>
void with_launch(const CrossEntropy::Problem& p, F&& f) {
  loss::with_row_lanes(p.classes, [&](auto lanes, auto vec) {
    constexpr int kLanes = decltype(lanes)::value, V = decltype(vec)::value;
    if constexpr (kLanes == 32) {
      if (p.classes > kLanes * V * kHeld && p.classes <= kLanes * V * kWideHeld)
        return launch_with<kLanes, V, true>(p, f);
    }
    launch_with<kLanes, V, false>(p, f);
  });
}

// The variant's scratch: one sum and one count a block, the count of finished blocks (zero between runs), and a
// bad label's row (-1 between runs), which the last block publishes as the topic's bad_row: one
// launch a run, where clearing bad_row first (clear_bad_row, a memset) cost a second one.
struct OnePass {
  using Topic = CrossEntropy;
  lab::DeviceBuffer<float> block_loss;
  lab::DeviceBuffer<unsigned> block_counted, finished;
  lab::DeviceBuffer<long long> seen_bad;
  static unsigned blocks(const CrossEntropy::Problem& p) {
    unsigned n = 0;
    with_launch(p, [&](auto, unsigned blocks, int) { n = blocks; });
    return n;
  }
  explicit OnePass(const CrossEntropy::Problem& p)
      : block_loss(blocks(p)), block_counted(block_loss.size()), finished(1), seen_bad(1) {
    LAB_CHECK(cudaMemset(finished.data(), 0, sizeof(unsigned)));
    LAB_CHECK(cudaMemset(seen_bad.data(), 0xff, sizeof(long long)));
  }
  static lab::Declared declared() { return {.writes = {"lse"}}; }

  void run(CrossEntropy::Problem& p, cudaStream_t stream) {
    with_launch(p, [&](auto* kernel, unsigned blocks, int threads) {
      kernel<<<blocks, threads, 0, stream>>>(p.logits.data(), p.labels.data(), p.lse.data(), block_loss.data(),
                                             block_counted.data(), finished.data(), p.loss.data(), p.count.data(),
                                             seen_bad.data(), p.bad_row.data(), p.rows, p.classes, p.ignore_index);
      LAB_CHECK_LAUNCH();
    });
  }
};
}  // namespace

LAB_VARIANT_CLASS(OnePass, optimized,
                  "one kernel: short rows held in registers (max, then one exp an element), long rows online; "
                  "four values a load, 2 lanes to 512 threads a row, persistent blocks, the mean by the last block");
