// The Hopper attention backward's kernel (flash_backward_wgmma) and its host side: the tensor maps
// over bf16 Q, K, V and dO by head and the fp32 dQ it adds to, the shared-memory attribute, the
// launch, and the variant class (Backward) of the two steps that run it alone:
// backward/05_optimized_attention_backward_fused_wgmma.cu, where the lesson is told (its opening
// comment), 06_optimized_attention_backward_fused_wgmma_split_dq.cu (dQ's product split by
// columns across the consumers: kSplitDq), 07_optimized_attention_backward_fused_wgmma_dq_behind.cu
// (dQ made one tile behind: kDqBehind), 08_optimized_attention_backward_fused_wgmma_turns.cu (the
// consumers' products in turns: kTurns), 09_optimized_attention_backward_fused_wgmma_turns_every.cu
// (the turns where dQ is not split too: kTurnsEvery), 10_optimized_attention_backward_fused_wgmma_p_under_dp.cu
// (P^T made while dP^T's product runs: kPFirst), 11_optimized_attention_backward_fused_wgmma_persistent.cu
// (persistent blocks at d = 128: kPersist) and 12_optimized_attention_backward_fused_wgmma_tall.cu (tiles of
// 128 queries at d = 64, dQ split by queries: kTall). The GPT-2 steps that run the Hopper attention launch it
// too (gpt2/fused/hopper_attention.cuh: gpt2/steps/08_optimized_gpt2_step_fused_bf16_hopper.cu, and
// 09_optimized_gpt2_step_fused_bf16_rows.cu with dK and dV into the products' rows, KVRows), and
// so does the package (python/csrc/bridge_attention_hopper.cu), both with dQ split where it applies.
// Q, K, V, dO: bf16 [bh][seq][d]; lse (natural log, as the forwards write it) and delta =
// rowsum(dO o O) fp32 [bh][seq]; dQ fp32 [bh][seq][d], added to (zero it first); dK, dV fp32
// [bh][seq][d], written (or bf16 rows with their column sums: KVRows). d is 64 or 128. The package
// also runs it on fp16 Q, K, V and dO (T = __half: the products' type, P^T's and dS^T's rounding,
// dK's and dV's rows; the chapter's steps are bf16, T's default).
// lab-arch: sm_90a
#pragma once

#include <algorithm>
#include <cstddef>

#include "attention/hopper/flash_tma.cuh"

