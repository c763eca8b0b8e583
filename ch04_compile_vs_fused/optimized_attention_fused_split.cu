// Fused attention forward on Hopper, the blocks scheduled: the previous step (FlashAttention-3's
// schedule on flash_tma.cuh's frame), launched from a list of blocks that this file plans once for
// the shape (untimed, in the variant's state). The kernels run one block an SM (160 KB of shared
// memory), so with few heads the grid is a wave or two and its time is set by the blocks that end
// last. Two changes, both in the list:
// - Longest first across the heads. The previous step's grid is (query tiles, heads), and a causal
//   grid runs each head's longest tile first, but head by head: at batch 8 and one head, head 7's
//   32-tile block starts only after heads 0-6's short ones. Sorted across the heads, the longest
//   blocks start together and the short ones fill in behind them (H100, compare: causal 67.1 ->
//   55.2 us at d = 64, 91.1 -> 63.3 at d = 128). With many heads, a list sorted across all of them
//   runs blocks of every head at once and their keys no longer stay in L2 (8x16x4096x128 causal:
//   1.59 ms against 1.03), so there heads go in groups of an eighth of the L2.
// - The keys of long rows split across blocks (FlashDecoding's split-K). At batch 8, one head, seq
//   4096 and d = 64, 176 blocks of 32 key tiles take two rounds on 132 SMs where 1.33 would do;
//   split in two, 352 blocks of 16 take three rounds of half the length (101 -> 92.7 us). The plan
//   picks the longest chunk L by simulating the block scheduler (blocks start in list order, each on
//   the SM that frees first) for every L, with a block's start-up and end and the combine's launch
//   counted in tiles (measured; see kBlockCost), and keeps the L with the shortest estimate: no
//   split where splitting does not pay (16 heads, and every shape above but that one).
// A split block writes its rows' O, normalised by its own sum, and its lse into a slot of scratch;
// a second kernel combines a row's chunks: lse = log sum_c exp(lse_c) (taken from the largest) and
// O = sum_c exp(lse_c - lse) O_c. What the combine adds to the output's error is a few roundings of
// fp32 and one expf a chunk, relatively (chunks + 20) 2^-24, under a thousandth of the bf16 slack
// the reference allows (attention.cuh's Precision: 2^-8 a product's inputs), and O's sum over the
// keys in another order is within the same sum_error(seq + 1) bound.
// Causal chunks: every chunk but the last ends before the block's first query, so the last chunk
// holds the diagonal and every row of every chunk sees at least one key (a row with none would
// have no maximum to subtract and a zero sum).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_split --shape 8x1x4096x64x1
#include <algorithm>
#include <functional>
#include <queue>
#include <vector>

// Step 8's consumers, unchanged (its Overlapped schedule; its registration left out).
#define LAB_SCHEDULE_ONLY
#include "optimized_attention_fused_overlap.cu"

namespace {

// The plan for a shape: the blocks (items) in launch order, and the split query tiles to combine.
struct Combine {
  int head, tile, chunks, slot0;  // chunk c of the tile is in slot slot0 + c
};
struct Plan {
  std::vector<flashtma::Item> items;
  std::vector<Combine> combines;
  int slots = 0;
  double estimate = 0;  // the simulated time, in tiles
};

// The model's costs, in tiles of keys, measured on the H100 at d = 64 (a tile of 192 queries x 128
// keys takes 1.36 us in a running block): a block's start-up and end (the barriers, Q's copy, the
// ring filling, the first and last products unoverlapped, the output's store) about 7 us, 5 tiles
// (from one round of 8-tile blocks, 18.3 us, and two rounds of 32-tile blocks, 102 us); the
// combine launch about 5 us, 4 tiles. At d = 128 a tile (128 x 128 x 128) takes about 1.5 us.
constexpr double kBlockCost = 5, kCombineCost = 4;

// The blocks of a query tile of nk key tiles, chunks of at most about L: n chunks as even as they
// come, the larger first; causal, the last must start at or before `latest` (the key tile of the
// tile's first query).
std::vector<int> chunk_sizes(int nk, int L, int latest) {
  int n = (nk + L - 1) / L;
  while (n > 1 && nk - nk / n > latest) --n;  // the last chunk (nk / n tiles) starts too late
  std::vector<int> sizes(n, nk / n);
  for (int c = 0; c < nk % n; ++c) ++sizes[c];
  return sizes;
}

// The estimated time, in tiles, of the blocks started in list order, each on the SM that frees
// first, `sms` at once.
double makespan(const std::vector<flashtma::Item>& items, int sms) {
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int s = 0; s < sms; ++s) free_at.push(0);
  double end = 0;
  for (const flashtma::Item& it : items) {
    const double t = free_at.top() + it.tiles + kBlockCost;
    free_at.pop();
    free_at.push(t);
    end = std::max(end, t);
  }
  return end;
}

