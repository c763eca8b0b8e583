// The package's 16-bit attention (bf16, and fp16 on the same kernels with T = __half) on the
// chapter's Hopper kernels (see bridge.hpp): the forward of
// ch04's attention/forward/08_optimized_attention_fused_overlap.cu (flashtma::Overlapped, the
// chapter's fastest forward at one block a query tile) with O written in bf16 straight into
// scaled_dot_product_attention's layout, and the backward of
// attention/backward/11_optimized_attention_backward_fused_wgmma_persistent.cu at d = 128
// (flashtma::bwd's kPersistent: dQ split by columns and made a tile behind, the two consumers' products
// in turns, P^T made while dP^T's product runs, on persistent blocks that take key tiles from a
// counter, the caller's) and of step 10's kernel (three consumers) or step 5's (two) at d = 64
// (backward_plan), with dK and dV written in bf16 the same way; the GPT-2 steps run the same forward
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


// The backward's consumer warpgroups a block at d = 64: three (192 keys a block, each Q and dO tile
// shared by more keys) where the grid is many waves, two (128 keys) where it is a few and its last
// wave would run mostly empty. The chapter's figures (H100, causal): at GPT-2 small's
// (4, 12, 1024, 64), 288 blocks of three, 2.2 waves, took 133 us against 125 with two; at
// (8, 16, 4096, 64), 31 waves either way, three 4.17 ms against 4.67. Four waves is the line
// between. On the H200, through the package (session 51), three were a little faster at the small
// shape (117 us against 119, twice each way): the H100's choice is kept, the difference noted.
// At d = 128 the kernel runs two.
int backward_consumers(int bh, int seq, int d) {
  if (d != 64) return 2;
  const long long blocks = (long long)bh * ((seq + 191) / 192);
  return blocks >= 4LL * lab::current_device().sms ? 3 : 2;
}

// The backward's plan (flashtma::bwd::DqPlan), the chapter's fastest kernel for the block's shape.
// At d = 128 step 11's, kPersistent: step 10's plan (P^T under dP^T's product) on persistent blocks,
// on an H100 in session 90 3.40 ms against step 10's 3.49 at (8, 16, 4096, 128) causal and 5.75
// against 5.85 unmasked. At d = 64 with three consumers (grids of four waves and more) step 10's,
// kPUnderDp, as the chapter's steps 10 and 11 run there: 1.02x of step 9 unmasked and 1.03x causal
// at (8, 16, 4096, 64) on an H100 in session 88; through the package in session 92, unmasked there,
// step 5's kernel took 4.133 ms (0.73x of SDPA's time) where step 11's program (step 10's kernel)
// took 3.958, and step 10's kernel through the package, in a later call, 3.939 (0.76x). With two (the
// small grids, GPT-2 small's among them) step 5's kernel, which they have run since session 51: the
// ring of turns has been timed only with the chapter's three, and kTurnsEvery's ring of two, timed
// in the GPT-2 steps in session 66, was no faster.
int backward_plan(int d, int consumers) {
  if (d == 128) return flashtma::bwd::kPersistent;
  return consumers == 3 ? flashtma::bwd::kPUnderDp : flashtma::bwd::kDqDefault;
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
  if (!hopper_attention_supports(d).empty()) return "";
  const int consumers = backward_consumers(batch * heads, seq, d), plan = backward_plan(d, consumers);
  const char* step = plan == flashtma::bwd::kPersistent ? "step 11"
                     : plan == flashtma::bwd::kPUnderDp ? "step 10"
                                                        : "step 5";  // kDqDefault where dQ is not split
  return std::string(step) + ", " + std::to_string(consumers) + " consumers";
#else
  (void)batch, (void)heads, (void)seq, (void)d;
  return "";
#endif
}

bool hopper_attention_backward_counts(int batch, int heads, int seq, int d) {
#if defined(LAB_SM90A)
  if (!hopper_attention_supports(d).empty()) return false;
  return backward_plan(d, backward_consumers(batch * heads, seq, d)) == flashtma::bwd::kPersistent;
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
  const int bh = batch * heads, consumers = backward_consumers(bh, seq, d), plan = backward_plan(d, consumers);
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