namespace flashtma::bwd {
// The block: Cn consumer warpgroups of 64 keys and a producer warpgroup; 64-query tiles in kStages
// stages. Shared memory at d = 128: K and V 64 KB, the ring 64 KB, each of the two consumers' dS^T
// 8 KB and dQ partial 32 KB: 210 KB of the 227 (with dQ split, two dS^T buffers and a 16 KB
// partial each: 194 KB). At d = 64 three consumers (192 keys, the default)
// share each Q and dO tile, at 160 registers each (dV and dK take 64); two (128 keys, 240
// registers each) make more, smaller blocks, which fill a small grid's last wave better: the GPT-2
// steps' attention takes two (gpt2/fused/hopper_attention.cuh, kBackwardConsumers).
// How dQ's product is divided (the Plan of Bwd and of the kernel): each consumer all of d over its
// own keys (step 5); split by columns across the consumers (step 6); split, and made one tile
// behind the rest (step 7: kDqBehind); and with the consumers taking turns at the tensor cores
// (step 8: kTurns).
// kTurnsEvery (step 9): step 8's plan where the split applies, and the turns alone elsewhere (d = 64,
// three consumers or two: a ring of turns, dQ each consumer's own over its keys).
// kPUnderDp (step 10): step 9's plan, with P^T made while dP^T's product runs.
// kPersistent (step 11): step 10's plan on persistent blocks.
// kTallTiles (step 12): step 10's plan at d = 64 on query tiles of 128, two consumers, dQ split by queries.
enum DqPlan : int {
  kDqPerConsumer = 0, kDqSplit = 1, kDqSplitBehind = 2, kDqSplitTurns = 3, kTurnsEvery = 4, kPUnderDp = 5,
  kPersistent = 6, kTallTiles = 7
};
// The plan of the launches that do not choose one (the package's and the GPT-2 steps'): step 8's,
// dQ split with the turns. Where the split does not apply (d = 64, as in the GPT-2 steps, or three
// consumers) it runs step 5's kernel, as every plan but kTurnsEvery does there.
// kTurnsEvery (a ring of two turns at the GPT-2 steps' d = 64) was timed as this default in session
// 66, step 17 built both ways on an H200, alternated three times: 7.80 to 7.85 ms against 7.82 to
// 7.87 at small, 12.4 to 12.5 both at medium. No faster there; this stays.
inline constexpr int kDqDefault = kDqSplitTurns;

template <int D, int Cn = (D == 64 ? 3 : 2), int Plan = kDqSplit>
struct Bwd {
  static_assert(Cn == 2 || (Cn == 3 && D == 64), "two consumers, or three at d = 64");
  // Query tiles of 128 (step 12), at d = 64 with two consumers: each consumer's S^T and dP^T are
  // 64 keys x 128 queries (m64n128k16, 64 registers each), dV's and dK's products take 128 queries a
  // tile, and dQ's product is split by queries: consumer c makes the tile's queries 64 c to 64 c + 63
  // over the block's 128 keys, from both consumers' dS^T. Half the handoffs (turns, barriers) of
  // 64-query tiles for the same products, and the L2's dQ additions halved (a 64 x 64 reduction a
  // consumer a tile of 128 queries, where three consumers made one each a tile of 64).
  static constexpr bool kTall = Plan == kTallTiles && D == 64;
  static_assert(!kTall || Cn == 2, "query tiles of 128 with two consumers");
  static constexpr int kConsumers = Cn, kBc = 64 * kConsumers, kBr = kTall ? 128 : 64, kRegions = D / 64;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kStages = 2;
  static constexpr int kKVBytes = kBc * D * 2, kTileBytes = kBr * D * 2;  // K or V; Q or dO (bf16)
  // dQ split by columns (Split, at d = 128 with two consumers; step 6's change): each consumer makes
  // d / 2 of dQ's columns over all the block's keys, reading both consumers' dS^T, so that the
  // block adds one 64 x d tile a query tile to dQ instead of one a consumer (half the TMA
  // reductions into L2). The consumers then hand dS^T to each other: two buffers each (by the
  // tile's parity), and an mbarrier each that says a buffer is written. Otherwise (step 5, and
  // d = 64) each consumer makes all of d over its own keys.
  static constexpr bool kSplitDq = Plan >= kDqSplit && D == 128 && kConsumers == 2 && Plan != kTallTiles;
  // The consumers read each other's dS^T (dQ split by columns, or by queries with kTall).
  static constexpr bool kShareDs = kSplitDq || kTall;
  // dQ one tile behind (step 7): a consumer makes dQ's columns of tile n - 1 after dV and dK of
  // tile n, so it waits on the other consumer's dS^T of the tile before, written half a tile or more
  // ago, not of the tile it has just made: the consumers are no longer held in step at every tile,
  // and the second starts one product behind the first (its first S^T waits on the first's: a
  // named barrier), so that one's softmax and stores run under the other's products. Three dS^T
  // buffers each, and an mbarrier each on which both consumers say they have read it.
  static constexpr bool kDqBehind = kSplitDq && Plan >= kDqSplitBehind;
  // Turns (step 8): the consumers issue their products in turns, a named barrier each (ids 4 and
  // 5), as the forward's ping-pong step: the first's S^T and dP^T, the second's, the first's dV, dK
  // and dQ (of the tile before), the second's; so that each one's softmax and stores run while the
  // other's products hold the tensor cores, by construction rather than by a skew at the start.
  // Step 9 (kTurnsEvery) takes the turns where dQ is not split too: a ring, consumer c passing to
  // c + 1 and the last to the first (three at d = 64 by default, two in the GPT-2 steps).
  static constexpr bool kTurns = (kSplitDq && Plan >= kDqSplitTurns) || Plan >= kTurnsEvery;
  // P^T under dP^T's product (step 10): S^T's products are committed as a group of their own, issued
  // before dP^T's, and the consumer waits for them alone: P^T = exp2(S^T - lse) and its masks are
  // made while dP^T's products still run, and only dS^T waits for those.
  static constexpr bool kPFirst = Plan >= kPUnderDp;
  // Persistent blocks (step 11): a block an SM, each taking the order's next key tile from a counter
  // as it finishes one (longest first under the mask, as the grid's scheduler hands them out); the
  // producer copies the next key tile's first Q and dO as soon as a stage frees and its K and V once
  // every consumer's last dQ product has read K (kv_empty), while the consumers store dK and dV; the
  // stages', dS^T buffers' and barriers' phases run on across key tiles. Where dQ is split (d = 128)
  // only: with_plan runs step 10's kernel for it at d = 64, where the persistent blocks (three
  // consumers) were slower on an H100 in session 90, 2.50 ms against step 10's 2.34 at (8, 16, 4096,
  // 64) causal and 102 us against 95.5 at (4, 12, 1024, 64) causal, while at d = 128 they took 3.40 ms
  // against 3.49 causal and 5.75 against 5.85 unmasked (results/attention_backward_h100_s90/).
  static constexpr bool kPersist = Plan == kPersistent;
  // Step 7's skew at the start (named barrier 3, once): the turns of step 8 order the consumers
  // without it. Timed on an H200 at (8, 16, 4096, 128): 3.53 ms causal with it, 3.63 without.
  static constexpr bool kStagger = kDqBehind && !kTurns;
  static constexpr int kDsBuffers = kDqBehind ? 3 : kShareDs ? 2 : 1, kDqCols = kSplitDq ? D / kConsumers : D;
  static constexpr int kDqRows = 64;  // a consumer's dQ partial: 64 queries (all of a tile but kTall's)
  // A consumer's dS^T (bf16), and its dQ partial (fp32, kDqCols / 32 regions of 64 rows x 128
  // bytes, 128-byte swizzled as the TMA reads them).
  static constexpr int kDsBytes = 64 * kBr * 2, kDqBytes = kDqRows * kDqCols * 4;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160, kProducerRegs = 24;
  static constexpr int kRowsBytes = 2 * kBr * 4;  // a consumer's copy of the tile's lse and delta
  static constexpr int kSmemBytes = 1024 + 2 * kKVBytes + 2 * kStages * kTileBytes +
                                    kConsumers * (kDsBuffers * kDsBytes + kDqBytes + kRowsBytes) +
                                    8 * (1 + 2 * kStages + (kShareDs ? kDsBuffers * kConsumers : 0) +
                                         (kDqBehind ? kDsBuffers * kConsumers : 0) + (kPersist ? 1 : 0)) +
                                    (kPersist ? 8 : 0);  // the next key tile's index, by the key tile's parity
  static_assert((kConsumers * kConsumerRegs + kProducerRegs) * 128 <= 65536, "the register file");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// dK and dV written where the next product reads them instead of by head in fp32 (the GPT-2 step's
// dQKV rows, optimized_gpt2_step_fused_bf16_rows.cu): in bf16, head b heads + h's key t in row
// b seq + t of ld elements, columns [h cols, h cols + cols) from dk and from dv (cols: the model's
// head size, at most the kernel's d; the padding is not written), and each column's sum over the
// keys, from the fp32 values, added to db_k[h cols + c] and db_v[h cols + c] (the product's bias
// gradient; zero it first). dk null: by head, in fp32.
template <class T = __nv_bfloat16>
struct KVRowsOf {
  T *dk = nullptr, *dv = nullptr;
  float *db_k = nullptr, *db_v = nullptr;
  int heads = 1, cols = 0;
  std::size_t ld = 0;
};
using KVRows = KVRowsOf<>;

// The order the blocks run in: block b of the 1-D grid takes key tile `tile` of head `head`.
// Causal, the key tiles are not equal work: tile t's keys are seen by the queries from t kBc on,
// so tile 0 of a head has the most query tiles to walk and its last tile the fewest (16 against 2
// at GPT-2 small's 1024 keys). Blocks start in the grid's order as SMs free up; head after head,
// each head's longest tile starts where the previous head's shortest did, and the last heads'
// longest tiles run alone at the end. So the grid runs the heads `group` at a time, tile 0 of each
// of them first, then tile 1 of each, and so on: longest first, which leaves a short tail. group
// is as many heads as keep their Q and dO (the tensors every key tile of a head reads again) within
// kOrderBytes of L2: at GPT-2's shapes every head at once; at 4096 keys of width 128, 8 heads. With
// group 1 (and not causal, where the tiles are equal), head after head.
// An H200, causal, L2 flushed (session 46): at GPT-2 small's (4, 12, 1024, 64), 100 us against 130
// head after head (SDPA bf16, cuDNN: 88); at (8, 16, 4096, 64) 2.56 against 2.66 ms; at
// (8, 16, 4096, 128) 4.10 both. All heads at once there, their Q and dO 128 MB, past L2, took 2.72
// and 5.33 ms; of 4, 16 and 64 MiB, 16 was the fastest or as fast at all three.
// Again in session 66 on step 8's kernel (an H200, (8, 16, 4096, 128) causal, alternated twice,
// each a build with another kOrderBytes): 3.5 ms at 8 and 16 MiB, 3.6 at 32 and 48 (the medians'
// first two digits; the script cut the rest). 16 stays.
struct Order {
  int bh = 1, tiles = 1, group = 1;
  // kPersist: two words, zero before the launch and zero again after it (the last block out clears
  // them, so that a buffer zeroed once serves every launch, a graph's replays too): [0] the key tiles
  // handed out past the grid's first, [1] the blocks done. A launch's own: two launches in flight on
  // one buffer would share out each other's key tiles.
  unsigned* counter = nullptr;
  struct Place {
    int head, tile;
  };
  __host__ __device__ Place place(int b) const {
    const int per = group * tiles, first = b / per * group, in = b % per;
    const int heads = bh - first < group ? bh - first : group;  // the last group may be short
    return {first + in % heads, in / heads};
  }
};
inline constexpr std::size_t kOrderBytes = std::size_t(16) << 20;
inline Order order_for(int bh, int tiles, int seq, int d, bool causal) {
  Order o{bh, tiles, 1};
  if (!causal) return o;
  const std::size_t per_head = std::size_t(seq) * d * 2 * 2;  // Q and dO in bf16
  o.group = int(std::clamp<std::size_t>(kOrderBytes / per_head, 1, std::size_t(bh)));
  return o;
}

#if defined(LAB_SM90A)
namespace tma = lab::tma;

template <int D, int Cn, int Plan>
struct Smem {
  using C = Bwd<D, Cn, Plan>;
  std::uint8_t *k, *v, *q, *dout, *ds, *dq;
  float* rows;  // per consumer: lse (log2 units) then delta, kBr each
  std::uint64_t *kv_full, *full, *empty;
  std::uint64_t* ds_full;   // kShareDs: [consumer][buffer], its dS^T buffer written
  std::uint64_t* ds_empty;  // kDqBehind: [consumer][buffer], read by every consumer's dQ product
  std::uint64_t* kv_empty;  // kPersist: K and V read by every consumer's last product of a key tile
  int* next_item;           // kPersist: [2], the key tile the producer copies, by its count's parity (-1: none)
  // Consumer c's dS^T buffer b (the tile's index modulo kDsBuffers picks it).
  __device__ std::uint8_t* ds_of(int c, int b) const { return ds + (c * C::kDsBuffers + b) * C::kDsBytes; }
  __device__ explicit Smem(std::uint8_t* raw) {
    k = raw + ((1024 - tma::smem_address(raw) % 1024) % 1024);
    v = k + C::kKVBytes;
    q = v + C::kKVBytes;                      // kStages Q tiles
    dout = q + C::kStages * C::kTileBytes;    // kStages dO tiles
    ds = dout + C::kStages * C::kTileBytes;   // per consumer, kDsBuffers each
    dq = ds + C::kConsumers * C::kDsBuffers * C::kDsBytes;  // per consumer
    rows = reinterpret_cast<float*>(dq + C::kConsumers * C::kDqBytes);
    kv_full = reinterpret_cast<std::uint64_t*>(rows + C::kConsumers * 2 * C::kBr);
    full = kv_full + 1, empty = full + C::kStages, ds_full = empty + C::kStages;
    ds_empty = ds_full + C::kConsumers * C::kDsBuffers;
    if constexpr (C::kPersist)  // after the barriers the plan has (ds_full and ds_empty where it has them)
      kv_empty = ds_full + (C::kShareDs ? C::kConsumers * C::kDsBuffers : 0) +
                 (C::kDqBehind ? C::kConsumers * C::kDsBuffers : 0),
      next_item = reinterpret_cast<int*>(kv_empty + 1);
  }
};

// The warpgroup's named barrier (ids 1, 2; 0 is __syncthreads).
__device__ __forceinline__ void group_sync(int consumer) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");
}
// kTurns, Cn consumers in a ring: a consumer waits for its turn on its barrier (4 + consumer; the
// previous consumer's 128 arrivals and its own 128 complete it) and passes the turn by arriving on
// the next one's (the last consumer's next is the first).
__device__ __forceinline__ void turn_wait(int consumer) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(4 + consumer) : "memory");
}
template <int Cn>
__device__ __forceinline__ void turn_pass(int consumer) {
  // No %: with (consumer + 1) % Cn ptxas spilled 4 to 16 bytes in step 8's d = 128 kernels and step
  // 9's three-consumer ones (session 64, sm_90a); with these selects, none.
  const int next = Cn == 2 ? consumer ^ 1 : consumer + 1 == Cn ? 0 : consumer + 1;
  asm volatile("bar.arrive %0, 256;\n" ::"r"(4 + next) : "memory");
}