Plan make_plan(const attn::Dims& a, int br, int bc, int sms, std::size_t l2_bytes) {
  const int qtiles = (a.seq + br - 1) / br;
  auto key_tiles = [&](int t) { return ((a.causal ? std::min(a.seq, (t + 1) * br) : a.seq) + bc - 1) / bc; };
  auto latest = [&](int t) { return a.causal ? std::min(key_tiles(t) - 1, t * br / bc) : key_tiles(t) - 1; };
  // The order: longest blocks first across all heads where every head's K and V fit in half the
  // L2 together (few heads); else heads in groups of an eighth of the L2, longest first within a
  // group, so that the blocks running at once share their heads' keys in L2 (all 128 heads at once
  // at d = 128 and seq 4096, 256 MB of keys, ran 1.59 ms against 1.03 by groups).
  const std::size_t head_bytes = std::size_t(a.seq) * a.d * 2 * 2;  // K and V, bf16
  const int group = std::size_t(a.bh()) * head_bytes <= l2_bytes / 2
                  ? a.bh()
                  : int(std::clamp<std::size_t>(l2_bytes / 8 / head_bytes, 1, std::size_t(a.bh())));
  auto plan_for = [&](int L) {
    Plan plan;
    for (int h = 0; h < a.bh(); ++h)
      for (int t = 0; t < qtiles; ++t) {
        const std::vector<int> sizes = chunk_sizes(key_tiles(t), L, latest(t));
        const bool split = sizes.size() > 1;
        if (split) plan.combines.push_back({h, t, int(sizes.size()), plan.slots});
        int k0 = 0;
        for (int size : sizes) {
          plan.items.push_back({h, t, k0, size, split ? plan.slots++ : -1});
          k0 += size;
        }
      }
    std::stable_sort(plan.items.begin(), plan.items.end(), [&](const flashtma::Item& x, const flashtma::Item& y) {
      return x.head / group != y.head / group ? x.head < y.head : x.tiles > y.tiles;
    });
    plan.estimate = makespan(plan.items, sms) + (plan.slots > 0 ? kCombineCost : 0);
    return plan;
  };
  int longest = 0;
  for (int t = 0; t < qtiles; ++t) longest = std::max(longest, key_tiles(t));
  Plan best = plan_for(longest);
  // Splitting shortens the last round at most: at 8 rounds or more it cannot gain an eighth.
  if (best.items.size() >= 8 * std::size_t(sms)) return best;
  for (int L = longest - 1; L >= 1; --L) {
    Plan p = plan_for(L);
    if (p.estimate < best.estimate) best = std::move(p);
  }
  return best;
}

