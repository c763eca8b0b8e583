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
// What took it from 83-86% of the copy rate to 91% (H100, 16384 x 768 and 8192 x 4096, in us):
// - Sixteen consumer warps, not eight (61 -> 57, 157 -> 153). The consumers are latency-bound
//   (Nsight Compute: 11 cycles an instruction, most of the stalls on L1TEX); more warps hide more.
//   The registers allow it only with short tiles: 17 warps leave 96 registers a thread (a quarter
//   of the SM's registers serves 5 of them), so a lane holds at most 4 float4s of a row: D = 768
//   is 2 warps a row, 3 float4s a lane.
// - gamma held in registers where a lane's share is 3 float4s or less, not read from L1 for every
//   row (57 -> 55.5; 4096 x 3072: 64 -> 60). With 4 it would spill.
// - Rows of 3073 to 4096 floats: the whole block takes two rows at once, 2 float4s a lane of each,
//   one barrier for both rows' sums (153 -> 151).
// - The partials' sum coalesced, 32 columns a block with several loads in flight (151 -> 147.5).
//   It was a warp a column, each lane reading one 32-byte sector, the loads one after another: the
//   end of the kernel (partials, grid sync, sum) took 11 us of the 151. It still takes about 8.
//
// Each block (one an SM) takes one contiguous range of rows, the ranges differing by at most a
// row. Handing out stages in turn instead left the last round to some SMs only: 8192 rows of 4096
// are 4096 stages of two, 31.03 an SM, so four SMs ran a 32nd stage while the others waited.
//
// What it supports: rows of a multiple of 4 floats (the TMA copies 16-byte aligned ranges) and at
// most 8192 of them. A consumer lane holds 4 values a column (x, dy gamma, and the dgamma and
// dbeta sums), so a row of D floats takes 4 D registers: a 16384-float row would fill the 65536
// registers of an SM on its own, with nothing left for the kernel. Those rows are the one-pass
// kernel's (step 1), which keeps dgamma and dbeta in shared memory instead.
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