template <int D, bool Causal, int Cn, int Plan, class T = __nv_bfloat16>
__global__ void __launch_bounds__(Bwd<D, Cn, Plan>::kThreads, 1)
    flash_backward_wgmma(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
                         const __grid_constant__ CUtensorMap vmap, const __grid_constant__ CUtensorMap dmap,
                         const __grid_constant__ CUtensorMap dqmap, const float* __restrict__ lse,
                         const float* __restrict__ delta,
                         float* __restrict__ dk, float* __restrict__ dv, int seq, float scale, float scale_log2,
                         const KVRowsOf<T> out, const Order order, const Fold fold) {
  using C = Bwd<D, Cn, Plan>;
  extern __shared__ std::uint8_t smem_raw[];
  const Smem<D, Cn, Plan> sh(smem_raw);
  Order::Place at = order.place(int(blockIdx.x));  // kPersist: the block's first key tile, then the next
  int key0 = at.tile * C::kBc, head = at.head;
  const int tiles = (seq + C::kBr - 1) / C::kBr;
  int first = Causal ? key0 / C::kBr : 0;  // earlier queries see no key here
  const int group = int(threadIdx.x) / 128;
  if (threadIdx.x == 0) {
    tma::init(sh.kv_full, 1);
    for (int st = 0; st < C::kStages; ++st) tma::init(sh.full + st, 1), tma::init(sh.empty + st, 4 * C::kConsumers);
    if constexpr (C::kShareDs)
      for (int b = 0; b < C::kDsBuffers * C::kConsumers; ++b) tma::init(sh.ds_full + b, 4);  // a warp each
    if constexpr (C::kDqBehind)  // each warp of each consumer, once its dQ product has read the buffer
      for (int b = 0; b < C::kDsBuffers * C::kConsumers; ++b) tma::init(sh.ds_empty + b, 4 * C::kConsumers);
    if constexpr (C::kPersist) tma::init(sh.kv_empty, 4 * C::kConsumers);  // each warp of each consumer
    tma::fence_init();
  }
  __syncthreads();

  if (group == 0) {  // the producer
    wgmma::setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) {
      tma::prefetch_map(&qmap), tma::prefetch_map(&kmap), tma::prefetch_map(&vmap), tma::prefetch_map(&dmap);
      // K and V of the block's key tile, then its Q and dO tiles through the ring: Q, K and V where
      // fold says (by head, or over the QKV product's rows), dO by head.
      // kPersist: key tile after key tile, the block's own first, then the order's next from the
      // counter as this one's copies are issued; n counts every query tile copied (the stages' phases
      // run on). A key tile's index goes to the consumers through next_item before its K and V's
      // barrier completes; its first Q and dO go into the first stage that frees, then its K and V
      // once every consumer's last product of the key tile before has read them. None left: next_item
      // -1, the barrier completed without copies, and the last block out zeroes the counters.
      int item = int(blockIdx.x);
      for (int it = 0, done = 0;; ++it) {
        if constexpr (C::kPersist) {
          if (it > 0) item = int(gridDim.x) + int(atomicAdd(order.counter, 1u));
          if (item >= order.bh * order.tiles) {
            tma::wait(sh.kv_empty, unsigned(it - 1) & 1);  // it > 0: the grid is at most one block a key tile
            sh.next_item[it & 1] = -1;
            tma::arrive(sh.kv_full);
            __threadfence();
            if (atomicAdd(order.counter + 1, 1u) == gridDim.x - 1) order.counter[0] = 0, order.counter[1] = 0;
            break;
          }
          sh.next_item[it & 1] = item;
        }
        const Order::Place pl = order.place(item);
        const int k0 = pl.tile * C::kBc, hd = pl.head, fst = Causal ? k0 / C::kBr : 0;
        const Fold::At ka = fold.at(k0, hd, seq), qa = fold.at(0, hd, seq);  // qa: the head's query 0
        auto load_kv = [&] {
          tma::arrive_expect_bytes(sh.kv_full, 2 * C::kKVBytes);
          for (int g = 0; g < C::kRegions; ++g) {
            tma::load_tile(sh.k + g * C::kBc * 128, &kmap, 64 * g, ka.row, ka.head, sh.kv_full);
            tma::load_tile(sh.v + g * C::kBc * 128, &vmap, 64 * g, ka.row, ka.head, sh.kv_full);
          }
        };
        if (it == 0) load_kv();
        for (int i = fst; i < tiles; ++i) {
          const int n = done + i - fst, st = n % C::kStages;
          tma::wait(sh.empty + st, ((n / C::kStages) & 1) ^ 1);
          tma::arrive_expect_bytes(sh.full + st, 2 * C::kTileBytes);
          for (int g = 0; g < C::kRegions; ++g)
            for (int h = 0; h < C::kBr / 64; ++h) {  // the maps' boxes are 64 rows (two a kTall tile)
              tma::load_tile(sh.q + st * C::kTileBytes + g * C::kBr * 128 + h * 8192, &qmap, 64 * g,
                             qa.row + i * C::kBr + 64 * h, qa.head, sh.full + st);
              tma::load_tile(sh.dout + st * C::kTileBytes + g * C::kBr * 128 + h * 8192, &dmap, 64 * g,
                             i * C::kBr + 64 * h, hd, sh.full + st);
            }
          if (C::kPersist && it > 0 && i == fst) {
            tma::wait(sh.kv_empty, unsigned(it - 1) & 1);
            load_kv();
          }
        }
        if constexpr (!C::kPersist) break;
        done += tiles - fst;
      }
    }
  } else {
    wgmma::setmaxnreg_inc<C::kConsumerRegs>();
    const int consumer = group - 1, warp = int(threadIdx.x / 32) % 4, lane = int(threadIdx.x % 32);
    const int g = lane / 4, t = lane % 4;
    const bool leader = threadIdx.x % 128 == 0;
    int keyw = key0 + 64 * consumer;        // the warpgroup's 64 keys
    int krow0 = keyw + 16 * warp + g;       // this lane's keys: krow0, krow0 + 8
    const std::uint8_t* kw = sh.k + 64 * consumer * 128;  // its rows of K and V in each region
    const std::uint8_t* vw = sh.v + 64 * consumer * 128;
    std::uint8_t* ds = sh.ds_of(consumer, 0);  // with kShareDs, the tile's index picks the buffer
    std::uint8_t* dqs = sh.dq + consumer * C::kDqBytes;
    float* rows = sh.rows + consumer * 2 * C::kBr;  // lse (log2 units), then delta
    const int me = int(threadIdx.x % 128);
    std::size_t rows_before = std::size_t(head) * seq;
    int done = 0;  // kPersist: query tiles of the block's earlier key tiles (the dS^T buffers' phases run on)
    float dk_acc[1][D / 8][4] = {}, dv_acc[1][D / 8][4] = {};
    float(&dkd)[D / 2] = reinterpret_cast<float(&)[D / 2]>(dk_acc);
    float(&dvd)[D / 2] = reinterpret_cast<float(&)[D / 2]>(dv_acc);

    // dQ (this warpgroup's share) of tile `tile` (counted from `first`) = dS K over its 64 keys, 64
    // columns of d at a time (the register file holds dV and dK besides): dS read M-major from
    // dS^T, K N-major, 16 keys (2048 bytes) a wgmma. Each half goes to shared memory, scaled, as rows
    // of d floats (as in device memory) once the previous tile's reduction has read the buffer.
    auto dq_tile = [&](int tile, bool pass) {  // pass: kTurns, pass the turn once dQ's product is issued
      (void)pass;
      const int gt = done + tile, buf = gt % C::kDsBuffers, row0 = (first + tile) * C::kBr;
      if (leader) tma::bulk_wait_read<0>();
      group_sync(consumer);
      // kSplitDq: this consumer's kDqCols columns of dQ over the block's kBc keys, from both
      // consumers' dS^T of this tile (written once their mbarriers' phases for this buffer
      // complete: a buffer's phase is tile / kDsBuffers) and K's rows of the whole block.
      // kTall: this consumer's 64 queries of the tile over the block's keys, from both consumers' dS^T.
      if constexpr (C::kShareDs)
        for (int c = 0; c < C::kConsumers; ++c)
          tma::wait(sh.ds_full + C::kDsBuffers * c + buf, unsigned(gt / C::kDsBuffers) & 1);
#pragma unroll
      for (int half = 0; half < C::kDqCols / 64; ++half) {
        float dq_acc[1][8][4];
        float(&dqd)[32] = reinterpret_cast<float(&)[32]>(dq_acc);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < (C::kShareDs ? C::kBc : 64) / 16; ++kk) {
          // kTall: dS^T's rows are 128 queries, two regions of 64 (8 KB each): this consumer's is region `consumer`.
          const std::uint8_t* a = C::kShareDs ? sh.ds_of(kk / 4, buf) + (C::kTall ? consumer * 8192 : 0) + (kk % 4) * 2048
                                              : ds + kk * 2048;
          const int key = C::kShareDs ? 16 * kk : 64 * consumer + 16 * kk, region = C::kSplitDq ? consumer : half;
          wgmma::mma_ss<1, 1, T>(dqd, wgmma::descriptor_mn(a, 0),
                              wgmma::descriptor_mn(sh.k + region * C::kBc * 128 + key * 128, 0), kk > 0);
        }
        wgmma::commit();
        if constexpr (C::kTurns)  // dV's, dK's and dQ's products issued: the other consumer's turn
          if (pass) turn_pass<Cn>(consumer);
        wgmma::wait<0>();
        if constexpr (C::kDqBehind)  // this warp has read every consumer's dS^T of the tile
          if (lane == 0)
            for (int c = 0; c < C::kConsumers; ++c) tma::arrive(sh.ds_empty + C::kDsBuffers * c + buf);
        // A float2 store is served a half-warp at a time (16 lanes, 128 bytes a wavefront). In the
        // swizzled rows, lanes g and g ^ 1 of the same nn land in the same two 16-byte chunks (chunk
        // 2 (nn % 4) + t / 2, XOR g: the pair {x, x ^ 1} for both), a 2-way conflict: four wavefronts
        // a store instead of two. So the odd rows store their column groups in the order nn ^ 2:
        // then the four rows of a half-warp take four different chunk pairs (a select of registers,
        // no indexing).
        const bool odd = g & 1;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = 16 * warp + g + 8 * h;
#pragma unroll
          for (int nn = 0; nn < 8; ++nn) {  // column 64 half + 8 m + 2 t of the partial: region, 16-byte chunk, word
            const int m = odd ? nn ^ 2 : nn, col = 64 * half + 8 * m + 2 * t, chunk = (col % 32) / 4;
            const float a = odd ? dq_acc[0][nn ^ 2][2 * h] : dq_acc[0][nn][2 * h];
            const float b = odd ? dq_acc[0][nn ^ 2][2 * h + 1] : dq_acc[0][nn][2 * h + 1];
            *reinterpret_cast<float2*>(dqs + (col / 32) * (C::kDqRows * 128) + r * 128 + ((chunk ^ (r % 8)) * 16) +
                                       (col % 4) * 4) = make_float2(a * scale, b * scale);
          }
        }
      }
      tma::fence_proxy_async();
      group_sync(consumer);
      if (leader) {  // a reduction a region of 32 columns; the TMA drops the rows past seq
        const int col0 = C::kSplitDq ? C::kDqCols * consumer : 0, qrow = C::kTall ? row0 + 64 * consumer : row0;
#pragma unroll
        for (int region = 0; region < C::kDqCols / 32; ++region)
          tma::reduce_add_tile(&dqmap, dqs + region * C::kDqRows * 128, col0 + 32 * region, qrow, head);
        tma::bulk_commit();
      }
    };
    for (int it = 0;; ++it) {  // kPersist: the block's key tiles; otherwise its one
    tma::wait(sh.kv_full, C::kPersist ? unsigned(it) & 1 : 0u);
    if constexpr (C::kPersist) {  // the key tile the producer copies (the block's own first at it = 0)
      const int item = *static_cast<volatile int*>(sh.next_item + (it & 1));
      if (item < 0) break;
      at = order.place(item), key0 = at.tile * C::kBc, head = at.head, first = Causal ? key0 / C::kBr : 0;
      keyw = key0 + 64 * consumer, krow0 = keyw + 16 * warp + g, rows_before = std::size_t(head) * seq;
    }
    if constexpr (C::kStagger)  // the second consumer's first products wait on the first's
      if (consumer == 1) asm volatile("bar.sync 3, 256;\n" ::: "memory");
    if constexpr (C::kTurns)  // the first turn is the first consumer's: the last passes it
      if (consumer == Cn - 1) turn_pass<Cn>(consumer);

    for (int i = first; i < tiles; ++i) {
      const int n = i - first, gn = done + n, st = gn % C::kStages, row0 = i * C::kBr;
      if constexpr (C::kShareDs) ds = sh.ds_of(consumer, gn % C::kDsBuffers);
      const std::uint8_t* qt = sh.q + st * C::kTileBytes;
      const std::uint8_t* dot = sh.dout + st * C::kTileBytes;
      // The tile's lse (log2 units) and delta, one value a thread, to shared memory once the products
      // are issued (the previous tile's readers have all passed its group_sync since).
      // kTall: 128 queries, both values of query row0 + me.
      const int query = row0 + me % C::kBr;
      const float mine = query >= seq ? 0.f : me < C::kBr ? __ldg(lse + rows_before + query) * flash::kLog2e
                                                         : __ldg(delta + rows_before + query);
      const float mine_delta = C::kTall && query < seq ? __ldg(delta + rows_before + query) : 0.f;

      // S^T = K Q^T and dP^T = V dO^T: 64 keys x 64 queries each, one m64n64k16 per 16 of d.
      constexpr int kJ = C::kBr / 8;  // 8-query column groups of the accumulators
      float s[1][kJ][4], dp[1][kJ][4];
      float(&sd)[4 * kJ] = reinterpret_cast<float(&)[4 * kJ]>(s);
      float(&dpd)[4 * kJ] = reinterpret_cast<float(&)[4 * kJ]>(dp);
      // m64n64k16, or m64n128k16 for kTall's 128 queries
      auto product = [&](float(&acc)[4 * kJ], std::uint64_t a, std::uint64_t b, bool accumulate) {
        if constexpr (kJ == 16)
          wgmma::mma_ss_n128<0, 0, T>(acc, a, b, accumulate);
        else
          wgmma::mma_ss<0, 0, T>(acc, a, b, accumulate);
      };
      tma::wait(sh.full + st, unsigned(gn / C::kStages) & 1);
      if constexpr (C::kTurns) turn_wait(consumer);
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const int off = (kk / 4) * C::kBc * 128, qoff = (kk / 4) * C::kBr * 128;
        product(sd, wgmma::descriptor(kw + off) + 2 * (kk % 4), wgmma::descriptor(qt + qoff) + 2 * (kk % 4), kk > 0);
        if constexpr (!C::kPFirst)
          product(dpd, wgmma::descriptor(vw + off) + 2 * (kk % 4), wgmma::descriptor(dot + qoff) + 2 * (kk % 4),
                  kk > 0);
      }
      if constexpr (C::kPFirst) {
        wgmma::commit();  // S^T's group: step 10 issues all of S^T's products before dP^T's
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const int off = (kk / 4) * C::kBc * 128, qoff = (kk / 4) * C::kBr * 128;
          product(dpd, wgmma::descriptor(vw + off) + 2 * (kk % 4), wgmma::descriptor(dot + qoff) + 2 * (kk % 4),
                  kk > 0);
        }
      }
      wgmma::commit();
      if constexpr (C::kTurns) turn_pass<Cn>(consumer);  // S^T's and dP^T's products issued
      rows[me] = mine;
      if constexpr (C::kTall) rows[C::kBr + me] = mine_delta;
      if constexpr (C::kPFirst)
        wgmma::wait<1>();  // S^T's products done; dP^T's may still run
      else
        wgmma::wait<0>();
      if constexpr (C::kStagger)  // the first consumer's first products are done: the second's may start
        if (consumer == 0 && n == 0) asm volatile("bar.arrive 3, 256;\n" ::: "memory");
      group_sync(consumer);

      // P^T = exp2(S^T scale log2 e - lse) and dS^T = P^T (dP^T - delta), in place; masked: a key or
      // a query past seq, a key after its query. Step 10 makes P^T first, then waits for dP^T.
      const bool edge = row0 + C::kBr > seq || keyw + 64 > seq || (Causal && row0 < keyw + 64);
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = 8 * j + 2 * t + (e & 1), query = row0 + c, key = krow0 + 8 * (e / 2);
          float p = mma::exp2_ftz(fmaf(s[0][j][e], scale_log2, -rows[c]));
          if (edge && (query >= seq || key >= seq || (Causal && key > query))) p = 0.f;
          s[0][j][e] = p;
          if constexpr (!C::kPFirst) dp[0][j][e] = p * (dp[0][j][e] - rows[C::kBr + c]);
        }
      if constexpr (C::kPFirst) {
        wgmma::wait<0>();  // dP^T's products done
#pragma unroll
        for (int j = 0; j < kJ; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) dp[0][j][e] = s[0][j][e] * (dp[0][j][e] - rows[C::kBr + 8 * j + 2 * t + (e & 1)]);
      }
      std::uint32_t pa[kJ / 2][4], da[kJ / 2][4];  // the A fragments of P^T and dS^T, 16 queries each
      flashtma::pack_p<T>(s, pa);
      flashtma::pack_p<T>(dp, da);
      // kDqBehind: the buffer's last tile (n - kDsBuffers) has been read by both consumers' dQ.
      if constexpr (C::kDqBehind)
        tma::wait(sh.ds_empty + C::kDsBuffers * consumer + gn % C::kDsBuffers,
                  (unsigned(gn / C::kDsBuffers) & 1) ^ 1);
      // dS^T to shared memory for dQ: row r (a key) is 64 queries, 128 bytes, chunk c at c ^ (r % 8)
      // (kTall: 128 queries, two such regions of 64 rows, 8 KB apart).
      {
        auto put = [&](int r, int chunk, std::uint32_t x) {
          *reinterpret_cast<std::uint32_t*>(ds + (chunk / 8) * 8192 + r * 128 + (((chunk % 8) ^ (r % 8)) * 16) + 4 * t) =
              x;
        };
        const int r = 16 * warp + g;
#pragma unroll
        for (int kk = 0; kk < kJ / 2; ++kk) {
          put(r, 2 * kk, da[kk][0]), put(r + 8, 2 * kk, da[kk][1]);
          put(r, 2 * kk + 1, da[kk][2]), put(r + 8, 2 * kk + 1, da[kk][3]);
        }
      }
      wgmma::fence_proxy_async();  // the stores, before wgmma reads dS^T through the async proxy
      if constexpr (C::kShareDs) {  // both consumers' dQ products read it: say it is written
        __syncwarp();
        if (lane == 0) tma::arrive(sh.ds_full + C::kDsBuffers * consumer + gn % C::kDsBuffers);
      } else {
        group_sync(consumer);
      }

      // dV += P^T dO, dK += dS^T Q (16 queries a wgmma, dO and Q read N-major).
      if constexpr (C::kTurns) turn_wait(consumer);  // the turn holds dV's, dK's and the dQ product after them
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < kJ / 2; ++kk) {
        const std::uint64_t bo = wgmma::descriptor_mn(dot + kk * 2048, C::kBr * 128);
        const std::uint64_t bq = wgmma::descriptor_mn(qt + kk * 2048, C::kBr * 128);
        if constexpr (D == 128)
          wgmma::mma_rs_n128<1, T>(dvd, pa[kk], bo), wgmma::mma_rs_n128<1, T>(dkd, da[kk], bq);
        else
          wgmma::mma_rs_n64<1, T>(dvd, pa[kk], bo), wgmma::mma_rs_n64<1, T>(dkd, da[kk], bq);
      }
      wgmma::commit();
      wgmma::wait<0>();  // P^T and dS^T's registers free again (the register file holds dV, dK and dQ)
      if (lane == 0) tma::arrive(sh.empty + st);  // Q and dO of this stage are used up
      if constexpr (C::kDqBehind) {
        if (n > 0) {
          dq_tile(n - 1, true);  // the tile before's, whose dS^T both consumers wrote a tile ago
        } else {
          if constexpr (C::kTurns) turn_pass<Cn>(consumer);
          group_sync(consumer);  // as dq_tile's: the next tile's lse and delta overwrite this one's
        }
      } else {  // with turns, the last consumer's last turn is passed to no one
        dq_tile(n, !(consumer == Cn - 1 && i == tiles - 1));
      }
    }
    if constexpr (C::kDqBehind) {  // the last tile's (a turn too; the last consumer's last passes none)
      if constexpr (C::kTurns) turn_wait(consumer);
      dq_tile(tiles - 1 - first, consumer == 0);  // two consumers: the second's last passes none
    }
    if constexpr (C::kPersist) {  // this warp's products that read K and V are done: the next may come
      __syncwarp();
      if (lane == 0) tma::arrive(sh.kv_empty);
    }
    if (leader) tma::bulk_wait<0>();

    if (out.dk) {  // 16-bit rows (T), and the columns' sums
      const int hh = head % out.heads;
      const std::size_t base = std::size_t(head / out.heads) * seq * out.ld + std::size_t(hh) * out.cols;
      float sk[D / 8][2] = {}, sv[D / 8][2] = {};
      auto put = [&](T* r, int col, float a, float b) { mma::store16_pair(r, col, out.cols, a, b); };
      // Whole rows, 16-byte aligned: 16 bytes a lane after the quad's words are traded, as the
      // forward's O (mma::store16_row), where a lane's pairs wrote half a sector each.
      const bool whole = mma::whole_rows16(out.dk + base, out.ld, out.cols, D) &&
                         mma::whole_rows16(out.dv + base, out.ld, out.cols, D);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = krow0 + 8 * h;
        T* krow = out.dk + base + std::size_t(key) * out.ld;
        T* vrow = out.dv + base + std::size_t(key) * out.ld;
        if (key < seq)
#pragma unroll
          for (int nn = 0; nn < D / 8; ++nn) {
            sk[nn][0] += dk_acc[0][nn][2 * h] * scale, sk[nn][1] += dk_acc[0][nn][2 * h + 1] * scale;
            sv[nn][0] += dv_acc[0][nn][2 * h], sv[nn][1] += dv_acc[0][nn][2 * h + 1];
          }
        if (whole) {  // every lane: the quads' shuffles
          mma::store16_row<D / 8>(krow, key < seq, [&](int nn) {
            const float* k = dk_acc[0][nn] + 2 * h;
            return make_float2(k[0] * scale, k[1] * scale);
          });
          mma::store16_row<D / 8>(vrow, key < seq, [&](int nn) {
            const float* v = dv_acc[0][nn] + 2 * h;
            return make_float2(v[0], v[1]);
          });
        } else if (key < seq) {
#pragma unroll
          for (int nn = 0; nn < D / 8; ++nn) {
            const int col = 8 * nn + 2 * t;
            put(krow + col, col, dk_acc[0][nn][2 * h] * scale, dk_acc[0][nn][2 * h + 1] * scale);
            put(vrow + col, col, dv_acc[0][nn][2 * h], dv_acc[0][nn][2 * h + 1]);
          }
        }
      }
      // The columns' sums over the warpgroup's 64 keys: a column's 16 keys of a warp lie in the 8
      // lanes of the same t (lane bits 2 to 4), summed by shuffles; the first of them puts the
      // warp's sum in shared memory (the consumer's dS^T buffer, free once its last product has
      // completed: the loop's last group_sync), and after the warpgroup's barrier one thread a
      // column adds the four warps' sums: one atomic a column a warpgroup.
      // With kSplitDq the other consumer may still read this consumer's last dS^T: the buffer of the
      // other parity is free (its last reader, the other's previous dQ, came before the last wait).
      // With kDqBehind it may still read the last two (its dQ runs a tile behind): the third is free
      // (its last reader, the other's dQ of tile last - 2, came before the other wrote the last tile's
      // dS^T, on which this consumer's last dQ waited), as are the ones no tile used.
      if constexpr (C::kShareDs) ds = sh.ds_of(consumer, (done + tiles - first) % C::kDsBuffers);
      float* part = reinterpret_cast<float*>(ds);  // [warp][dK, dV][D]
