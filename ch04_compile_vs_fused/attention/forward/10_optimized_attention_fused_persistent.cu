// Fused attention forward on Hopper, persistent blocks: the overlap step's consumers
// (hopper/overlapped.cuh, FlashAttention-3's schedule) and the previous step's longest-first order,
// with one block an SM that runs a list of query tiles one after another instead of a block a
// query tile. Every block of the earlier steps pays its start-up and its end on its own: the
// barriers set up, Q copied, the ring filled before the first product, the last products with
// nothing to overlap, O stored while the tensor cores wait. The split step's plan measures that as
// about 5 tiles of work a block (7 us against 1.36 us a tile at d = 64), which at GPT-2 small's shape
// (4 x 12 heads, seq 1024, d = 64, causal: 288 blocks of 2 to 8 tiles, 32 tiles a head) is nearly
// half of the whole grid's time. Here a block's producer copies the next tile's Q and its first K
// and V as soon as the consumers free Q and the stages (the ring's tiles and phases run on across
// the items: Work::base), so the next item's start-up runs under this item's last products and its
// store.
//
// What changes, against the previous two steps:
//   | overlap step (08), split step (09)                | this step's                                |
//   | ------------------------------------------------- | ------------------------------------------ |
//   | a block a query tile (or a chunk of one); the     | min(items, SMs) blocks, each a list of     |
//   | grid's blocks start in order as SMs free          | query tiles planned on the host: the items |
//   |                                                   | in the split plan's order (longest first,  |
//   |                                                   | by groups of heads where keys would spill  |
//   |                                                   | the L2), each to the block that the model  |
//   |                                                   | says frees first                           |
//   | Q copied once; the ring's stages from tile 0      | Q copied an item, once the consumers free  |
//   |                                                   | it (q_empty: after their last S); the      |
//   |                                                   | ring's stage and phase continue            |
// No keys are split (the split step's combine is not here): every item is a whole query tile, so
// the arithmetic, the order of the sums and the roundings are the overlap step's, value for value,
// and so is the check's schedule (tiles of 128 keys from key 0).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_persistent --shape 4x12x1024x64x1
#include <algorithm>
#include <functional>
#include <queue>
#include <type_traits>
#include <vector>

#include "attention/hopper/overlapped.cuh"
#include "attention/hopper/split_plan.hpp"

namespace {

using flashtma::Config;
using flashtma::Item;

// The host's assignment of the items to blocks: the items in the plan's order, each to the block
// that the model says frees first (an item costs its tiles and kItemCost more: Q's copy and the
// unoverlapped first and last products, a guess of 2 tiles to be measured; a block's own start-up
// is the same for all). Block b runs items[starts[b]] .. items[starts[b + 1] - 1] in that order.
constexpr double kItemCost = 2;
struct Lists {
  std::vector<Item> items;
  std::vector<int> starts;
};
inline Lists assign(const std::vector<Item>& order, int blocks) {
  std::vector<std::vector<Item>> per(static_cast<std::size_t>(blocks));
  using Slot = std::pair<double, int>;  // (frees at, block): ties to the lower block
  std::priority_queue<Slot, std::vector<Slot>, std::greater<>> free_at;
  for (int b = 0; b < blocks; ++b) free_at.push({0.0, b});
  for (const Item& it : order) {
    const auto [t, b] = free_at.top();
    free_at.pop();
    per[std::size_t(b)].push_back(it);
    free_at.push({t + it.tiles + kItemCost, b});
  }
  Lists out;
  out.starts.push_back(0);
  for (const auto& list : per) {
    out.items.insert(out.items.end(), list.begin(), list.end());
    out.starts.push_back(int(out.items.size()));
  }
  return out;
}

#if defined(LAB_SM90A)
namespace tma = lab::tma;

// The frame's kernel (flash_tma.cuh's forward) with a loop over the block's items: the producer's
// thread copies each item's Q once the consumers have freed the last one's (q_empty, one barrier
// past the frame's), then its K and V tiles into the ring where the last item's left off; the
// consumers run the overlap step's consume for each item in turn, O and lse by head.
template <int D, bool Causal>
__global__ void __launch_bounds__(Config<D>::kThreads, 1)
    persistent(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
               const __grid_constant__ CUtensorMap vmap, const Item* __restrict__ items,
               const int* __restrict__ starts, float* __restrict__ o, float* __restrict__ lse, int seq,
               float scale_log2) {
  using C = Config<D>;
  extern __shared__ std::uint8_t smem_raw[];
  const flashtma::Ring<D> ring(smem_raw);
  std::uint64_t* const q_empty = ring.v_empty + C::kStages;
  const int first = starts[blockIdx.x], end = starts[blockIdx.x + 1];
  const int group = int(threadIdx.x) / 128;  // 0: the producer; 1..kConsumers: consumers
  if (threadIdx.x == 0) {
    tma::init(ring.q_full, 1);
    tma::init(q_empty, 4 * C::kConsumers);  // each consumer warp's lane 0, once an item
    for (int st = 0; st < C::kStages; ++st) {
      tma::init(ring.k_full + st, 1), tma::init(ring.v_full + st, 1);
      tma::init(ring.k_empty + st, 4 * C::kConsumers), tma::init(ring.v_empty + st, 4 * C::kConsumers);
    }
    tma::fence_init();
  }
  __syncthreads();
  if (group == 0) {
    wgmma::setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) {
      int base = 0;  // the ring's tiles so far
      for (int i = first; i < end; ++i) {
        const Item it = items[i];
        tma::wait(q_empty, unsigned((i - first) & 1) ^ 1);  // the last item's Q is free (a fresh one is)
        flashtma::produce<D>(ring, &qmap, &kmap, &vmap, it.tile * C::kBr, it.head, it.key_tile0, it.tiles, base);
        base += it.tiles;
      }
    }
  } else {
    wgmma::setmaxnreg_inc<C::kConsumerRegs>();
    const int consumer = group - 1;
    int base = 0;
    for (int i = first; i < end; ++i) {
      const Item it = items[i];
      const int rows0 = it.tile * C::kBr + 64 * consumer;
      const int qrow0 = rows0 + 16 * (int(threadIdx.x / 32) % 4) + int(threadIdx.x % 32) / 4;
      const flashtma::Out<__nv_bfloat16> out{o + std::size_t(it.head) * seq * D, lse + std::size_t(it.head) * seq, 0,
                                             seq};
      const flashtma::Work<D, __nv_bfloat16> work{ring, consumer, rows0, qrow0, it.key_tile0 * C::kBc, it.tiles,
                                                  seq, scale_log2, out, base, unsigned((i - first) & 1), q_empty};
      flashtma::Overlapped::consume<D, Causal>(work);
      base += it.tiles;
    }
  }
}
#endif

