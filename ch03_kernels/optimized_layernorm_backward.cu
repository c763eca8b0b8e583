// Optimized LayerNorm backward, pipelined with the tensor memory accelerator. The one-pass kernel
// (optimized_layernorm_backward_one_pass) reads each row once but waits for it: its warps load a
// row, reduce it, write dx, and only then ask for the next, so DRAM idles while rows are reduced
// (74-79% of the copy rate). Here one producer warp keeps the next rows coming: it asks the TMA to
// copy whole stages of rows (x and dy, contiguous, two instructions a stage) into shared memory,
// up to 8 stages ahead, and sixteen consumer warps compute from there. A consumer copies its rows
// from shared memory into registers, frees the stage at once (an mbarrier arrival), and reduces
// and writes dx while the producer refills it. The bytes in flight are shared memory's (about
// 200 KB an SM), not the warps'. dgamma and dbeta accumulate in the consumers' registers (a lane
// owns the same columns in every row) and meet once, at the end, in shared memory: one partial row
// a block. The grid then synchronizes (a cooperative launch) and adds the partials itself, in a
// fixed order, where the one-pass kernel launches two more kernels.
//
// What took it from 83-86% of the copy rate to 94% (H100, 16384 x 768 and 8192 x 4096, in us):
// - Sixteen consumer warps, not eight (61 -> 57, 157 -> 153). The consumers are latency-bound
//   (Nsight Compute: 11 cycles an instruction, most of the stalls on L1TEX); more warps hide more.
//   The registers allow it only with short tiles: 17 warps leave 96 registers a thread (a quarter
//   of the SM's registers serves 5 of them), so a lane holds at most 4 float4s of a row: D = 768
//   is 2 warps a row, 3 float4s a lane.
// - gamma held in registers where a lane's share is 3 float4s or less, not read from L1 for every
//   row (57 -> 55.5; 4096 x 3072: 64 -> 60). With 4 it would spill; there it sits in shared memory
//   (below).
// - Rows of 3073 to 4096 floats: the whole block takes two rows at once, 2 float4s a lane of each,
//   one barrier for both rows' sums (153 -> 151).
// - The end of the kernel (partials, grid sync, their sum) took 11 us of 151: the sum now reads
//   float4s, 128 columns a block, several loads in flight (it was a warp a column, each lane reading
//   one 32-byte sector, the loads one after another), and where a block is one row group its
//   partial goes straight from registers to global memory (151 -> 143, 55.6 -> 54).
//
// Each block (one an SM) takes one contiguous range of rows, the ranges differing by at most a
// row. Handing out stages in turn instead left the last round to some SMs only: 8192 rows of 4096
// are 4096 stages of two, 31.03 an SM, so four SMs ran a 32nd stage while the others waited.
//
// Rows longer than one SM's registers hold (D > 8192 floats: a lane holds 4 values a column, x,
// dy gamma and the dgamma and dbeta sums, so a 16384-float row would fill the 65536 registers of
// an SM on its own) are split between two SMs: the kernel is launched in clusters of two blocks,
// and each block streams and holds its half of every row of the cluster's range. The two halves'
// row sums meet through distributed shared memory: one thread stores its block's two sums straight
// into the other block's shared memory (st.async), and the store itself completes the transaction
// bytes that the receiver's mbarrier expects: data and signal in one instruction. Two things made
// it pay (4096 x 16384: step 1 runs it in 365 us, the split first took 356):
// - A block does not wait for the other half's sums: it reduces the next row first and writes a
//   row's dx one row late, its xhat and dy gamma kept in the stage (356 -> 331). Waiting at once
//   stopped all 16 warps for the exchange on every row, in lock step with the other SM.
// - gamma in shared memory for tiles of 4 float4s a lane (331 -> 291; 4096 x 8192, with the end
//   phase's changes above: 156 -> 147).
//   Read from global memory, its 32 KB half did not stay in L1 (about 28 KB of it remains beside
//   the stages' shared memory), so every row read it again from L2: removing those loads in a
//   timing experiment took 172 us to 147 at 2048 x 16384.
//
// What it supports: rows of a multiple of 4 floats (the TMA copies 16-byte aligned ranges), at
// most 16384 of them. Longer rows are the one-pass kernel's (step 1), which keeps dgamma and dbeta
// in shared memory instead.
// Run: make ch03 && ./ch03_kernels/optimized_layernorm_backward
#include <cooperative_groups.h>