#pragma unroll
      for (int nn = 0; nn < D / 8; ++nn)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
#pragma unroll
          for (int o = 4; o < 32; o *= 2) {
            sk[nn][e] += __shfl_xor_sync(~0u, sk[nn][e], o);
            sv[nn][e] += __shfl_xor_sync(~0u, sv[nn][e], o);
          }
          if (g == 0) {
            part[(2 * warp) * D + 8 * nn + 2 * t + e] = sk[nn][e];
            part[(2 * warp + 1) * D + 8 * nn + 2 * t + e] = sv[nn][e];
          }
        }
      static_assert(4 * 2 * D * 4 <= C::kDsBytes, "the warps' column sums fit the dS^T buffer");
      group_sync(consumer);
      for (int i = me; i < 2 * D; i += 128) {
        const int which = i / D, col = i % D;
        if (col >= out.cols) continue;
        float sum = 0;
#pragma unroll
        for (int w = 0; w < 4; ++w) sum += part[(2 * w + which) * D + col];
        atomicAdd((which == 0 ? out.db_k : out.db_v) + std::size_t(hh) * out.cols + col, sum);
      }
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = krow0 + 8 * h;
        if (key >= seq) continue;
        const std::size_t at = (rows_before + key) * D;
#pragma unroll
        for (int nn = 0; nn < D / 8; ++nn) {
          *reinterpret_cast<float2*>(dk + at + 8 * nn + 2 * t) =
              make_float2(dk_acc[0][nn][2 * h] * scale, dk_acc[0][nn][2 * h + 1] * scale);
          *reinterpret_cast<float2*>(dv + at + 8 * nn + 2 * t) =
              make_float2(dv_acc[0][nn][2 * h], dv_acc[0][nn][2 * h + 1]);
        }
      }
    }
    if constexpr (!C::kPersist) {
      break;
    } else {  // on to the next key tile (the loop's top reads which)
      done += tiles - first;
#pragma unroll
      for (int nn = 0; nn < D / 8; ++nn)
#pragma unroll
        for (int e = 0; e < 4; ++e) dk_acc[0][nn][e] = 0.f, dv_acc[0][nn][e] = 0.f;
    }
    }  // the key tiles
  }
}
#endif

