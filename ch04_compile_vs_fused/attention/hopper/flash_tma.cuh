// The warp-specialised attention forward's frame on Hopper (sm_90a), shared by the chapter's TMA
// steps (optimized_attention_fused_tma.cu, _pingpong.cu, _overlap.cu), which differ only in how a
// consumer warpgroup schedules its products (their Schedule::consume), and _split.cu, which lists
// the blocks itself (Listed): the block's shape, the shared-memory ring of K and V stages with
// their mbarriers, the producer warp that fills it through the TMA, the kernel that splits the
// block into the two roles, and the host side (the bf16 inputs and their tensor maps, the launch,
// the variant class).
//
// The block: kConsumers warpgroups of 64 queries and one producer warpgroup; 128-key tiles; as many
// stages as shared memory holds two of (about 160 KB of the 227). At d = 64 three consumers (192
// queries) fit the register file at 160 registers each; at d = 128 two, at 240 (64 for a tile's
// scores, 64 for the output, 32 for P, and what the overlapped schedule keeps of the next tile).
// The producer gives its registers back (setmaxnreg.dec to 24) and the consumers take them (inc):
// (kConsumers x kConsumerRegs + kProducerRegs) x 128 threads of the SM's 65536.
// Q, K, V: bf16, [bh][seq][d]; O fp32 [bh][seq][d] (or bf16 rows: Rows); lse fp32 [bh][seq]. d is 64
// or 128. The package also runs the frame on fp16 Q, K and V (T = __half: the products' instruction
// type, P's rounding and O's rows; the chapter's variants are bf16, T's default).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "attention/attention.cuh"
#include "attention/kernels/flash_tiles.cuh"
#include "lab/device.hpp"
#include "lab/tma.hpp"
#include "attention/kernels/mma_tiles.cuh"
#if defined(LAB_SM90A)
#include "lab/tma.cuh"
#include "attention/kernels/wgmma.cuh"
#endif