#include <cstdint>

#include "lab/device.hpp"
#include "lab/tma.cuh"
#include "layernorm.cuh"

namespace {
constexpr int kConsumerWarps = 16;
constexpr int kThreads = 32 * (kConsumerWarps + 1);  // the consumers, then the producer warp
constexpr int kMaxStages = 8;
constexpr int kMaxDim = 8192;

// A row's threads (lanes: 1 to 16 warps, each lane `items` float4s of the row); a stage holds
// kConsumerWarps / warps rows (twice that for {512, 2}). The smallest tile that holds the row is
// used. At most 4 items: x, dy gamma, dgamma and dbeta take 16 registers an item, of 96.
constexpr rows::Tile kTiles[] = {{32, 1}, {32, 2}, {32, 3}, {32, 4}, {64, 3}, {64, 4}, {128, 3},
                                 {128, 4}, {256, 3}, {512, 2}, {512, 3}, {512, 4}};

// Rows a group of kLanes / 32 warps takes at once: two when the group is the whole block and its
// rows are short enough to hold two (one barrier for both rows' sums), else one.
__host__ __device__ constexpr int rows_at_once(int lanes, int items) { return lanes == 32 * kConsumerWarps && items <= 2 ? 2 : 1; }
// Rows a stage.
__host__ __device__ constexpr int stage_rows(int lanes, int items) { return kConsumerWarps / (lanes / 32) * rows_at_once(lanes, items); }

using Chunk = rows::Chunk<4>;
// One float4 of a row, both ways the kernel walks rows: x becomes xhat and dy becomes g = dy gamma
// (what dx needs), the column sums dgamma and dbeta and the row's sums of g and g xhat advance.
__device__ __forceinline__ void reduce_chunk(Chunk& x, Chunk& dy, const Chunk& gamma, float mu, float rs, Chunk& dg,
                                             Chunk& db, float& s1, float& s2) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float xhat = (x.v[i] - mu) * rs;
    dg.v[i] += dy.v[i] * xhat;
    db.v[i] += dy.v[i];
    x.v[i] = xhat;
    dy.v[i] *= gamma.v[i];
    s1 += dy.v[i];
    s2 += dy.v[i] * xhat;
  }
}
// dx = rstd (g - mean(g) - xhat mean(g xhat)) for one float4.
__device__ __forceinline__ Chunk dx_chunk(const Chunk& xhat, const Chunk& g, float rs, float mean_g, float mean_gx) {
  Chunk out;
#pragma unroll
  for (int i = 0; i < 4; ++i) out.v[i] = rs * (g.v[i] - mean_g - xhat.v[i] * mean_gx);
  return out;
}