// The consumer warpgroups a block of width d runs: `consumers` (2, or 3 at d = 64), or with 0 the
// default (3 at d = 64, 2 at d = 128).
inline int consumers_for(int d, int consumers) {
  if (consumers == 0) return d == 64 ? 3 : 2;
  if (consumers != 2 && !(consumers == 3 && d == 64))
    throw lab::Error("the Hopper attention backward runs 2 consumer warpgroups, or 3 at d = 64, not " +
                     std::to_string(consumers) + " at d = " + std::to_string(d));
  return consumers;
}

// The five tensor maps a launch reads and adds through: Q and dO by 64 queries, K and V by a
// block's keys (64 a consumer), dQ in boxes of 32 columns by 64 queries (fp32, 128-byte swizzled)
// for the reductions; and the consumers the launch runs, which the K and V boxes were made for.
// dq_plan: how dQ's product is divided (DqPlan; where a split does not apply, at d = 64 or with
// three consumers, every plan but kTurnsEvery runs step 5's kernel). fold: where Q's, K's and V's rows lie in their
// maps, by head (maps) or over the QKV product's rows (rows_maps); dO and dQ are by head in both.
struct Maps {
  CUtensorMap q{}, k{}, v{}, dout{}, dq{};
  int consumers = 0;
  int dq_plan = kDqDefault;
  Fold fold{};
  unsigned* counter = nullptr;  // kPersistent's (Order::counter), the caller's
};
// Q's, K's and V's maps made by map_of(base, box rows) (by head or over rows, below), dO's and dQ's by head.
template <class T, class MapOf>
inline Maps maps_of(const T* q, const T* k, const T* v, MapOf&& map_of, const T* dout, float* dq, int bh, int seq,
                    int d, int consumers, Fold fold) {
  const attn::Dims a(lab::Shape{1, bh, seq, d, 0});
  const int cn = consumers_for(d, consumers), bc = 64 * cn, br = Bwd<128>::kBr;
  Maps m;
  m.consumers = cn;
  m.fold = fold;
  m.q = map_of(q, br), m.k = map_of(k, bc), m.v = map_of(v, bc), m.dout = head_map(dout, a, br);
  m.dq = lab::tma::f32_map_swizzle128(dq, {std::uint64_t(d), std::uint64_t(seq), std::uint64_t(bh)},
                                      {std::uint64_t(d) * 4, std::uint64_t(seq) * d * 4}, {32, 64, 1});
  return m;
}
template <class T>
inline Maps maps(const T* q, const T* k, const T* v, const T* dout, float* dq, int bh, int seq, int d,
                 int consumers = 0) {
  const attn::Dims a(lab::Shape{1, bh, seq, d, 0});
  return maps_of(q, k, v, [&](const T* base, int rows) { return head_map(base, a, rows); }, dout, dq, bh, seq, d,
                 consumers, Fold{});
}
// maps() with Q, K and V read over rows (flashtma::rows_maps' layout: token t's row of ld elements
// from q, k and v, head h's d columns at h d), bh = batch heads heads of seq tokens each.
template <class T>
inline Maps rows_maps(const T* q, const T* k, const T* v, std::size_t ld, const T* dout, float* dq, int bh, int heads,
                      int seq, int d, int consumers = 0) {
  const std::size_t tokens = std::size_t(bh / heads) * seq;
  return maps_of(q, k, v, [&](const T* base, int rows) { return rows_map(base, tokens, heads, d, ld, rows); }, dout,
                 dq, bh, seq, d, consumers, Fold{heads});
}