template <int kLanes, int kItems>
__global__ void __launch_bounds__(kThreads, 1)
    layernorm_backward_tma(const float* __restrict__ x, const float* __restrict__ gamma,
                           const float* __restrict__ mean, const float* __restrict__ rstd,
                           const float* __restrict__ dy, float* __restrict__ dx, float* __restrict__ partial,
                           float* __restrict__ dgamma, float* __restrict__ dbeta, int rows, int dim, int stages) {
#if __CUDA_ARCH__ >= 900
  using Chunk = rows::Chunk<4>;
  constexpr int kWarps = kLanes / 32;
  constexpr int kGroups = kConsumerWarps / kWarps;  // row groups (kWarps warps each)
  constexpr int kMulti = rows_at_once(kLanes, kItems);
  constexpr int kRows = stage_rows(kLanes, kItems);
  extern __shared__ __align__(128) float stage_mem[];  // stages x [x: kRows x dim | dy: kRows x dim]
  __shared__ std::uint64_t full[kMaxStages], empty[kMaxStages];
  __shared__ float partial_sums[2][kGroups][kWarps][2 * kMulti];  // a row's two sums across its warps, by row parity
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::size_t stage_floats = 2 * std::size_t(kRows) * dim;
  // This block's rows: an even share of all of them, contiguous.
  const std::size_t begin = rows * std::size_t(blockIdx.x) / gridDim.x,
                    end = rows * (std::size_t(blockIdx.x) + 1) / gridDim.x;
  if (threadIdx.x == 0) {
    // A stage is free again once every consumer thread has arrived: each arrival releases that
    // thread's own reads of it (with one arrival a warp after __syncwarp instead, compute-sanitizer's
    // racecheck reported the TMA's refill against the other lanes' reads).
    for (int s = 0; s < stages; ++s) lab::tma::init(&full[s], 1), lab::tma::init(&empty[s], 32 * kConsumerWarps);
    lab::tma::fence_init();
  }
  __syncthreads();

  const int group = warp / kWarps;            // the consumer's row within a stage
  const int t = (warp % kWarps) * 32 + lane;  // its lane within the row's threads
  Chunk dg[kItems], db[kItems];
  if (warp == kConsumerWarps) {
    // The producer: one lane issues the copies, a stage ahead of the consumers as long as a stage is free.
    if (lane == 0) {
      int s = 0;
      unsigned phase = 0;
      for (std::size_t first = begin; first < end; first += kRows) {
        lab::tma::wait(&empty[s], phase ^ 1);  // the consumers are done with this stage's previous rows
        const std::size_t n = end - first < kRows ? end - first : kRows;
        const unsigned bytes = static_cast<unsigned>(n * dim * sizeof(float));
        float* buf = stage_mem + s * stage_floats;
        lab::tma::arrive_expect_bytes(&full[s], 2 * bytes);
        lab::tma::load_bulk(buf, x + first * dim, bytes, &full[s]);
        lab::tma::load_bulk(buf + std::size_t(kRows) * dim, dy + first * dim, bytes, &full[s]);
        if (++s == stages) s = 0, phase ^= 1;
      }
    }
    __syncwarp();  // the warp whole again before the block's barriers (they count warps, not threads)
  } else {
#pragma unroll
    for (int k = 0; k < kItems; ++k) dg[k] = db[k] = Chunk{};
    constexpr bool kHeld = kItems <= 3;  // gamma in registers too (4 more an item)
    Chunk gmr[kHeld ? kItems : 1];
    if constexpr (kHeld) {
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int col = (t + k * kLanes) * 4;
        if (col < dim) gmr[k] = Chunk::load(gamma + col);
      }
    }
    int s = 0;
    unsigned phase = 0, parity = 0;
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
        const float* bx = stage_mem + s * stage_floats + std::size_t(group * kMulti + m) * dim;
        const float* bd = bx + std::size_t(kRows) * dim;
#pragma unroll
        for (int k = 0; k < kItems; ++k) {
          const int col = (t + k * kLanes) * 4;
          if (live[m] && col < dim) xv[m][k] = Chunk::load(bx + col), gv[m][k] = Chunk::load(bd + col);
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
          if (live[m] && col < dim) {
            const Chunk gm = kHeld ? gmr[kHeld ? k : 0] : Chunk::load(gamma + col);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const float xhat = (xv[m][k].v[i] - mu[m]) * rs[m];
              dg[k].v[i] += gv[m][k].v[i] * xhat;
              db[k].v[i] += gv[m][k].v[i];
              xv[m][k].v[i] = xhat;      // keep xhat
              gv[m][k].v[i] *= gm.v[i];  // keep g = dy gamma
              s1 += gv[m][k].v[i];
              s2 += gv[m][k].v[i] * xhat;
            }
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
        asm volatile("bar.sync %0, %1;" ::"r"(1 + group), "r"(kLanes) : "memory");
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
          if (live[m] && col < dim) {
            Chunk out;
#pragma unroll
            for (int i = 0; i < 4; ++i) out.v[i] = rs[m] * (gv[m][k].v[i] - mean_g - xv[m][k].v[i] * mean_gx);
            out.store(dx + row[m] * dim + col);
          }
        }
      }
    }
  }
  __syncthreads();  // every stage consumed: their memory holds the rows' dgamma and dbeta sums now
  const int cols = 2 * dim;
  if (warp < kConsumerWarps) {
    float* slab = stage_mem + std::size_t(group) * cols;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int col = (t + k * kLanes) * 4;
      if (col < dim) dg[k].store(slab + col), db[k].store(slab + dim + col);
    }
  }
  __syncthreads();
  // This block's partial, its rows in a fixed order, added by the consumers. (The producer warp
  // could help, but compute-sanitizer's racecheck then reports its reads against the consumers'
  // writes above: it does not take the barrier between them as ordering a warp that skipped the
  // consumers' named barriers.)
  float* out = partial + std::size_t(blockIdx.x) * cols;
  if (warp < kConsumerWarps)
    for (int j = threadIdx.x; j < cols; j += 32 * kConsumerWarps) {
      float sum = 0.f;
      for (int g = 0; g < kGroups; ++g) sum += stage_mem[std::size_t(g) * cols + j];
      out[j] = sum;
    }
  // Every block's partial written, the grid adds them (no second kernel, no launch to wait for), a
  // block 32 columns at a time: lane c of consumer warp w adds parts w, w + 16, ... of column c
  // (each load a warp's 128 coalesced bytes, from L2, several in flight), then the 16 sums of a
  // column meet in shared memory, added in warp order: the same bits every run. (A warp a column,
  // its lanes reading a part each, took 11 us at 8192x4096: one 32-byte sector a lane, the loads
  // one after another.)
  cooperative_groups::this_grid().sync();
  float* warp_sums = stage_mem;  // the stages are free now: kConsumerWarps x 32 floats
  for (int tile = blockIdx.x; tile * 32 < cols; tile += gridDim.x) {
    const int col = tile * 32 + lane;
    if (warp < kConsumerWarps) {
      float acc = 0.f;
      if (col < cols) {
#pragma unroll 8
        for (unsigned part = warp; part < gridDim.x; part += kConsumerWarps)
          acc += __ldcg(partial + std::size_t(part) * cols + col);  // written by other SMs: from L2
      }
      warp_sums[warp * 32 + lane] = acc;
    }
    __syncthreads();
    if (warp == 0 && col < cols) {
      float total = 0.f;
      for (int w = 0; w < kConsumerWarps; ++w) total += warp_sums[w * 32 + lane];
      if (col < dim) dgamma[col] = total;
      else dbeta[col - dim] = total;
    }
    __syncthreads();  // warp_sums read before the next tile's
  }
