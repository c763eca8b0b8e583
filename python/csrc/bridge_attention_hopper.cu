// The package's 16-bit attention (bf16, and fp16 on the same kernels with T = __half) on the
// chapter's Hopper kernels (see bridge.hpp): the forward of
// ch04's attention/forward/08_optimized_attention_fused_overlap.cu (flashtma::Overlapped, the
// chapter's fastest forward at one block a query tile) with O written in bf16 straight into
// scaled_dot_product_attention's layout, and the backward of
// attention/backward/11_optimized_attention_backward_fused_wgmma_persistent.cu at d = 128
// (flashtma::bwd's kPersistent: dQ split by columns and made a tile behind, the two consumers' products
// in turns, P^T made while dP^T's product runs, on persistent blocks that take key tiles from a
// counter, the caller's) and of 12_optimized_attention_backward_fused_wgmma_tall.cu at d = 64 (kTallTiles:
// two consumers on query tiles of 128, dQ split by queries; backward_choice), with dK and dV written in
// bf16 the same way; the GPT-2 steps run the same forward
// and step 8's plan (gpt2/fused/hopper_attention.cuh). Causal forwards of a few waves run step 10's
// persistent blocks instead (attention/forward/10_optimized_attention_fused_persistent.cu: one block
// an SM, each a planned list of query tiles), their lists planned once a shape and kept on the device.
// Head sizes 64 and 128 on an sm_90 GPU, with this file compiled for sm_90a; the bridge runs the
// mma.sync kernels (flash_bf16.cuh) otherwise.
// lab-arch: sm_90a
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include "attention/hopper/backward_wgmma.cuh"
#include "attention/hopper/overlapped.cuh"
#include "attention/hopper/split_plan.hpp"
#include "bridge.hpp"
#include "storage16.cuh"
#include "lab/device.hpp"