// Calls f(d, causal, consumers as integral constants) for the kernel of width d (64 or 128), causal
// and `consumers` (consumers_for's).
template <class F>
void with_consumers(int d, bool causal, int consumers, F&& f) {
  with_kernel(d, causal, [&](auto dc, auto cc) {
    if constexpr (decltype(dc)::value == 64) {
      if (consumers == 2) return f(dc, cc, std::integral_constant<int, 2>{});
      return f(dc, cc, std::integral_constant<int, 3>{});
    } else {
      f(dc, cc, std::integral_constant<int, 2>{});
    }
  });
}

// with_consumers's f(d, causal, consumers, plan) with the plan an integral constant too: dq_plan
// where it changes the kernel (d = 128, two consumers; kTurnsEvery there is kDqSplitTurns's kernel),
// kTurnsEvery's turns alone where dQ is not split, kPUnderDp's own kernel at both, kPersistent's where
// dQ is split and kPUnderDp's elsewhere (Bwd::kPersist says why), kDqPerConsumer for the other plans
// there (one kernel, not four).
template <class F>
void with_plan(int d, bool causal, int consumers, int dq_plan, F&& f) {
  with_consumers(d, causal, consumers, [&](auto dc, auto cc, auto nc) {
    if constexpr (Bwd<decltype(dc)::value, decltype(nc)::value, kDqSplit>::kSplitDq) {
      if (dq_plan == kDqSplitTurns || dq_plan == kTurnsEvery)  // the same kernel where dQ is split
        return f(dc, cc, nc, std::integral_constant<int, kDqSplitTurns>{});
      if (dq_plan == kPUnderDp) return f(dc, cc, nc, std::integral_constant<int, kPUnderDp>{});
      if (dq_plan == kPersistent || dq_plan == kTallTiles)  // kTallTiles: step 11's kernel at d = 128
        return f(dc, cc, nc, std::integral_constant<int, kPersistent>{});
      if (dq_plan == kDqSplit) return f(dc, cc, nc, std::integral_constant<int, kDqSplit>{});
      if (dq_plan == kDqSplitBehind) return f(dc, cc, nc, std::integral_constant<int, kDqSplitBehind>{});
    } else if (dq_plan == kTurnsEvery) {
      return f(dc, cc, nc, std::integral_constant<int, kTurnsEvery>{});
    } else if (dq_plan == kPUnderDp || dq_plan == kPersistent) {  // kPersistent: step 10's kernel at d = 64
      return f(dc, cc, nc, std::integral_constant<int, kPUnderDp>{});
    } else if (dq_plan == kTallTiles) {  // two consumers (Backward passes them); three run step 10's kernel
      if constexpr (decltype(nc)::value == 2) return f(dc, cc, nc, std::integral_constant<int, kTallTiles>{});
      return f(dc, cc, nc, std::integral_constant<int, kPUnderDp>{});
    }
    f(dc, cc, nc, std::integral_constant<int, kDqPerConsumer>{});
  });
}