namespace flashtma {

template <int D>
struct Config {
  static constexpr int kConsumers = D == 64 ? 3 : 2;
  static constexpr int kBr = 64 * kConsumers, kBc = 128, kRegions = D / 64;  // regions: 64 columns of d
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kStages = D == 64 ? 4 : 2;
  static constexpr int kQBytes = kBr * D * 2, kTileBytes = kBc * D * 2;  // bf16
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160, kProducerRegs = 24;
  static constexpr int kBarriers = 2 + 4 * kStages;  // Q full and empty; full and empty for K and for V, per stage
  static constexpr int kSmemBytes = 1024 + kQBytes + 2 * kStages * kTileBytes + 8 * kBarriers;  // 1024: alignment
  static_assert((kConsumers * kConsumerRegs + kProducerRegs) * 128 <= 65536, "the register file");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// One block's work where a variant lists the blocks itself (Listed; a split of the keys): the
// queries of query tile `tile` of head `head` against key tiles [key_tile0, key_tile0 + tiles), its
// output to the head's O and lse (slot -1) or to partial slot `slot` (kBr rows of O, kBr of lse).
struct Item {
  int head, tile, key_tile0, tiles, slot;
};
// A variant's own list of blocks, block b taking items[b]; without one (items null) the grid is
// (query tiles, heads), each block all the keys its queries see. With starts (persistent blocks,
// optimized_attention_fused_persistent.cu), block b runs items[starts[b]] .. items[starts[b + 1] - 1]
// one after another, whole query tiles (no slots).
struct Listed {
  const Item* items = nullptr;
  int blocks = 0;
  float* part_o = nullptr;    // slots x kBr x d
  float* part_lse = nullptr;  // slots x kBr
  const int* starts = nullptr;  // blocks + 1 offsets into items
};

// O written where the next product reads it instead of by head in fp32 (the GPT-2 step's merged
// attention, optimized_gpt2_step_fused_bf16_rows.cu): in bf16, head b heads + h's query t in row
// b seq + t of ld elements, columns [h cols, h cols + cols) (cols: the model's head size, at most
// the kernel's d; the padding is not written). o null: by head (the frame's grid only, not a list).
template <class T = __nv_bfloat16>
struct RowsOf {
  T* o = nullptr;
  int heads = 1, cols = 0;
  std::size_t ld = 0;
};
using Rows = RowsOf<>;

// Where a head's rows lie in the maps that Q, K and V are read through. By head (heads 0: a map of
// [bh][seq][d]), head b's row r at the map's coordinates (row r, head b). Over rows (heads > 0,
// rows_maps: the QKV product's output, each token a row of `heads` heads side by side, no copy by
// head), head b's row r at (row b / heads seq + r, head b % heads): the map's second coordinate runs
// over every token of the batch, its third over the heads of a row. A box that runs past the last
// query of its sequence there reads the next sequence's first rows where by head it read zeros:
// the kernels mask keys and queries at or past seq (their scores and probabilities), so those rows
// add nothing; past the batch's last token the TMA fills zeros, as by head.
struct Fold {
  int heads = 0;
  struct At {
    int row, head;
  };
  __host__ __device__ At at(int row, int head, int seq) const {
    if (heads == 0) return {row, head};
    const int b = head / heads;
    return {b * seq + row, head - b * heads};
  }
};

#if defined(LAB_SM90A)
namespace tma = lab::tma;

// The block's shared memory: Q (kRegions regions of kBr rows x 128 bytes), kStages K tiles and
// kStages V tiles (kRegions regions of kBc rows each), all 128-byte swizzled by the TMA, then the
// barriers. Stage st of tile j is j % kStages, its phase parity (j / kStages) & 1.
template <int D>
struct Ring {
  using C = Config<D>;
  std::uint8_t *q, *k, *v;
  std::uint64_t *q_full, *k_full, *k_empty, *v_full, *v_empty, *q_empty;
  __device__ explicit Ring(std::uint8_t* raw) {
    q = raw + ((1024 - tma::smem_address(raw) % 1024) % 1024);  // the swizzle needs 1024-byte alignment
    k = q + C::kQBytes;
    v = k + C::kStages * C::kTileBytes;
    q_full = reinterpret_cast<std::uint64_t*>(v + C::kStages * C::kTileBytes);
    k_full = q_full + 1, k_empty = k_full + C::kStages, v_full = k_empty + C::kStages, v_empty = v_full + C::kStages;
    q_empty = v_empty + C::kStages;  // a persistent block's consumers free Q on it (Work::release_q)
  }
  __device__ const std::uint8_t* k_tile(int st) const { return k + st * C::kTileBytes; }
  __device__ const std::uint8_t* v_tile(int st) const { return v + st * C::kTileBytes; }
  // A consumer warp is done with a stage's K (or V): its lane 0 arrives (kConsumers x 4 arrivals
  // free the stage). The wgmma that read it has completed (wgmma::wait) in every lane.
  __device__ void release_k(int st) const {
    if (threadIdx.x % 32 == 0) tma::arrive(k_empty + st);
  }
  __device__ void release_v(int st) const {
    if (threadIdx.x % 32 == 0) tma::arrive(v_empty + st);
  }
};

// Where a consumer's rows of O and lse go: `o` and `lse` hold rows [row0, row0 + rows) of the head
// (the head's own, row0 = 0 and rows = seq; or a split block's partial slot, row0 its first query);
// or, where o16 is set, O goes in T (bf16 or fp16) to the head's first `cols` columns of rows of
// ld elements (see Rows).
template <class T>
struct Out {
  float* o;
  float* lse;
  int row0, rows;
  T* o16 = nullptr;
  std::size_t ld = 0;
  int cols = 0;
  template <int DN>
  __device__ __forceinline__ void write(const mma::Softmax<1>& softmax, const float (&acc)[1][DN][4], int qrow0) const {
    if (o16)
      softmax.write_rows(acc, o16, ld, cols, lse, qrow0 - row0, rows);
    else
      softmax.write(acc, o, lse, qrow0 - row0, rows);
  }
};

// P in T (bf16 or fp16): the A fragments of m64nDk16, 16 keys each, from a tile's probabilities.
template <class T = __nv_bfloat16, int NT>
__device__ __forceinline__ void pack_p(const float (&s)[1][NT][4], std::uint32_t (&a)[NT / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {
    a[kk][0] = mma::pack16<T>(s[0][2 * kk][0], s[0][2 * kk][1]);
    a[kk][1] = mma::pack16<T>(s[0][2 * kk][2], s[0][2 * kk][3]);
    a[kk][2] = mma::pack16<T>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
    a[kk][3] = mma::pack16<T>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
  }
}

// What a consumer warpgroup is given: the ring, its 64 queries, the block's keys (tile count and
// first key), where its rows of Q lie and where its output goes; T, the inputs' 16-bit type, which
// its products and P's rounding (pack_p) take.
template <int D, class T = __nv_bfloat16>
struct Work {
  using Elem = T;
  Ring<D> ring;
  int consumer;   // 0 .. kConsumers - 1
  int rows0;      // its first query
  int qrow0;      // this lane's rows: qrow0, qrow0 + 8
  int key0;       // the first key of the block's first K/V tile
  int tiles;      // K/V tiles of the block
  int seq;
  float scale_log2;
  Out<T> out;
  // A block that runs several items one after another (optimized_attention_fused_persistent.cu):
  // the ring's tiles before this item's first (its tile j is the ring's tile base + j, whose stage
  // and parity continue from the last item's), the parity of Q's phase for this item, and the
  // barrier on which the consumers free Q once their last S has landed. A block of one item: 0, 0
  // and none.
  int base = 0;
  unsigned q_parity = 0;
  std::uint64_t* q_empty = nullptr;
  __device__ int stage(int j) const { return (base + j) % Config<D>::kStages; }
  __device__ unsigned parity(int j) const { return unsigned((base + j) / Config<D>::kStages) & 1; }
  __device__ void release_q() const {
    if (q_empty && threadIdx.x % 32 == 0) tma::arrive(q_empty);
  }
  // The first key of the block's j-th tile (the mask's col0).
  __device__ int key(int j) const { return key0 + j * Config<D>::kBc; }
  __device__ const std::uint8_t* q_rows() const { return ring.q + 64 * consumer * 128; }
  // S = Q K^T for the K tile in stage st: one m64n128k16 per 16 of d (region kk / 4, its (kk % 4)-th
  // 32 bytes), issued and committed as one group, not waited for.
  __device__ void issue_scores(float (&s)[64], int st) const {
    const std::uint8_t* kt = ring.k_tile(st);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma::mma_ss_n128<0, 0, T>(s, wgmma::descriptor(q_rows() + (kk / 4) * Config<D>::kBr * 128) + 2 * (kk % 4),
                                  wgmma::descriptor(kt + (kk / 4) * Config<D>::kBc * 128) + 2 * (kk % 4), kk > 0);
  }
  // O += P V for the V tile in stage st: V read N-major (as it lies in memory, d contiguous), 16
  // keys (2048 bytes) a wgmma, P from registers.
  __device__ void issue_pv(float (&od)[D / 2], const std::uint32_t (&a)[Config<D>::kBc / 16][4], int st) const {
    const std::uint8_t* vt = ring.v_tile(st);
#pragma unroll
    for (int kk = 0; kk < Config<D>::kBc / 16; ++kk) {
      const std::uint64_t b = wgmma::descriptor_mn(vt + kk * 2048, Config<D>::kBc * 128);
      if constexpr (D == 128)
        wgmma::mma_rs_n128<1, T>(od, a[kk], b);
      else
        wgmma::mma_rs_n64<1, T>(od, a[kk], b);
    }
  }
  // P in T from a tile's probabilities: pack_p<T>.
  template <int NT>
  __device__ void pack(const float (&s)[1][NT][4], std::uint32_t (&a)[NT / 2][4]) const {
    pack_p<T>(s, a);
  }
};

// The ping-pong schedule's turns (steps _pingpong and _overlap): consumer warpgroup c issues its
// products only on its turn, then hands the turn to c + 1 (the last to 0), so the tensor cores take
// the warpgroups' products one group after another and each warpgroup's softmax runs while the
// others' products do. A turn is a named barrier of two warpgroups (ids 1.. kConsumers; 0 is
// __syncthreads): c waits on barrier 1 + c (bar.sync, 128 threads) until its predecessor arrives
// there (bar.arrive, 128 more). The last warpgroup opens barrier 1 once at the start, and skips its
// final hand-over, so that every barrier ends where it began.
template <int D>
struct Turns {
  int consumer;
  static constexpr int kConsumers = Config<D>::kConsumers;
  __device__ void start() const {
    if (consumer == kConsumers - 1) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
  }
  __device__ void wait() const { asm volatile("bar.sync %0, 256;\n" ::"r"(1 + consumer) : "memory"); }
  __device__ void pass(bool final) const {
    if (final && consumer == kConsumers - 1) return;
    asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (consumer + 1) % kConsumers) : "memory");
  }
};

// The producer: one thread copies Q, then K and V tiles key_tile0 .. key_tile0 + tiles - 1 into
// the ring, each copy once the consumers have freed its stage (a fresh stage counts as freed). base:
// the ring's tiles before these (a block that runs several items; see Work::base).
// fold: where the head's rows lie in the maps (Fold).
template <int D>
__device__ __forceinline__ void produce(const Ring<D>& r, const CUtensorMap* qmap, const CUtensorMap* kmap,
                                        const CUtensorMap* vmap, int row0, int head, int key_tile0, int tiles,
                                        int base, Fold fold, int seq) {
  using C = Config<D>;
  tma::prefetch_map(qmap), tma::prefetch_map(kmap), tma::prefetch_map(vmap);
  tma::arrive_expect_bytes(r.q_full, C::kQBytes);
  const Fold::At qa = fold.at(row0, head, seq), ka = fold.at(0, head, seq);  // ka: the head's key 0
  for (int g = 0; g < C::kRegions; ++g) tma::load_tile(r.q + g * C::kBr * 128, qmap, 64 * g, qa.row, qa.head, r.q_full);
  for (int j = 0; j < tiles; ++j) {
    const int st = (base + j) % C::kStages;
    const unsigned parity = (((base + j) / C::kStages) & 1) ^ 1;
    tma::wait(r.k_empty + st, parity);
    tma::arrive_expect_bytes(r.k_full + st, C::kTileBytes);
    for (int g = 0; g < C::kRegions; ++g)
      tma::load_tile(r.k + st * C::kTileBytes + g * C::kBc * 128, kmap, 64 * g, ka.row + (key_tile0 + j) * C::kBc,
                     ka.head, r.k_full + st);
    tma::wait(r.v_empty + st, parity);
    tma::arrive_expect_bytes(r.v_full + st, C::kTileBytes);
    for (int g = 0; g < C::kRegions; ++g)
      tma::load_tile(r.v + st * C::kTileBytes + g * C::kBc * 128, vmap, 64 * g, ka.row + (key_tile0 + j) * C::kBc,
                     ka.head, r.v_full + st);
  }
}

// The kernel: barriers set up by one thread, then warpgroup 0 produces and the others run
// Schedule::consume<D, Causal>(work). Without a list, block (x, y) takes query tile x of head y and
// all the keys it sees; causal blocks run longest first within a head (the last query tile has the
// most keys), the heads one after another (optimized_attention_fused_split.cu lists its
// blocks longest first across the heads). Persistent (a list with starts), a block runs its items
// in turn: the producer copies an item's Q once the consumers have freed the last one's (q_empty)
// and its K and V tiles into the ring where the last item's left off (Work::base), so the next
// item's start-up runs under this one's last products; the consumers run consume for each item.
template <int D, bool Causal, class Schedule, class T = __nv_bfloat16, bool Persistent = false>
__global__ void __launch_bounds__(Config<D>::kThreads, 1)
    forward(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
            const __grid_constant__ CUtensorMap vmap, const Listed list, float* __restrict__ o,
            float* __restrict__ lse, int seq, float scale_log2, const RowsOf<T> rows, const Fold fold) {
  using C = Config<D>;
  extern __shared__ std::uint8_t smem_raw[];
  const Ring<D> ring(smem_raw);
  // Block b's items: [first, end) of the list's (persistent), or the one the list or the grid gives.
  const int first = Persistent ? list.starts[blockIdx.x] : 0, end = Persistent ? list.starts[blockIdx.x + 1] : 1;
  auto item_at = [&](int i) {
    if (Persistent) return list.items[i];
    if (list.items) return list.items[blockIdx.x];
    const int tile = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
    const int last = Causal ? min(seq, (tile + 1) * C::kBr) : seq;  // keys [0, last) matter
    return Item{int(blockIdx.y), tile, 0, (last + C::kBc - 1) / C::kBc, -1};
  };
  const Item first_item = item_at(first);  // both roles' first (a non-persistent block's only) item
  const int group = int(threadIdx.x) / 128;  // 0: the producer; 1..kConsumers: consumers
  if (threadIdx.x == 0) {
    tma::init(ring.q_full, 1);
    if (Persistent) tma::init(ring.q_empty, 4 * C::kConsumers);  // each consumer warp's lane 0, once an item
    for (int st = 0; st < C::kStages; ++st) {
      tma::init(ring.k_full + st, 1), tma::init(ring.v_full + st, 1);  // the producer's arrive (and the bytes)
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
        const Item item = i == first ? first_item : item_at(i);
        if (Persistent) tma::wait(ring.q_empty, unsigned((i - first) & 1) ^ 1);  // a fresh barrier counts as freed
        produce<D>(ring, &qmap, &kmap, &vmap, item.tile * C::kBr, item.head, item.key_tile0, item.tiles, base, fold,
                   seq);
        base += item.tiles;
      }
    }
  } else {  // setmaxnreg wants each role one branch of an if/else
    wgmma::setmaxnreg_inc<C::kConsumerRegs>();
    const int consumer = group - 1;
    int base = 0;
    for (int i = first; i < end; ++i) {
      const Item item = i == first ? first_item : item_at(i);
      const int row0 = item.tile * C::kBr, head = item.head;
      const std::size_t slot = std::size_t(item.slot);
      const std::size_t batch_row0 = std::size_t(head / rows.heads) * seq;  // with rows.o: the head's first row
      const Out<T> out = rows.o ? Out<T>{nullptr, lse + std::size_t(head) * seq, 0, seq,
                                   rows.o + batch_row0 * rows.ld + std::size_t(head % rows.heads) * rows.cols,
                                   rows.ld, rows.cols}
                      : item.slot < 0 ? Out<T>{o + std::size_t(head) * seq * D, lse + std::size_t(head) * seq, 0, seq}
                                      : Out<T>{list.part_o + slot * C::kBr * D, list.part_lse + slot * C::kBr, row0,
                                            min(C::kBr, seq - row0)};
      const int rows0 = row0 + 64 * consumer;
      const int qrow0 = rows0 + 16 * (int(threadIdx.x / 32) % 4) + int(threadIdx.x % 32) / 4;
      const Work<D, T> work{ring,  consumer, rows0, qrow0, item.key_tile0 * C::kBc, item.tiles, seq, scale_log2, out,
                            base,  unsigned((i - first) & 1), Persistent ? ring.q_empty : nullptr};
      Schedule::template consume<D, Causal>(work);
      base += item.tiles;
    }
  }
}
#endif

