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
// store. The loop is the frame's (hopper/flash_tma.cuh's forward, its persistent form: a list with
// starts); this file plans the lists (hopper/split_plan.hpp's persistent_lists).
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

// The overlap step's consumers (hopper/overlapped.cuh), the split step's order (hopper/split_plan.hpp).
#include "attention/hopper/overlapped.cuh"
#include "attention/hopper/split_plan.hpp"

namespace {

// The variant's state: the frame's bf16 inputs and tensor maps, and the blocks' lists on the device.
struct Persistent {
  using Topic = Attention;
  flashtma::Inputs in;
  lab::DeviceBuffer<flashtma::Item> items;
  lab::DeviceBuffer<int> starts;
  int blocks = 0;

  Persistent(const Attention::Problem& p, cudaStream_t stream) : in(p, stream) {
    const attn::Dims& a = p.dims;
    if (a.d != 64 && a.d != 128) return;  // supports() says N/A
    const lab::DeviceFacts& dev = lab::current_device();
    const splitplan::Lists lists = splitplan::persistent_plan(a, dev.sms, dev.l2_bytes);
    blocks = int(lists.starts.size()) - 1;
    items = lab::DeviceBuffer<flashtma::Item>(lists.items.size());
    items.upload(lists.items);
    starts = lab::DeviceBuffer<int>(lists.starts.size());
    starts.upload(lists.starts);
  }
  // bf16, its running max kept over tiles of 128 keys from key 0 (the check emulates its rounding of
  // P), as the overlap step's: every item is a whole query tile. Its blocks run more than one item
  // only where a shape has more query tiles than the GPU has SMs, which the topic's check shapes do
  // not: it adds two that do (400 tiles of 192 queries at d = 64, causal; 192 of 128 at d = 128),
  // within the CPU reference's limits.
  static lab::Declared declared() {
    return {.precision = "bf16", .writes = {"lse"},
            .schedule = [](const lab::Shape&) { return std::any(attn::ForwardSchedule(flashtma::Config<64>::kBc)); },
            .checks = {lab::Shape{4, 50, 200, 64, 1}, lab::Shape{4, 16, 300, 128, 0}}};
  }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) { return flashtma::supports(s, dev); }
  void run(Attention::Problem& p, cudaStream_t stream) {
    flashtma::Listed list;
    list.items = items.data(), list.blocks = blocks, list.starts = starts.data();
    flashtma::run<flashtma::Overlapped, true>(in, p, stream, list);
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Persistent, LAB_STEP,
                       "the overlap step's consumers in persistent blocks (d = 64, 128; sm_90a): one block an SM runs "
                       "a planned list of query tiles, the next tile's Q and keys copied under this one's last products");
