// Optimized LayerNorm: one pass. A row is loaded once into registers by a warp (D up to 1024) or
// a whole block (up to 32768), with 16-byte loads; the mean is a sum over the group (shuffles,
// and shared memory across warps), the variance a second sum over the registers around that
// mean (two-pass accuracy, no second read), then y is written from the same registers. Memory
// sees x once and y once: the minimum. The tile (threads x float4s a thread) is the smallest of
// rows.cuh's list that holds D; D not a multiple of 4 uses the same kernel with 4-byte loads. A
// row longer than the largest tile (32768 floats) does not fit in registers: the variant declares
// it N/A rather than running another kernel under its name.
// On bf16 and fp16 storage (the twins, optimized_layernorm_bf16 and _fp16) the same kernel reads and
// writes half the bytes, widened to fp32 in registers, y rounded once on the store: eight 16-bit
// values (16 bytes) a load for rows of a multiple of 8 up to 1024 (a warp's tiles, where a lane's
// registers hold as many values as at four a load), half the load and store instructions of four
// (8 bytes) a load, which longer rows keep. On those rows a lane also keeps its chunks as they are
// stored, eight 16-bit values in four registers, widened where read (Packed), which leaves it the
// registers to load its chunks of gamma and beta before the row's two sums instead of after them:
// the sums no longer stand between the row's last use of the memory and gamma's and beta's loads,
// which a warp otherwise waits for with nothing else to do. The arithmetic, its order and its
// roundings are unchanged (y bit for bit as before).
// Tried on those rows and not kept (session 68, H200, 16384 x 768 in bf16): warps that hold gamma's
// and beta's chunks and walk rows on a grid of as many blocks as the SMs hold, the next row loaded
// ahead of this row's sums. 15.73 us against this kernel's 15.42 (78 registers a thread, three
// blocks an SM, where this kernel runs four); without the look-ahead 15.84, forced to four blocks
// 16.52 (results/layernorm_walk_h200_s68.txt). The warps a block leaves keep more rows in flight
// than the walk's second row does.
// Tried on an H100 in session 89 (16384 x 768 in bf16, each form alternated four times with
// torch.compile's kernel in one process; results/layernorm_blocks_h100_s89/): blocks of 64, 128,
// 512 and 1024 threads (this kernel: 256), streaming loads and stores (ld.global.cs, st.global.cs),
// and __launch_bounds__ asking for five or six blocks an SM. 128 threads with streaming took 17.07
// us, 64 threads 17.12, 128 threads 17.15, against this kernel's 17.19 and torch.compile's 16.83;
// five blocks 17.67 (12 bytes spilled), six 28.21 (88 bytes), 512 threads 17.51, 1024 19.13. None
// reached torch.compile's kernel, and the best differs from this one by less than runs differ: none
// is kept.
// Tried on an H100 in session 94 (the same way; results/layernorm_hints_s93/): L2 eviction hints.
// x streamed and y stored normally (ld.global.cs: 17.21 us; an evict_first policy: 17.12), gamma
// and beta kept with evict_last as inductor's kernel loads them (17.62), and the first two on
// 128-thread blocks (16.92, 17.03), against this kernel's 17.28 and torch.compile's 16.88. None
// is ahead of torch.compile; none is kept. Nsight Compute timed this kernel and inductor's alike
// (17.15 and 17.18 us, both reading x's 25.2 MB from DRAM once).
// Run: make ch03 && ./ch03_kernels/optimized_layernorm
// lab-storage: bf16 fp16
#include "layernorm.cuh"

namespace {
// kItems chunks of V values a lane, kept as Hold: rows::Chunk<V> (V floats) or Packed (the 16-bit
// words). kAffineFirst: gamma's and beta's chunks loaded before the sums (Packed rows only: as
// floats they would take the registers the row needs).
template <class T, int V>
struct Packed {
  static_assert(sizeof(T) == 2 && V == 8, "eight 16-bit values, one 16-byte access");
  uint4 w;
  __device__ __forceinline__ static Packed load(const T* p) { return {*reinterpret_cast<const uint4*>(p)}; }
  __device__ __forceinline__ float operator[](int i) const {
    const unsigned u = i < 4 ? (i < 2 ? w.x : w.y) : (i < 6 ? w.z : w.w);
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      // bf16 is fp32's upper half: a shift or a mask, no conversion. Through __bfloat1622float2 ptxas
      // kept the widened floats instead (92 registers a thread at three chunks a lane, against 62).
      return __uint_as_float(i & 1 ? u & 0xffff0000u : u << 16);
    } else {
      const float2 t = lab::pair_to_f32<T>(u);
      return i & 1 ? t.y : t.x;
    }
  }
};
template <int V>
struct Floats : rows::Chunk<V> {
  template <class P>
  __device__ __forceinline__ static Floats load(const P* p) { return {rows::Chunk<V>::load(p)}; }
  __device__ __forceinline__ float operator[](int i) const { return this->v[i]; }
};