// A tensor map over a [bh][seq][d] 16-bit tensor, read in boxes of 64 columns by `rows` rows of one
// head (rows past seq arrive as zeros). An fp16 tensor is read through the same bf16 map: a copy
// moves bytes, 2 a value, and its zero fill is zero in both types.
template <class T>
inline CUtensorMap head_map(const T* base, const attn::Dims& a, int rows) {
  static_assert(sizeof(T) == 2, "a 16-bit element");
  return lab::tma::bf16_map_swizzle128(base, {std::uint64_t(a.d), std::uint64_t(a.seq), std::uint64_t(a.bh())},
                                       {std::uint64_t(a.d) * 2, std::uint64_t(a.seq) * a.d * 2},
                                       {64, std::uint32_t(rows), 1});
}

// A tensor map over a head of width d in rows of ld 16-bit elements, `tokens` rows, `heads` heads
// side by side from base (Fold: coordinates (column, token, head)), read in boxes of 64 columns by
// `rows` rows of one head. ld and d in elements; 2 ld and 2 d bytes, the TMA's strides, must be
// multiples of 16 (the map is refused otherwise).
template <class T>
inline CUtensorMap rows_map(const T* base, std::size_t tokens, int heads, int d, std::size_t ld, int rows) {
  static_assert(sizeof(T) == 2, "a 16-bit element");
  return lab::tma::bf16_map_swizzle128(base, {std::uint64_t(d), std::uint64_t(tokens), std::uint64_t(heads)},
                                       {std::uint64_t(ld) * 2, std::uint64_t(d) * 2}, {64, std::uint32_t(rows), 1});
}

