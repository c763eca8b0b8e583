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
#include <type_traits>

// The previous step's consumers (hopper/overlapped.cuh), unchanged; the plan (hopper/split_plan.hpp).
#include "attention/hopper/overlapped.cuh"
#include "attention/hopper/split_plan.hpp"

namespace {

using splitplan::Combine;
using splitplan::Plan;

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
    plan = splitplan::make_plan(a, br, flashtma::Config<64>::kBc, lab::current_device().sms, lab::current_device().l2_bytes);
    items = lab::DeviceBuffer<flashtma::Item>(plan.items.size());
    items.upload(plan.items);
    if (plan.slots > 0) {
      combines = lab::DeviceBuffer<Combine>(plan.combines.size());
      combines.upload(plan.combines);
      part_o = lab::DeviceBuffer<float>(std::size_t(plan.slots) * br * a.d);
      part_lse = lab::DeviceBuffer<float>(std::size_t(plan.slots) * br);
    }
  }
  // bf16, its running max kept over tiles of 128 keys from each chunk's first (the check emulates
  // its rounding of P): the chunks this shape's plan splits each query tile's keys into, on this GPU.
  static lab::Declared declared() {
    return {.precision = "bf16", .writes = {"lse"}, .schedule = [](const lab::Shape& s) {
              const attn::Dims a(s);
              const int bc = flashtma::Config<64>::kBc;
              attn::ForwardSchedule sched(bc);
              if (a.d != 64 && a.d != 128) return std::any(sched);
              sched.query_tile = a.d == 64 ? flashtma::Config<64>::kBr : flashtma::Config<128>::kBr;
              const Plan plan = splitplan::make_plan(a, sched.query_tile, bc, lab::current_device().sms,
                                                     lab::current_device().l2_bytes);
              sched.chunk_starts.resize(std::size_t((a.seq + sched.query_tile - 1) / sched.query_tile));
              for (const flashtma::Item& it : plan.items)
                if (it.head == 0) sched.chunk_starts[std::size_t(it.tile)].push_back(it.key_tile0 * bc);
              for (auto& starts : sched.chunk_starts) std::sort(starts.begin(), starts.end());
              return std::any(sched);
            }};
  }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) { return flashtma::supports(s, dev); }
  void run(Attention::Problem& p, cudaStream_t stream) {
    flashtma::run<flashtma::Overlapped>(in, p, stream, {items.data(), int(plan.items.size()), part_o.data(), part_lse.data()});
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

LAB_VARIANT_CLASS_STEP(Split, LAB_STEP,
                       "the previous step from a planned list of blocks (d = 64, 128; sm_90a): longest first across "
                       "the heads, the keys of long rows split across blocks and combined, so few heads fill the GPU");