template <int kLanes, int kItems, int V, class Hold, bool kAffineFirst>
__global__ void __launch_bounds__(rows::block_threads<kLanes>())
    layernorm_rows(const lab::Stored* __restrict__ x, const lab::Stored* __restrict__ gamma,
                   const lab::Stored* __restrict__ beta, lab::Stored* __restrict__ y, float* __restrict__ mean,
                   float* __restrict__ rstd, int rows, int dim) {
  using Chunk = rows::Chunk<V>;
  __shared__ float scratch[32];
  const int lane = threadIdx.x % kLanes;
  const std::size_t row = std::size_t(blockIdx.x) * rows::rows_per_block<kLanes>() + threadIdx.x / kLanes;
  if (row >= std::size_t(rows)) return;  // a whole warp (or, for a block per row, the whole block)
  const lab::Stored* xr = x + row * dim;
  Hold v[kItems], g[kAffineFirst ? kItems : 1], b[kAffineFirst ? kItems : 1];
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int c = (lane + k * kLanes) * V;
    if (c < dim) {
      v[k] = Hold::load(xr + c);
      if constexpr (!kAffineFirst) {
#pragma unroll
        for (int i = 0; i < V; ++i) sum += v[k][i];
      }
    }
  }
  if constexpr (kAffineFirst) {  // gamma and beta, then the sum (the same order of terms)
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int c = (lane + k * kLanes) * V;
      if (c < dim) g[k] = Hold::load(gamma + c), b[k] = Hold::load(beta + c);
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      if ((lane + k * kLanes) * V < dim) {
#pragma unroll
        for (int i = 0; i < V; ++i) sum += v[k][i];
      }
  }
  const float mu = rows::group_sum<kLanes>(sum, scratch) / dim;
  float sq = 0.f;
#pragma unroll
  for (int k = 0; k < kItems; ++k)
    if ((lane + k * kLanes) * V < dim) {
#pragma unroll
      for (int i = 0; i < V; ++i) sq += (v[k][i] - mu) * (v[k][i] - mu);
    }
  const float rs = rsqrtf(rows::group_sum<kLanes>(sq, scratch) / dim + ln::kEps);
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int c = (lane + k * kLanes) * V;
    if (c < dim) {
      const Hold gk = kAffineFirst ? g[k] : Hold::load(gamma + c), bk = kAffineFirst ? b[k] : Hold::load(beta + c);
      Chunk out;
#pragma unroll
      for (int i = 0; i < V; ++i) out.v[i] = (v[k][i] - mu) * rs * gk[i] + bk[i];
      out.store(y + row * dim + c);
    }
  }
  if (lane == 0) mean[row] = mu, rstd[row] = rs;
}

template <int V, int kCount = rows::kTileCount>
void launch(LayerNorm::Problem& p, cudaStream_t stream) {
  rows::with_tile<V, kCount>(p.dim, [&](auto lanes, auto items) {
    constexpr int kLanes = decltype(lanes)::value, kItems = decltype(items)::value;
    layernorm_rows<kLanes, kItems, V, Floats<V>, false>
        <<<rows::blocks_for_rows<kLanes>(p.rows), rows::block_threads<kLanes>(), 0, stream>>>(
            p.x.data(), p.gamma.data(), p.beta.data(), p.y.data(), p.mean.data(), p.rstd.data(), p.rows, p.dim);
    LAB_CHECK_LAUNCH();
  });
}

// 16-bit rows of a multiple of 8 up to 1024: a warp's tiles at eight values a load, three chunks
// a lane among them (768, GPT-2 small's d_model, in three where rows.cuh's tiles would take four, the
// fourth empty), each kept Packed, gamma and beta first.
[[maybe_unused]] constexpr rows::Tile kPackedTiles[] = {{2, 1}, {4, 1}, {4, 2}, {4, 4}, {32, 1}, {32, 2}, {32, 3}, {32, 4}};
template <class T>
void launch_packed(LayerNorm::Problem& p, cudaStream_t stream) {
  rows::with_tile_of<kPackedTiles, 8>(p.dim, [&](auto lanes, auto items) {
    constexpr int kLanes = decltype(lanes)::value, kItems = decltype(items)::value;
    layernorm_rows<kLanes, kItems, 8, Packed<T, 8>, true>
        <<<rows::blocks_for_rows<kLanes>(p.rows), rows::block_threads<kLanes>(), 0, stream>>>(
            p.x.data(), p.gamma.data(), p.beta.data(), p.y.data(), p.mean.data(), p.rstd.data(), p.rows, p.dim);
    LAB_CHECK_LAUNCH();
  });
}

struct OnePass {
  using Topic = LayerNorm;
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts&) { return rows::row_fits(s[1]); }
  void run(LayerNorm::Problem& p, cudaStream_t stream) {
    if constexpr (sizeof(lab::Stored) == 2) {  // a warp's tiles at eight values a load: up to 32 x 4 x 8
      if (p.dim % 8 == 0 && p.dim <= 1024) return launch_packed<lab::Stored>(p, stream);
    }
    if (p.dim % 4 == 0)
      launch<4>(p, stream);
    else
      launch<1>(p, stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS(OnePass, optimized, "one pass: the row in registers (a warp or a block per row), 16-byte loads where the row allows");