// The frame's shared memory and one more barrier (q_empty).
template <int D>
constexpr int kSmemBytes = Config<D>::kSmemBytes + 8;
static_assert(kSmemBytes<64> <= 227 * 1024 && kSmemBytes<128> <= 227 * 1024);

// The variant's state: the frame's bf16 inputs and tensor maps, and the blocks' lists on the device.
struct Persistent {
  using Topic = Attention;
  flashtma::Inputs in;
  lab::DeviceBuffer<Item> items;
  lab::DeviceBuffer<int> starts;
  int blocks = 0;

  Persistent(const Attention::Problem& p, cudaStream_t stream) : in(p, stream) {
    const attn::Dims& a = p.dims;
    if (a.d != 64 && a.d != 128) return;  // supports() says N/A
    const int br = a.d == 64 ? Config<64>::kBr : Config<128>::kBr, bc = Config<64>::kBc;
    const lab::DeviceFacts& dev = lab::current_device();
    const splitplan::Plan order =
        splitplan::plan_for(a, br, bc, dev.sms, dev.l2_bytes, splitplan::longest_tiles(a, br, bc));
    blocks = std::min(int(order.items.size()), dev.sms);
    const Lists lists = assign(order.items, blocks);
    items = lab::DeviceBuffer<Item>(lists.items.size());
    items.upload(lists.items);
    starts = lab::DeviceBuffer<int>(lists.starts.size());
    starts.upload(lists.starts);
  }
  // bf16, its running max kept over tiles of kBc keys from key 0, as the overlap step's.
  static lab::Declared declared() {
    return {.precision = "bf16", .writes = {"lse"},
            .schedule = [](const lab::Shape&) { return std::any(attn::ForwardSchedule(Config<64>::kBc)); }};
  }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) { return flashtma::supports(s, dev); }
  void run(Attention::Problem& p, cudaStream_t stream) {
#if defined(LAB_SM90A)
    const attn::Dims& a = p.dims;
    flashtma::with_kernel(a.d, a.causal, [&](auto dc, auto cc) {
      constexpr int D = decltype(dc)::value;
      constexpr bool Causal = decltype(cc)::value;
      LAB_CHECK(cudaFuncSetAttribute(persistent<D, Causal>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     kSmemBytes<D>));
      persistent<D, Causal><<<blocks, Config<D>::kThreads, kSmemBytes<D>, stream>>>(
          in.maps.q, in.maps.k, in.maps.v, items.data(), starts.data(), p.o.data(), p.lse.data(), a.seq,
          a.scale() * flash::kLog2e);
      LAB_CHECK(cudaGetLastError());
    });
#else
    (void)p, (void)stream;
    throw lab::Error("the warp-specialised attention kernels are not built for sm_90a");
#endif
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Persistent, LAB_STEP,
                       "the overlap step's consumers in persistent blocks (d = 64, 128; sm_90a): one block an SM runs "
                       "a planned list of query tiles, the next tile's Q and keys copied under this one's last products");