// The three tensor maps a forward reads through, over bf16 Q, K and V: Q by the block's queries, K
// and V by a tile's keys; by head (maps) or over rows (rows_maps; fold says which). d is 64 or 128.
struct Maps {
  CUtensorMap q{}, k{}, v{};
  Fold fold{};
};
// The three maps with Q's boxes of the block's queries (Config<d>::kBr) and K's and V's of a tile's
// keys, each made by map_of(base, box rows): by head or over rows, below.
template <class T, class MapOf>
inline Maps maps_of(const T* q, const T* k, const T* v, int d, MapOf&& map_of, Fold fold) {
  const int br = d == 64 ? Config<64>::kBr : Config<128>::kBr, bc = Config<128>::kBc;
  return {map_of(q, br), map_of(k, bc), map_of(v, bc), fold};
}
template <class T>
inline Maps maps(const T* q, const T* k, const T* v, const attn::Dims& a) {
  return maps_of(q, k, v, a.d, [&](const T* base, int rows) { return head_map(base, a, rows); }, Fold{});
}
// Over rows: Q, K and V of token t (batch b, position p: t = b seq + p) in row t of ld elements from
// q, k and v, head h's columns [h d, h d + d) of each (the QKV product's rows: q its first column,
// k = q + heads d, v = k + heads d, ld = 3 heads d).
template <class T>
inline Maps rows_maps(const T* q, const T* k, const T* v, std::size_t tokens, int heads, int d, std::size_t ld) {
  return maps_of(q, k, v, d, [&](const T* base, int rows) { return rows_map(base, tokens, heads, d, ld, rows); },
                 Fold{heads});
}