namespace bridge {
namespace {

using Schedule = flashtma::Overlapped;

// cudaFuncSetAttribute (the kernels' shared memory) once per device, kernel, element type, head
// size, mask, consumers and (the backward's) plan.
template <class T>
void prepare_once(char which, int d, bool causal, int consumers, int plan = 0) {
  static std::mutex m;
  static std::set<std::tuple<int, char, int, bool, int, int>> done;  // one set per T
  int device = 0;
  LAB_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> g(m);
  if (!done.emplace(device, which, d, causal, consumers, plan).second) return;
  if (which == 'f')
    flashtma::prepare<Schedule, T>(d, causal);
  else if (which == 'p')
    flashtma::prepare<Schedule, T, true>(d, causal);
  else
    flashtma::bwd::prepare<T>(d, causal, consumers, plan);
}


// The backward's kernel for a shape: the chapter's fastest for the block's shape, its consumer
// warpgroups a block and its plan (flashtma::bwd::DqPlan), the one choice that the launch, the prepare
// and the two questions below (which kernel; does it take a counter) all read.
// - d = 128: step 11's, kPersistent, two consumers: step 10's plan (P^T under dP^T's product) on
//   persistent blocks; on an H100 in session 90 3.40 ms against step 10's 3.49 at (8, 16, 4096, 128)
//   causal and 5.75 against 5.85 unmasked.
// - d = 64: step 12's, kTallTiles, two consumers on query tiles of 128 with dQ split by queries; on an
//   H100 in session 95 (ch04's results/attention_backward_tall_s94) 3.30 ms against step 10's 3.99 at
//   (8, 16, 4096, 64) unmasked, 2.20 against 2.55 causal and 87 us against 96 at GPT-2 small's
//   (4, 12, 1024, 64) causal. It replaces session 92's choice there, step 10's kernel on three
//   consumers where the grid was four waves or more and step 5's on two below (133 us against 125 at
//   GPT-2 small's shape, whose 288 blocks of three are 2.2 waves): two consumers of 128 queries a
//   tile were faster at every shape timed, few waves and many.
struct BackwardChoice {
  int consumers, plan;
  const char* step;
};
BackwardChoice backward_choice(int d) {
  if (d == 128) return {2, flashtma::bwd::kPersistent, "step 11"};
  return {2, flashtma::bwd::kTallTiles, "step 12"};
}

// Persistent blocks or the grid, for the forward over bh heads of seq queries: persistent where the
// mask is causal and the grid is at most four waves. There a block's start-up and end, which the
// persistent blocks run under the last item's products, are a large part of each block's few tiles,
// and the longest-first lists even out the causal rows' unequal lengths. The chapter's step 10
// against step 8 on the H200 (ch04_compile_vs_fused/results/attention_persistent_h200, the hopper
// README's table): causal (4, 12, 1024, 64), 2.2 waves, 32.2 us against 36.8; (4, 16, 1024, 128), 3.9
// waves, 51.7 against 53.6; (8, 1, 4096, 64), 1.3 waves, 55.4 against 67.5. Not where the grid is many
// waves ((8, 16, 4096, 64) causal, 31 waves: 677 against 681 us; at d = 128 1077 against 1069) nor
// without the mask ((4, 12, 1024, 64): 48.4 against 47.3 us): the grid's block scheduler already keeps
// the SMs busy there.
bool persistent_forward(int bh, int seq, int d, bool causal) {
  const int br = d == 64 ? flashtma::Config<64>::kBr : flashtma::Config<128>::kBr;
  const long long blocks = (long long)bh * ((seq + br - 1) / br);
  return causal && blocks <= 4LL * lab::current_device().sms;
}

// A shape's persistent lists on the device (split_plan.hpp's persistent_plan, as step 10's), made on its first forward and kept for the process: a CUDA graph captured later launches
// with these pointers. Made outside a capture only (the upload is a copy from the host); a forward
// captured before its shape ran uncaptured runs the grid (nullptr here). Never freed: a few KiB a
// shape.
struct DeviceLists {
  flashtma::Item* items = nullptr;
  int* starts = nullptr;
  int blocks = 0;
};
const DeviceLists* persistent_lists(int bh, int seq, int d, bool causal, cudaStream_t s) {
  static std::mutex m;
  static std::map<std::tuple<int, int, int, int, bool>, DeviceLists> made;
  int device = 0;
  LAB_CHECK(cudaGetDevice(&device));
  const auto key = std::make_tuple(device, bh, seq, d, causal);
  const std::lock_guard<std::mutex> g(m);
  if (const auto it = made.find(key); it != made.end()) return &it->second;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  LAB_CHECK(cudaStreamIsCapturing(s, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return nullptr;
  const lab::DeviceFacts& dev = lab::current_device();
  const splitplan::Lists lists =
      splitplan::persistent_plan(attn::Dims(lab::Shape{1, bh, seq, d, causal ? 1 : 0}), dev.sms, dev.l2_bytes);
  DeviceLists out;
  out.blocks = int(lists.starts.size()) - 1;
  LAB_CHECK(cudaMalloc(&out.items, lists.items.size() * sizeof(flashtma::Item)));
  LAB_CHECK(cudaMalloc(&out.starts, lists.starts.size() * sizeof(int)));
  LAB_CHECK(cudaMemcpy(out.items, lists.items.data(), lists.items.size() * sizeof(flashtma::Item),
                       cudaMemcpyHostToDevice));
  LAB_CHECK(cudaMemcpy(out.starts, lists.starts.data(), lists.starts.size() * sizeof(int), cudaMemcpyHostToDevice));
  return &made.emplace(key, out).first->second;
}

}  // namespace

std::string hopper_attention_forward_blocks(int batch, int heads, int seq, int d, bool causal) {
#if defined(LAB_SM90A)
  if (!hopper_attention_supports(d).empty()) return "";
  const int bh = batch * heads;
  if (!persistent_forward(bh, seq, d, causal)) return "grid";
  const DeviceLists* lists = persistent_lists(bh, seq, d, causal, cudaStreamPerThread);
  return lists ? "persistent " + std::to_string(lists->blocks) : "grid";
#else
  (void)batch, (void)heads, (void)seq, (void)d, (void)causal;
  return "";
#endif
}

std::string hopper_attention_backward_kernel(int batch, int heads, int seq, int d) {
#if defined(LAB_SM90A)
  (void)batch, (void)heads, (void)seq;  // the choice is the head size's alone (backward_choice)
  if (!hopper_attention_supports(d).empty()) return "";
  const BackwardChoice c = backward_choice(d);
  return std::string(c.step) + ", " + std::to_string(c.consumers) + " consumers";
#else
  (void)batch, (void)heads, (void)seq, (void)d;
  return "";
#endif
}

bool hopper_attention_backward_counts(int batch, int heads, int seq, int d) {
#if defined(LAB_SM90A)
  (void)batch, (void)heads, (void)seq;
  if (!hopper_attention_supports(d).empty()) return false;
  return backward_choice(d).plan == flashtma::bwd::kPersistent;
#else
  (void)batch, (void)heads, (void)seq, (void)d;
  return false;
#endif
}

std::string hopper_attention_supports(std::int64_t d) {
#if defined(LAB_SM90A)
  const lab::DeviceFacts& dev = lab::current_device();
  if (dev.cc_major != 9 || dev.cc_minor != 0)
    return "wgmma and the TMA need an sm_90 GPU (this one is sm_" + std::to_string(dev.cc_major) +
           std::to_string(dev.cc_minor) + ")";
  return d == 64 || d == 128 ? "" : "the Hopper kernels are written for head sizes 64 and 128";
#else
  (void)d;
  return "the package was not built for sm_90a (setup.py builds for it where every GPU is an sm_90)";
#endif
}

void hopper_attention_forward(Storage storage, int batch, int heads, int seq, int d, bool causal, const void* q,
                              const void* k, const void* v, std::size_t qkv_ld, void* o_rows, float* lse, float scale,
                              cudaStream_t s) {
  const int bh = batch * heads;
  on16(storage, "the Hopper attention", [&](auto t) {
    using T = typename decltype(t)::type;
    // O in rows: head b heads + h's query t in row b seq + t of heads d elements, columns [h d, h d + d).
    const flashtma::RowsOf<T> rows{.o = static_cast<T*>(o_rows), .heads = heads, .cols = d,
                                   .ld = std::size_t(heads) * d};
    const T *q16 = static_cast<const T*>(q), *k16 = static_cast<const T*>(k), *v16 = static_cast<const T*>(v);
    const flashtma::Maps maps =
        qkv_ld ? flashtma::rows_maps(q16, k16, v16, std::size_t(batch) * seq, heads, d, qkv_ld)
               : flashtma::maps(q16, k16, v16, attn::Dims(lab::Shape{1, bh, seq, d, 0}));
    const DeviceLists* lists = persistent_forward(bh, seq, d, causal) ? persistent_lists(bh, seq, d, causal, s) : nullptr;
    if (lists) {
      prepare_once<T>('p', d, causal, 0);
      const flashtma::Listed list{.items = lists->items, .blocks = lists->blocks, .starts = lists->starts};
      flashtma::launch<Schedule, T, true>(maps, nullptr, lse, bh, seq, d, causal, flash::kLog2e * scale, s, list, rows);
      return;
    }
    prepare_once<T>('f', d, causal, 0);
    flashtma::launch<Schedule, T>(maps, nullptr, lse, bh, seq, d, causal, flash::kLog2e * scale, s, {}, rows);
  });
}

void hopper_attention_backward(Storage storage, int batch, int heads, int seq, int d, bool causal, const void* q,
                               const void* k, const void* v, std::size_t qkv_ld, const void* dout, const float* lse,
                               const float* delta, float* dq, void* dk_rows, void* dv_rows, float* db,
                               unsigned* counter, float scale, cudaStream_t s) {
  const int bh = batch * heads;
  const BackwardChoice choice = backward_choice(d);
  const int consumers = choice.consumers, plan = choice.plan;
  on16(storage, "the Hopper attention", [&](auto t) {
    using T = typename decltype(t)::type;
    prepare_once<T>('b', d, causal, consumers, plan);
    LAB_CHECK(cudaMemsetAsync(dq, 0, std::size_t(bh) * seq * d * sizeof(float), s));  // the TMA adds into it
    // dK and dV in rows as O; the kernel also adds their columns' sums (a GPT-2 step's bias gradient)
    // into db, which the package does not use: 2 heads d floats of scratch, one atomic a column and a
    // consumer warpgroup.
    const flashtma::bwd::KVRowsOf<T> rows{.dk = static_cast<T*>(dk_rows),
                                          .dv = static_cast<T*>(dv_rows),
                                          .db_k = db,
                                          .db_v = db + std::size_t(heads) * d,
                                          .heads = heads,
                                          .cols = d,
                                          .ld = std::size_t(heads) * d};
    const T *q16 = static_cast<const T*>(q), *k16 = static_cast<const T*>(k), *v16 = static_cast<const T*>(v),
            *dout16 = static_cast<const T*>(dout);
    flashtma::bwd::Maps m =
        qkv_ld ? flashtma::bwd::rows_maps(q16, k16, v16, qkv_ld, dout16, dq, bh, heads, seq, d, consumers)
               : flashtma::bwd::maps(q16, k16, v16, dout16, dq, bh, seq, d, consumers);
    m.dq_plan = plan, m.counter = counter;
    flashtma::bwd::launch<T>(m, lse, delta, nullptr, nullptr, bh, seq, d, causal, scale, s, rows);
  });
}

}  // namespace bridge