// kSplit blocks (a cluster) share each row: block r of the cluster holds its columns [c0, c0 +
// width), and the two blocks' row sums meet in each other's shared memory. kSplit = 1 for rows of
// at most kMaxDim floats, 2 above; a split row is the whole block's (one row group).
template <int kLanes, int kItems, int kSplit>
__global__ void __launch_bounds__(kThreads, 1)
    layernorm_backward_tma(const float* __restrict__ x, const float* __restrict__ gamma,
                           const float* __restrict__ mean, const float* __restrict__ rstd,
                           const float* __restrict__ dy, float* __restrict__ dx, float* __restrict__ partial,
                           float* __restrict__ dgamma, float* __restrict__ dbeta, int rows, int dim, int stages) {
#if __CUDA_ARCH__ >= 900
  constexpr int kWarps = kLanes / 32;
  constexpr int kGroups = kConsumerWarps / kWarps;  // row groups (kWarps warps each)
  constexpr int kMulti = rows_at_once(kLanes, kItems);
  constexpr int kRows = stage_rows(kLanes, kItems);
  static_assert(kSplit == 1 || (kSplit == 2 && kGroups == 1 && kMulti == 1), "a split row is the whole block's");
  extern __shared__ __align__(128) float stage_mem[];  // stages x [x: kRows x dim | dy: kRows x dim]
  __shared__ std::uint64_t full[kMaxStages], empty[kMaxStages];
  __shared__ float partial_sums[2][kGroups][kWarps][2 * kMulti];  // a row's two sums across its warps, by row parity
  __shared__ std::uint64_t peer_full[4];                          // split rows: the other block's sums arrived
  __shared__ __align__(8) float peer_sums[4][2];                  // and the sums, by row modulo 4
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // This block's columns: all of them, or for a split row the first (rank 0) or second half of
  // its float4s (rank 0 takes the odd one).
  const unsigned rank = kSplit > 1 ? cooperative_groups::this_cluster().block_rank() : 0;
  const int half = kSplit > 1 ? (dim / 4 + 1) / 2 * 4 : dim;
  const int c0 = rank == 0 ? 0 : half, width = rank == 0 ? half : dim - half;
  const std::size_t stage_floats = 2 * std::size_t(kRows) * width;
  // This block's rows (its cluster's, for split rows): an even share of all of them, contiguous.
  const std::size_t team = blockIdx.x / kSplit, teams = gridDim.x / kSplit;
  const std::size_t begin = rows * team / teams, end = rows * (team + 1) / teams;
  const int group = warp / kWarps;            // the consumer's row within a stage
  const int t = (warp % kWarps) * 32 + lane;  // its lane within the row's threads
  // gamma: in registers where a lane's share is 3 float4s or less, else in shared memory past the
  // stages (from L1 it would be read again for every row, and at 8192 floats it does not fit there
  // beside the stages: L2 then served it, 23 us of 172 at 2048 x 16384). Row group 0 stores it
  // before the barrier below.
  constexpr bool kHeld = kItems <= 3;
  float* gamma_mem = stage_mem + stages * stage_floats;
  if (!kHeld && warp < kWarps)
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int col = (t + k * kLanes) * 4;
      if (col < width) Chunk::load(gamma + c0 + col).store(gamma_mem + col);
    }
  if (threadIdx.x == 0) {
    // A stage is free again once every consumer thread has arrived: each arrival releases that
    // thread's own reads of it (with one arrival a warp after __syncwarp instead, compute-sanitizer's
    // racecheck reported the TMA's refill against the other lanes' reads).
    for (int s = 0; s < stages; ++s) lab::tma::init(&full[s], 1), lab::tma::init(&empty[s], 32 * kConsumerWarps);
    for (auto& b : peer_full) lab::tma::init(&b, 1);
    lab::tma::fence_init();
  }
  if constexpr (kSplit > 1)
    cooperative_groups::this_cluster().sync();  // both blocks' barriers initialized before either sends
  else
    __syncthreads();

  Chunk dg[kItems], db[kItems];
  if (warp == kConsumerWarps) {
    // The producer: one lane issues the copies, a stage ahead of the consumers as long as a stage is free.
    if (lane == 0) {
      int s = 0;
      unsigned phase = 0;
      for (std::size_t first = begin; first < end; first += kRows) {
        lab::tma::wait(&empty[s], phase ^ 1);  // the consumers are done with this stage's previous rows
        const std::size_t n = end - first < kRows ? end - first : kRows;
        float* buf = stage_mem + s * stage_floats;
        if constexpr (kSplit == 1) {  // whole rows: the stage's rows are contiguous, one copy each of x and dy
          const unsigned bytes = static_cast<unsigned>(n * dim * sizeof(float));
          lab::tma::arrive_expect_bytes(&full[s], 2 * bytes);
          lab::tma::load_bulk(buf, x + first * dim, bytes, &full[s]);
          lab::tma::load_bulk(buf + std::size_t(kRows) * dim, dy + first * dim, bytes, &full[s]);
        } else {  // this block's part of each row
          const unsigned bytes = static_cast<unsigned>(width * sizeof(float));
          lab::tma::arrive_expect_bytes(&full[s], static_cast<unsigned>(2 * n * bytes));
          for (std::size_t r = 0; r < n; ++r) {
            lab::tma::load_bulk(buf + r * width, x + (first + r) * dim + c0, bytes, &full[s]);
            lab::tma::load_bulk(buf + (kRows + r) * width, dy + (first + r) * dim + c0, bytes, &full[s]);
          }
        }
        if (++s == stages) s = 0, phase ^= 1;
      }
    }
    __syncwarp();  // the warp whole again before the block's barriers (they count warps, not threads)
  } else {
#pragma unroll
    for (int k = 0; k < kItems; ++k) dg[k] = db[k] = Chunk{};
    Chunk gmr[kHeld ? kItems : 1];
    if constexpr (kHeld) {
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int col = (t + k * kLanes) * 4;
        if (col < width) gmr[k] = Chunk::load(gamma + c0 + col);
      }
    }
    int s = 0;
    unsigned phase = 0, parity = 0;
    if constexpr (kSplit > 1) {
      // Split rows, a row a stage. The row's other half is the other block's, and so are half its
      // sums: thread 0 sends this half's sums into the other block's shared memory, and the row's dx
      // waits for the other half's. Waiting at once would stop the whole block for the exchange on
      // every row (both blocks in lock step, 356 us at 4096 x 16384, 76% of the copy rate), so the
      // block goes on to reduce the next row first and writes a row's dx one row late. Its xhat and
      // dy gamma wait in the stage itself, written over x and dy: the stage is freed a row later.
      // Slots: row j's sums go into slot j % 4 of the other block, which read row j - 4's before
      // it sent row j - 2's (this block's wait for those came before its send of row j).
      struct Pending {
        int stage;
        std::size_t row;
        float rs, s1, s2;
      } pending{};
      bool has_pending = false;
      unsigned sent = 0;
      auto finish = [&](const Pending& r, unsigned n) {  // dx of row r, the n-th row exchanged
        lab::tma::wait_cluster(&peer_full[n % 4], (n / 4) & 1);
        const float mean_g = (r.s1 + peer_sums[n % 4][0]) / dim, mean_gx = (r.s2 + peer_sums[n % 4][1]) / dim;
        const float* bx = stage_mem + r.stage * stage_floats;
        const float* bd = bx + width;
#pragma unroll
        for (int k = 0; k < kItems; ++k) {
          const int col = (t + k * kLanes) * 4;
          if (col < width)
            dx_chunk(Chunk::load(bx + col), Chunk::load(bd + col), r.rs, mean_g, mean_gx)
                .store(dx + r.row * dim + c0 + col);
        }
        lab::tma::fence_proxy_async();  // these accesses before the TMA's next writes into the stage
        lab::tma::arrive(&empty[r.stage]);
      };
      for (std::size_t row = begin; row < end; ++row) {
        const float mu = mean[row], rs = rstd[row];
        lab::tma::wait(&full[s], phase);
        float* bx = stage_mem + s * stage_floats;
        float* bd = bx + width;
        float s1 = 0.f, s2 = 0.f;
#pragma unroll
        for (int k = 0; k < kItems; ++k) {
          const int col = (t + k * kLanes) * 4;
          if (col < width) {
            Chunk xv = Chunk::load(bx + col), gv = Chunk::load(bd + col);
            const Chunk gm = kHeld ? gmr[kHeld ? k : 0] : Chunk::load(gamma_mem + col);
            reduce_chunk(xv, gv, gm, mu, rs, dg[k], db[k], s1, s2);
            xv.store(bx + col), gv.store(bd + col);  // this thread's own elements: read back by it alone
          }
        }
#pragma unroll
        for (int o = 16; o > 0; o /= 2)
          s1 += __shfl_xor_sync(0xffffffffu, s1, o), s2 += __shfl_xor_sync(0xffffffffu, s2, o);
        if (lane == 0) partial_sums[parity][0][warp][0] = s1, partial_sums[parity][0][warp][1] = s2;
        __syncwarp();
        asm volatile("bar.sync 1, %0;" ::"r"(kLanes) : "memory");
        s1 = s2 = 0.f;
        for (int w = 0; w < kWarps; ++w) s1 += partial_sums[parity][0][w][0], s2 += partial_sums[parity][0][w][1];
        parity ^= 1;
        if (threadIdx.x == 0) {
          lab::tma::arrive_expect_bytes(&peer_full[sent % 4], 2 * sizeof(float));
          lab::tma::store_pair_to_peer(peer_sums[sent % 4], s1, s2, &peer_full[sent % 4], rank ^ 1);
        }
        if (has_pending) finish(pending, sent - 1);  // the previous row's, while this row's sums travel
        pending = {s, row, rs, s1, s2}, has_pending = true, ++sent;
        if (++s == stages) s = 0, phase ^= 1;
      }
      if (has_pending) finish(pending, sent - 1);
    } else {  // whole rows
      for (std::size_t first = begin; first < end; first += kRows) {
        std::size_t row[kMulti];
        bool live[kMulti];
        float mu[kMulti], rs[kMulti];
#pragma unroll
        for (int m = 0; m < kMulti; ++m) {
          row[m] = first + group * kMulti + m;
          live[m] = row[m] < end;  // the same for the row's warps
          mu[m] = live[m] ? mean[row[m]] : 0.f, rs[m] = live[m] ? rstd[row[m]] : 0.f;
        }
        lab::tma::wait(&full[s], phase);
        Chunk xv[kMulti][kItems], gv[kMulti][kItems];
#pragma unroll
        for (int m = 0; m < kMulti; ++m) {
          const float* bx = stage_mem + s * stage_floats + std::size_t(group * kMulti + m) * width;
          const float* bd = bx + std::size_t(kRows) * width;
#pragma unroll
          for (int k = 0; k < kItems; ++k) {
            const int col = (t + k * kLanes) * 4;
            if (live[m] && col < width) xv[m][k] = Chunk::load(bx + col), gv[m][k] = Chunk::load(bd + col);
          }
        }
        lab::tma::fence_proxy_async();  // these reads before the TMA's next writes into the stage
        lab::tma::arrive(&empty[s]);    // the stage is in this thread's registers: it may be refilled
        if (++s == stages) s = 0, phase ^= 1;

        float sums[kMulti][2];
#pragma unroll
        for (int m = 0; m < kMulti; ++m) {
          float s1 = 0.f, s2 = 0.f;
#pragma unroll
          for (int k = 0; k < kItems; ++k) {
            const int col = (t + k * kLanes) * 4;
            if (live[m] && col < width) {
              reduce_chunk(xv[m][k], gv[m][k], kHeld ? gmr[kHeld ? k : 0] : Chunk::load(gamma_mem + col), mu[m], rs[m],
                           dg[k], db[k], s1, s2);
            }
          }
          sums[m][0] = s1, sums[m][1] = s2;
        }
#pragma unroll
        for (int o = 16; o > 0; o /= 2)
#pragma unroll
          for (int m = 0; m < kMulti; ++m)
#pragma unroll
            for (int j = 0; j < 2; ++j) sums[m][j] += __shfl_xor_sync(0xffffffffu, sums[m][j], o);
        if constexpr (kWarps > 1) {  // across the row's warps: shared memory, a barrier of theirs alone
          if (lane == 0)
#pragma unroll
            for (int m = 0; m < kMulti; ++m)
#pragma unroll
              for (int j = 0; j < 2; ++j) partial_sums[parity][group][warp % kWarps][2 * m + j] = sums[m][j];
          __syncwarp();
          asm volatile("bar.sync %0, %1;" ::"r"(kGroups == 1 ? 1 : 1 + group), "r"(kLanes) : "memory");
#pragma unroll
          for (int m = 0; m < kMulti; ++m)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              float v = 0.f;
              for (int w = 0; w < kWarps; ++w) v += partial_sums[parity][group][w][2 * m + j];
              sums[m][j] = v;
            }
          parity ^= 1;
        }
#pragma unroll
        for (int m = 0; m < kMulti; ++m) {
          const float mean_g = sums[m][0] / dim, mean_gx = sums[m][1] / dim;
#pragma unroll
          for (int k = 0; k < kItems; ++k) {
            const int col = (t + k * kLanes) * 4;
            if (live[m] && col < width)
              dx_chunk(xv[m][k], gv[m][k], rs[m], mean_g, mean_gx).store(dx + row[m] * dim + c0 + col);
          }
        }
      }
    }
  }
  // This block's partial (its cluster's, for split rows): dgamma then dbeta, all columns.
  const int cols = 2 * dim;
  float* out = partial + team * cols;
  if constexpr (kGroups == 1) {
    // One row group: a column's sums are one thread's, stored straight from its registers.
    if (warp < kConsumerWarps)
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int col = (t + k * kLanes) * 4;
        if (col < width) dg[k].store(out + c0 + col), db[k].store(out + dim + c0 + col);
      }
  } else {
    __syncthreads();  // every stage consumed: their memory holds the row groups' dgamma and dbeta sums now
    if (warp < kConsumerWarps) {
      float* slab = stage_mem + std::size_t(group) * cols;
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int col = (t + k * kLanes) * 4;
        if (col < dim) dg[k].store(slab + col), db[k].store(slab + dim + col);
      }
    }
    __syncthreads();
    // The groups' sums, in a fixed order, added by the consumers. (The producer warp could help,
    // but compute-sanitizer's racecheck then reports its reads against the consumers' writes
    // above: it does not take the barrier between them as ordering a warp that skipped the
    // consumers' named barriers.)
    if (warp < kConsumerWarps)
      for (int j = threadIdx.x; j < cols; j += 32 * kConsumerWarps) {
        float sum = 0.f;
        for (int g = 0; g < kGroups; ++g) sum += stage_mem[std::size_t(g) * cols + j];
        out[j] = sum;
      }
  }
  // Every block's partial written, the grid adds them (no second kernel, no launch to wait for), a
  // block 128 columns at a time: lane c of consumer warp w adds the float4s of columns 4c to 4c + 3
  // of parts w, w + 16, ... (each load a warp's 512 coalesced bytes, from L2, several in flight),
  // then the 16 sums of a column meet in shared memory, added in warp order: the same bits every
  // run. (A warp a column, its lanes reading a part each, took 11 us at 8192x4096: one 32-byte
  // sector a lane, the loads one after another.)
  cooperative_groups::this_grid().sync();
  float4* warp_sums = reinterpret_cast<float4*>(stage_mem);  // the stages are free now: kConsumerWarps x 32 float4s
  for (int tile = blockIdx.x; tile * 128 < cols; tile += gridDim.x) {  // every block, split or not
    const int col = tile * 128 + lane * 4;  // dim is a multiple of 4: a float4 is all dgamma or all dbeta
    if (warp < kConsumerWarps) {
      Chunk acc{};
      if (col < cols) {
#pragma unroll 4
        for (std::size_t part = warp; part < teams; part += kConsumerWarps) {
          // written by other SMs: from L2
          const float4 v = __ldcg(reinterpret_cast<const float4*>(partial + part * cols + col));
          acc.v[0] += v.x, acc.v[1] += v.y, acc.v[2] += v.z, acc.v[3] += v.w;
        }
      }
      warp_sums[warp * 32 + lane] = make_float4(acc.v[0], acc.v[1], acc.v[2], acc.v[3]);
    }
    __syncthreads();
    if (warp == 0 && col < cols) {
      Chunk total{};
      for (int w = 0; w < kConsumerWarps; ++w) {
        const float4 v = warp_sums[w * 32 + lane];
        total.v[0] += v.x, total.v[1] += v.y, total.v[2] += v.z, total.v[3] += v.w;
      }
      float* dst = col < dim ? dgamma + col : dbeta + (col - dim);
#pragma unroll
      for (int i = 0; i < 4; ++i) dst[i] = total.v[i];  // one float at a time: the outputs need no alignment
    }
    __syncthreads();  // warp_sums read before the next tile's
  }