// The state of a variant on this frame: the bf16 copies of Q, K and V and the maps over them.
struct Inputs {
  attn::Bf16Inputs in16;
  Maps maps{};
  Inputs(const Attention::Problem& p, cudaStream_t stream) : in16(p, stream) {
    const attn::Dims& a = p.dims;
    if (a.d != 64 && a.d != 128) return;  // supports() says N/A
    maps = flashtma::maps(in16.q.data(), in16.k.data(), in16.v.data(), a);
  }
};

// Why this device (or this build) cannot run the kernels: "" when it can.
inline std::string device_supports(const lab::DeviceFacts& dev) {
#if defined(LAB_SM90A)
  if (dev.cc_major != 9 || dev.cc_minor != 0) return "wgmma and the TMA need an sm_90 GPU (this one is " + dev.arch() + ")";
  return "";
#else
  (void)dev;
  return std::string("wgmma needs a build for sm_90a (this one is for ") + lab::built_architectures() + ")";
#endif
}

inline std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) {
  if (std::string why = device_supports(dev); !why.empty()) return why;
  const int d = attn::Dims(s).d;
  return d == 64 || d == 128 ? "" : "the warp-specialised kernels are written for d = 64 and 128";
}

// Calls f(std::integral_constant<int, D>{}, std::bool_constant<Causal>{}) for d (64 or 128) and causal.
template <class F>
void with_kernel(int d, bool causal, F&& f) {
  auto with_causal = [&](auto dc) {
    if (causal)
      f(dc, std::true_type{});
    else
      f(dc, std::false_type{});
  };
  if (d == 64)
    with_causal(std::integral_constant<int, 64>{});
  else
    with_causal(std::integral_constant<int, 128>{});
}