// The kernel's shared memory, set once before launches. Static, as flash_tma.cuh's prepare() and
// launch() are (see there): each translation unit prepares and launches its own copy of the kernel.
template <class T = __nv_bfloat16>
static inline void prepare(int d, bool causal, int consumers = 0, int dq_plan = kDqDefault) {
#if defined(LAB_SM90A)
  with_plan(d, causal, consumers_for(d, consumers), dq_plan, [&](auto dc, auto cc, auto nc, auto pc) {
    constexpr int D = decltype(dc)::value, Cn = decltype(nc)::value, Plan = decltype(pc)::value;
    LAB_CHECK(cudaFuncSetAttribute(flash_backward_wgmma<D, decltype(cc)::value, Cn, Plan, T>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, Bwd<D, Cn, Plan>::kSmemBytes));
  });
#else
  (void)d, (void)causal, (void)consumers, (void)dq_plan;
#endif
}

// A block per kBc keys of each head (64 a consumer: m.consumers, which maps() chose and prepare() was
// given); scale: the scores' (1 / sqrt of the head size). dK and dV by head into dk and dv, or into
// rows (out.dk set; dk and dv unused). prepare() first.
template <class T = __nv_bfloat16>
static inline void launch(const Maps& m, const float* lse, const float* delta, float* dk, float* dv, int bh, int seq, int d,
                   bool causal, float scale, cudaStream_t stream, const KVRowsOf<T>& out = {}) {
#if defined(LAB_SM90A)
  with_plan(d, causal, consumers_for(d, m.consumers), m.dq_plan, [&](auto dc, auto cc, auto nc, auto pc) {
    constexpr int D = decltype(dc)::value, Cn = decltype(nc)::value, Plan = decltype(pc)::value;
    using C = Bwd<D, Cn, Plan>;
    Order order = order_for(bh, (seq + C::kBc - 1) / C::kBc, seq, d, causal);
    order.counter = m.counter;
    if (C::kPersist && !m.counter) throw lab::Error("the persistent attention backward needs its counter (Maps::counter)");
    const int items = bh * order.tiles;  // kPersist: a block an SM, at most one a key tile
    const unsigned blocks = C::kPersist ? unsigned(std::min(items, lab::current_device().sms)) : unsigned(items);
    flash_backward_wgmma<D, decltype(cc)::value, Cn, Plan, T><<<blocks, C::kThreads, C::kSmemBytes, stream>>>(
        m.q, m.k, m.v, m.dout, m.dq, lse, delta, dk, dv, seq, scale, scale * flash::kLog2e, out, order, m.fold);
    LAB_CHECK(cudaGetLastError());
  });
#else
  (void)m, (void)lse, (void)delta, (void)dk, (void)dv, (void)bh, (void)seq, (void)d, (void)causal, (void)scale;
  (void)stream, (void)out;
  throw lab::Error("the Hopper attention backward is not built for sm_90a");
#endif
}