#endif
}

// The variant's scratch: one partial dgamma and dbeta row a block (a block an SM), or a cluster for split rows.
struct Pipelined {
  using Topic = LayerNormBackward;
  lab::DeviceBuffer<float> partials;
  explicit Pipelined(const LayerNormBackward::Problem& p) : partials(2 * std::size_t(p.dim) * lab::current_device().sms) {}

  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) {
    if (dev.cc_major < 9)
      return "the TMA pipeline needs an sm_90 GPU or later (this one is sm_" + std::to_string(dev.cc_major) +
             std::to_string(dev.cc_minor) + ")";
    if (s[1] % 4 != 0) return "the TMA copies 16-byte aligned rows: D must be a multiple of 4";
    if (s[1] > kSplit * kMaxDim)
      return "a row of " + std::to_string(s[1]) + " floats needs 4 registers a column (x, dy gamma, dgamma, dbeta): "
             "more than 8192 columns an SM, two SMs a row, would fill the register file (the one-pass step runs them)";
    if (s[1] > kMaxDim && dev.smem_per_block_optin - 2048 < 2 * split_stage_bytes(s[1]) + 4 * split_width(s[1]))
      return "a split row's block holds one stage while the next fills: two stages of " +
             std::to_string(split_stage_bytes(s[1])) + " bytes and gamma exceed this GPU's shared memory a block";
    return "";
  }
  void run(LayerNormBackward::Problem& p, cudaStream_t stream) {
    if (p.dim <= kMaxDim)
      launch<1, kTiles>(p, p.dim, stream);
    else
      launch<kSplit, kSplitTiles>(p, split_width(p.dim), stream);
  }

 private:
  static constexpr int kSplit = 2;  // blocks a row above kMaxDim floats
  static constexpr rows::Tile kSplitTiles[] = {{512, 3}, {512, 4}};
  // A split row's wider half, as the kernel's `half`, and a stage of it (x and dy).
  static int split_width(std::int64_t dim) { return static_cast<int>((dim / 4 + 1) / 2 * 4); }
  static std::size_t split_stage_bytes(std::int64_t dim) { return 2 * sizeof(float) * split_width(dim); }
  int clusters_ = 0;  // clusters of kSplit blocks that fit at once (asked once)

  // Launches the kernel for rows of `width` floats a block (the wider half of a split row).
  template <int kS, const auto& kList>
  void launch(LayerNormBackward::Problem& p, int width, cudaStream_t stream) {
    rows::with_tile_of<kList, 4>(width, [&](auto lanes, auto items) {
      constexpr int kLanes = decltype(lanes)::value, kItems = decltype(items)::value;
      constexpr int kRows = stage_rows(kLanes, kItems);
      auto* kernel = &layernorm_backward_tma<kLanes, kItems, kS>;
      const lab::DeviceFacts& dev = lab::current_device();
      const std::size_t stage_bytes = sizeof(float) * 2 * kRows * std::size_t(width);
      const std::size_t gamma_bytes = kItems > 3 ? sizeof(float) * width : 0;  // gamma in shared memory
      const std::size_t budget = dev.smem_per_block_optin - 2048 - gamma_bytes;  // the static shared memory aside
      const int stages = static_cast<int>(std::clamp<std::size_t>(budget / stage_bytes, 1, kMaxStages));
      // The stages and gamma, and at least the final sums' kConsumerWarps x 32 float4s.
      const std::size_t smem = std::max(stages * stage_bytes + gamma_bytes, sizeof(float4) * 32 * kConsumerWarps);
      static std::size_t opted_in = 48 * 1024;
      if (smem > opted_in) {
        LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        opted_in = smem;
      }
      // A cooperative launch: its blocks (at most one an SM) are all resident at once, so they may
      // wait for each other (the grid-wide sync before the partials' sum). Split rows launch
      // clusters of kS blocks on neighbouring SMs (a GPC's), as many as fit at once.
      cudaLaunchConfig_t config{};
      cudaLaunchAttribute attrs[2];
      attrs[0].id = cudaLaunchAttributeCooperative;
      attrs[0].val.cooperative = 1;
      attrs[1].id = cudaLaunchAttributeClusterDimension;
      attrs[1].val.clusterDim.x = kS, attrs[1].val.clusterDim.y = 1, attrs[1].val.clusterDim.z = 1;
      config.blockDim = dim3(kThreads);
      config.dynamicSmemBytes = smem;
      config.stream = stream;
      config.attrs = attrs;
      config.numAttrs = kS > 1 ? 2 : 1;
      int teams = dev.sms;
      if constexpr (kS > 1) {
        if (clusters_ == 0) {
          config.gridDim = dim3(kS * (dev.sms / kS));
          LAB_CHECK(cudaOccupancyMaxActiveClusters(&clusters_, kernel, &config));
          if (clusters_ == 0) throw lab::Error("no cluster of " + std::to_string(kS) + " blocks fits this GPU");
        }
        teams = clusters_;
      }
      teams = static_cast<int>(std::min<std::size_t>(p.rows, teams));
      config.gridDim = dim3(kS * teams);
      LAB_CHECK(cudaLaunchKernelEx(&config, kernel, p.x.data(), p.gamma.data(), p.mean.data(), p.rstd.data(),
                                   p.dy.data(), p.dx.data(), partials.data(), p.dgamma.data(), p.dbeta.data(),
                                   p.rows, p.dim, stages));
    });
  }
};
}  // namespace

LAB_VARIANT_CLASS(Pipelined, optimized,
                  "TMA pipeline: a producer warp streams rows into shared memory, 16 consumer warps reduce them");