// The host functions that name a kernel (prepare, launch, run here; bwd::prepare and bwd::launch)
// are static: nvcc gives a kernel template's host stub internal linkage, so each translation unit
// that instantiates forward<...> has its own copy of the kernel. An inline function would be one
// definition for the whole program, picked by the linker from any of those units: in a binary that
// links several variants (the chapter's tests, fuzz and demos) prepare() could then set the shared
// memory of one unit's copy and launch() start another's, which fails with an invalid argument.
// Static, each unit prepares and launches its own.
//
// Whether a schedule's consume runs a persistent block's items (honours Work::base, q_parity and
// q_empty): hopper/overlapped.cuh's does; the TMA and ping-pong steps' run one item a block.
template <class Schedule>
constexpr bool kRunsItems = requires { Schedule::kRunsItems; };

// forward<D, causal, Schedule, T, Persistent>'s shared memory, set once before launches (outside a
// graph's capture). Persistent: the kernel's persistent form, which a caller of persistent lists
// names (so that the other callers do not compile it).
template <class Schedule, class T = __nv_bfloat16, bool Persistent = false>
static void prepare(int d, bool causal) {
  static_assert(!Persistent || kRunsItems<Schedule>, "this schedule runs one item a block");
#if defined(LAB_SM90A)
  with_kernel(d, causal, [&](auto dc, auto cc) {
    constexpr int D = decltype(dc)::value;
    LAB_CHECK(cudaFuncSetAttribute(forward<D, decltype(cc)::value, Schedule, T, Persistent>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, Config<D>::kSmemBytes));
  });
#else
  (void)d, (void)causal;
#endif
}