// A split query tile's rows, a thread for 4 columns of a row (D / 4 threads a row, 256 / (D / 4)
// rows a block): m = max_c lse_c, sum = sum_c exp(lse_c - m), O = sum_c exp(lse_c - m) O_c / sum,
// lse = m + log(sum).
template <int D, int Br>
__global__ void __launch_bounds__(256) combine(const Combine* __restrict__ list, const float* __restrict__ part_o,
                                               const float* __restrict__ part_lse, float* __restrict__ o,
                                               float* __restrict__ lse, int seq) {
  constexpr int kLanes = D / 4;
  const Combine c = list[blockIdx.x];
  const int r = int(blockIdx.y) * (256 / kLanes) + int(threadIdx.x) / kLanes, col = 4 * (int(threadIdx.x) % kLanes);
  if (r >= min(Br, seq - c.tile * Br)) return;
  const float* l = part_lse + std::size_t(c.slot0) * Br + r;
  float m = -INFINITY;
  for (int k = 0; k < c.chunks; ++k) m = fmaxf(m, l[std::size_t(k) * Br]);
  float sum = 0;
  float4 acc = make_float4(0, 0, 0, 0);
  for (int k = 0; k < c.chunks; ++k) {
    const float w = expf(l[std::size_t(k) * Br] - m);
    const float4 x = *reinterpret_cast<const float4*>(part_o + (std::size_t(c.slot0 + k) * Br + r) * D + col);
    sum += w;
    acc.x += w * x.x, acc.y += w * x.y, acc.z += w * x.z, acc.w += w * x.w;
  }
  const float inv = 1.f / sum;
  const std::size_t row = std::size_t(c.head) * seq + std::size_t(c.tile) * Br + r;
  *reinterpret_cast<float4*>(o + row * D + col) = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
  if (col == 0) lse[row] = m + logf(sum);
}

// The variant's state: the bf16 inputs and tensor maps (the frame's), the plan on the device, and
// the partial slots. The plan counts one block an SM: two do not fit in shared memory.
static_assert(2 * flashtma::Config<64>::kSmemBytes > 228 * 1024 && 2 * flashtma::Config<128>::kSmemBytes > 228 * 1024);
struct Split {
  using Topic = Attention;
  flashtma::Inputs in;
  Plan plan;
  lab::DeviceBuffer<flashtma::Item> items;
  lab::DeviceBuffer<Combine> combines;
  lab::DeviceBuffer<float> part_o, part_lse;

  Split(const Attention::Problem& p, cudaStream_t stream) : in(p, stream) {
    const attn::Dims& a = p.dims;
    if (a.d != 64 && a.d != 128) return;  // supports() says N/A
    const int br = a.d == 64 ? flashtma::Config<64>::kBr : flashtma::Config<128>::kBr;
    plan = make_plan(a, br, flashtma::Config<64>::kBc, lab::current_device().sms, lab::current_device().l2_bytes);
    items = lab::DeviceBuffer<flashtma::Item>(plan.items.size());
    items.upload(plan.items);
    if (plan.slots > 0) {
      combines = lab::DeviceBuffer<Combine>(plan.combines.size());
      combines.upload(plan.combines);
      part_o = lab::DeviceBuffer<float>(std::size_t(plan.slots) * br * a.d);
      part_lse = lab::DeviceBuffer<float>(std::size_t(plan.slots) * br);
    }
  }
  static lab::Declared declared() { return {.precision = "bf16", .writes = {"lse"}}; }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) { return flashtma::supports(s, dev); }
  void run(Attention::Problem& p, cudaStream_t stream) {
    flashtma::run<Overlapped>(in, p, stream, {items.data(), int(plan.items.size()), part_o.data(), part_lse.data()});
    if (plan.combines.empty()) return;
    auto launch = [&](auto dc) {
      constexpr int D = decltype(dc)::value, Br = flashtma::Config<D>::kBr;
      const dim3 grid(unsigned(plan.combines.size()), Br / (256 / (D / 4)));
      combine<D, Br><<<grid, 256, 0, stream>>>(combines.data(), part_o.data(), part_lse.data(), p.o.data(),
                                                p.lse.data(), p.dims.seq);
    };
    if (p.dims.d == 64)
      launch(std::integral_constant<int, 64>{});
    else
      launch(std::integral_constant<int, 128>{});
    LAB_CHECK(cudaGetLastError());
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Split, 9,
                       "the previous step from a planned list of blocks (d = 64, 128; sm_90a): longest first across "
                       "the heads, the keys of long rows split across blocks and combined, so few heads fill the GPU");