#endif
}

// The variant's scratch: one partial dgamma and dbeta row a block (a block an SM).
struct Pipelined {
  using Topic = LayerNormBackward;
  lab::DeviceBuffer<float> partials;
  explicit Pipelined(const LayerNormBackward::Problem& p) : partials(2 * std::size_t(p.dim) * lab::current_device().sms) {}

  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) {
    if (dev.cc_major < 9)
      return "the TMA pipeline needs an sm_90 GPU or later (this one is sm_" + std::to_string(dev.cc_major) +
             std::to_string(dev.cc_minor) + ")";
    if (s[1] % 4 != 0) return "the TMA copies 16-byte aligned rows: D must be a multiple of 4";
    if (s[1] > kMaxDim)
      return "a row of " + std::to_string(s[1]) + " floats needs 4 registers a column (x, dy gamma, dgamma, dbeta): "
             "more than 8192 columns would fill the register file (the one-pass step runs them)";
    return "";
  }
  void run(LayerNormBackward::Problem& p, cudaStream_t stream) {
    rows::with_tile_of<kTiles, 4>(p.dim, [&](auto lanes, auto items) {
      constexpr int kLanes = decltype(lanes)::value, kItems = decltype(items)::value;
      constexpr int kRows = stage_rows(kLanes, kItems);
      auto* kernel = &layernorm_backward_tma<kLanes, kItems>;
      const std::size_t stage_bytes = sizeof(float) * 2 * kRows * std::size_t(p.dim);
      const std::size_t budget = lab::current_device().smem_per_block_optin - 2048;  // the static shared memory aside
      const int stages = static_cast<int>(std::clamp<std::size_t>(budget / stage_bytes, 1, kMaxStages));
      const std::size_t smem = std::max(stages * stage_bytes, sizeof(float) * 32 * kConsumerWarps);  // and the final sums
      static std::size_t opted_in = 48 * 1024;
      if (smem > opted_in) {
        LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        opted_in = smem;
      }
      const int blocks = static_cast<int>(std::min<std::size_t>(p.rows, lab::current_device().sms));
      // A cooperative launch: its blocks (one an SM, at most one an SM) are all resident at once, so
      // they may wait for each other (the grid-wide sync before the partials' sum).
      const float *x = p.x.data(), *gamma = p.gamma.data(), *mean = p.mean.data(), *rstd = p.rstd.data(),
                  *dy = p.dy.data();
      float *dx = p.dx.data(), *part = partials.data(), *dgamma = p.dgamma.data(), *dbeta = p.dbeta.data();
      int rows_ = p.rows, dim = p.dim, stages_ = stages;
      void* args[] = {&x, &gamma, &mean, &rstd, &dy, &dx, &part, &dgamma, &dbeta, &rows_, &dim, &stages_};
      LAB_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), blocks, kThreads, args, smem, stream));
    });
  }
};
}  // namespace

LAB_VARIANT_CLASS(Pipelined, optimized,
                  "TMA pipeline: a producer warp streams rows into shared memory, 16 consumer warps reduce them");