// A backward variant on this kernel, the class its step file registers (05: kDqPerConsumer, 06:
// kDqSplit, 07: kDqSplitBehind, 08: kDqSplitTurns, 09: kTurnsEvery, 10: kPUnderDp, 11: kPersistent):
// its state is O, lse and delta as the forward leaves them, the bf16 copies of Q, K, V and dO (made
// before timing), and the tensor maps over them (K and V by the block's keys, Q and dO by 64 queries).
template <int DqPlan>
struct Backward {
  using Topic = AttentionBackward;
  attn::SavedOutput saved;
  attn::Bf16Inputs in16;
  Maps maps;
  const float* mapped_dq = nullptr;  // the dQ buffer maps.dq describes
  lab::DeviceBuffer<unsigned> counter;  // kPersistent's two words (Order::counter), zeroed once
  static constexpr int kConsumers = DqPlan == kTallTiles ? 2 : 0;  // 0: consumers_for's default
  Backward(const AttentionBackward::Problem& p, cudaStream_t stream)
      : saved(p, stream), in16(p, stream, p.dout.data()) {
    const attn::Dims& a = p.dims;
    if (a.d != 64 && a.d != 128) return;  // supports() says N/A
    prepare(a.d, a.causal, kConsumers, DqPlan);
    if constexpr (DqPlan == kPersistent || DqPlan == kTallTiles) {  // kTallTiles runs step 11's kernel at d = 128
      counter = lab::DeviceBuffer<unsigned>(2);
      LAB_CHECK(cudaMemsetAsync(counter.data(), 0, 2 * sizeof(unsigned), stream));
    }
  }
  static lab::Declared declared() { return {.precision = "bf16"}; }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) { return flashtma::supports(s, dev); }

  void run(AttentionBackward::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    saved.prologue(a, p.dout.data(), p.dq.data(), stream);  // delta, and dQ = 0 for the reductions
    if (p.dq.data() != mapped_dq) {  // the maps over Q, K, V, dO and this dQ (host work only)
      maps = bwd::maps(in16.q.data(), in16.k.data(), in16.v.data(), in16.dout.data(), p.dq.data(), a.bh(), a.seq, a.d,
                       kConsumers);
      maps.dq_plan = DqPlan, maps.counter = counter.data();
      mapped_dq = p.dq.data();
    }
    launch(maps, saved.lse.data(), saved.delta.data(), p.dk.data(), p.dv.data(), a.bh(), a.seq, a.d, a.causal,
           a.scale(), stream);
  }
};

}  // namespace flashtma::bwd