// Launches forward<D, causal, Schedule> over bh heads of seq queries (Q, K, V by the maps; O and lse
// by head, or O into rows): a block per kBr queries of each head, or the blocks `list` names (with
// starts: persistent blocks, each running its items; Persistent true). scale_log2: the scores' scale
// times log2(e). prepare() first.
template <class Schedule, class T = __nv_bfloat16, bool Persistent = false>
static void launch(const Maps& m, float* o, float* lse, int bh, int seq, int d, bool causal, float scale_log2,
            cudaStream_t stream, const Listed& list = {}, const RowsOf<T>& rows = {}) {
#if defined(LAB_SM90A)
  static_assert(!Persistent || kRunsItems<Schedule>, "this schedule runs one item a block");
  if (Persistent != (list.starts != nullptr))
    throw lab::Error("flashtma::launch: a persistent list (starts) goes with the persistent kernel, and only it");
  if (rows.o && list.items && !Persistent)
    throw lab::Error("flashtma::launch: O in rows is written by the frame's grid or persistent blocks, not a split list");
  with_kernel(d, causal, [&](auto dc, auto cc) {
    constexpr int D = decltype(dc)::value;
    using C = Config<D>;
    const dim3 grid = list.items ? dim3(list.blocks) : dim3((seq + C::kBr - 1) / C::kBr, bh);
    forward<D, decltype(cc)::value, Schedule, T, Persistent>
        <<<grid, C::kThreads, C::kSmemBytes, stream>>>(m.q, m.k, m.v, list, o, lse, seq, scale_log2, rows, m.fold);
    LAB_CHECK(cudaGetLastError());
  });
#else
  (void)m, (void)o, (void)lse, (void)bh, (void)seq, (void)d, (void)causal;
  (void)scale_log2, (void)stream, (void)list, (void)rows;
  throw lab::Error("the warp-specialised attention kernels are not built for sm_90a");
#endif
}

// Runs forward<D, causal, Schedule> over the problem: a block per kBr queries of each head, or the
// blocks a variant lists (Persistent: persistent blocks' lists).
template <class Schedule, bool Persistent = false>
static void run(const Inputs& in, Attention::Problem& p, cudaStream_t stream, const Listed& list = {}) {
  const attn::Dims& a = p.dims;
  prepare<Schedule, __nv_bfloat16, Persistent>(a.d, a.causal);
  launch<Schedule, __nv_bfloat16, Persistent>(in.maps, p.o.data(), p.lse.data(), a.bh(), a.seq, a.d, a.causal,
                                              a.scale() * flash::kLog2e, stream, list);
}

// A forward variant on this frame, the variant class its file registers: its state is Inputs,
// and Schedule (the file's lesson) is how its consumer warpgroups run.
template <class Schedule>
struct Forward {
  using Topic = Attention;
  Inputs in;
  Forward(const Attention::Problem& p, cudaStream_t stream) : in(p, stream) {}
  // bf16, its running max kept over tiles of kBc keys (the check emulates its rounding of P).
  static lab::Declared declared() {
    static_assert(Config<64>::kBc == Config<128>::kBc);
    return {.precision = "bf16", .writes = {"lse"},
            .schedule = [](const lab::Shape&) { return std::any(attn::ForwardSchedule(Config<64>::kBc)); }};
  }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) { return flashtma::supports(s, dev); }
  void run(Attention::Problem& p, cudaStream_t stream) { flashtma::run<Schedule>(in, p, stream); }
};

}  // namespace flashtma
