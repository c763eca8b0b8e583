// Optimized LayerNorm backward, step 1: one pass over x and dy for all three gradients. A warp or a block
// holds a row of x and dy in registers (the forward's tiles), computes the two row sums of
// g = dy gamma with shuffles, and writes dx from the same registers. dgamma and dbeta are column
// sums: each row group adds its row's dy xhat and dy into its own slab of shared memory (its
// lanes own distinct columns, so no atomics), the blocks are persistent (as many an SM as fit, up
// to four, each walking many rows), and at the end each block writes one partial row of dgamma and dbeta; a
// second small kernel adds them in a fixed order. x and dy are read once, dx written once, where
// the baseline reads them three times. Rows longer than 16384 floats (4096 when D is not a
// multiple of 4) would not fit the shared-memory slabs: the variant declares them N/A.
// On bf16 and fp16 storage (the twins, optimized_layernorm_backward_one_pass_bf16 and _fp16) the
// same kernel reads x, dy and gamma in half the bytes (four 16-bit values a load, widened in
// registers) and rounds dx once on the store; the slabs and partials stay fp32, and dgamma and
// dbeta are rounded once at the end.
// Run: make ch03 && ./ch03_kernels/optimized_layernorm_backward_one_pass
// lab-storage: bf16 fp16
#include "layernorm.cuh"

namespace {
// Tiles the backward may use: the forward's up to 512 x 8 (16384 floats at V = 4).
constexpr int kBackwardTiles = rows::tiles_through(512, 8);

template <int kLanes, int kItems, int V>
__global__ void __launch_bounds__(rows::block_threads<kLanes>())
    layernorm_backward_rows(const lab::Stored* __restrict__ x, const lab::Stored* __restrict__ gamma,
                            const float* __restrict__ mean, const float* __restrict__ rstd,
                            const lab::Stored* __restrict__ dy, lab::Stored* __restrict__ dx,
                            float* __restrict__ partial, int rows, int dim) {
  using Chunk = rows::Chunk<V>;
  constexpr int kRowsPerBlock = rows::rows_per_block<kLanes>();
  extern __shared__ float slabs[];  // kRowsPerBlock x [dgamma (dim) | dbeta (dim)]
  __shared__ float scratch[32];
  for (int j = threadIdx.x; j < kRowsPerBlock * 2 * dim; j += blockDim.x) slabs[j] = 0.f;
  __syncthreads();
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  float* dgamma_slab = slabs + std::size_t(group) * 2 * dim;
  float* dbeta_slab = dgamma_slab + dim;
  for (std::size_t row = std::size_t(blockIdx.x) * kRowsPerBlock + group; row < std::size_t(rows);
       row += std::size_t(gridDim.x) * kRowsPerBlock) {
    const std::size_t base = row * dim;
    const float mu = mean[row], rs = rstd[row];
    Chunk xv[kItems], gv[kItems];
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int c = (lane + k * kLanes) * V;
      if (c < dim) {
        xv[k] = Chunk::load(x + base + c);
        gv[k] = Chunk::load(dy + base + c);
        const Chunk gm = Chunk::load(gamma + c);
        Chunk dg = Chunk::load(dgamma_slab + c), db = Chunk::load(dbeta_slab + c);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float xhat = (xv[k].v[i] - mu) * rs;
          dg.v[i] += gv[k].v[i] * xhat;
          db.v[i] += gv[k].v[i];
          xv[k].v[i] = xhat;                 // keep xhat
          gv[k].v[i] *= gm.v[i];             // keep g = dy gamma
          s1 += gv[k].v[i];
          s2 += gv[k].v[i] * xhat;
        }
        dg.store(dgamma_slab + c);
        db.store(dbeta_slab + c);
      }
    }
    const float mean_g = rows::group_sum<kLanes>(s1, scratch) / dim;
    const float mean_gx = rows::group_sum<kLanes>(s2, scratch) / dim;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int c = (lane + k * kLanes) * V;
      if (c < dim) {
        Chunk out;
#pragma unroll
        for (int i = 0; i < V; ++i) out.v[i] = rs * (gv[k].v[i] - mean_g - xv[k].v[i] * mean_gx);
        out.store(dx + base + c);
      }
    }
  }
  __syncthreads();
  // This block's partial: the row groups' slabs added in a fixed order.
  float* out = partial + std::size_t(blockIdx.x) * 2 * dim;
  for (int j = threadIdx.x; j < 2 * dim; j += blockDim.x) {
    float s = 0.f;
    for (int g = 0; g < kRowsPerBlock; ++g) s += slabs[std::size_t(g) * 2 * dim + j];
    out[j] = s;
  }
}

template <int V>
void launch(LayerNormBackward::Problem& p, float* partials, cudaStream_t stream) {
  rows::with_tile<V, kBackwardTiles>(p.dim, [&](auto lanes, auto items) {
    constexpr int kLanes = decltype(lanes)::value, kItems = decltype(items)::value;
    constexpr int kRowsPerBlock = rows::rows_per_block<kLanes>();
    auto* kernel = &layernorm_backward_rows<kLanes, kItems, V>;
    const std::size_t smem = sizeof(float) * kRowsPerBlock * 2 * std::size_t(p.dim);
    static std::size_t opted_in = 48 * 1024;  // per instantiation: the dynamic shared memory allowed so far
    if (smem > opted_in) {
      LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      opted_in = smem;
    }
    int resident = 0;  // blocks of this kernel an SM holds at once
    LAB_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, rows::block_threads<kLanes>(), smem));
    const int parts = ln::backward_parts(p.rows, kRowsPerBlock, lab::current_device().sms, resident);
    kernel<<<parts, rows::block_threads<kLanes>(), smem, stream>>>(p.x.data(), p.gamma.data(), p.mean.data(),
                                                                   p.rstd.data(), p.dy.data(), p.dx.data(),
                                                                   partials, p.rows, p.dim);
    LAB_CHECK_LAUNCH();
    rows::sum_partials(partials, parts, p.dim, 2 * std::size_t(p.dim), p.dgamma.data(), stream);
    rows::sum_partials(partials + p.dim, parts, p.dim, 2 * std::size_t(p.dim), p.dbeta.data(), stream);
  });
}

// The variant's scratch: the blocks' partial dgamma and dbeta (parts x 2 x dim; at most
// ln::kMaxBlocksPerSm blocks an SM).
struct OnePass {
  using Topic = LayerNormBackward;
  lab::DeviceBuffer<float> partials;
  explicit OnePass(const LayerNormBackward::Problem& p)
      : partials(2 * std::size_t(p.dim) * ln::backward_parts(p.rows, 1, lab::current_device().sms, ln::kMaxBlocksPerSm)) {}

  static std::string supports(const lab::Shape& s, const lab::DeviceFacts&) {
    return rows::row_fits<kBackwardTiles>(s[1]);
  }
  void run(LayerNormBackward::Problem& p, cudaStream_t stream) {
    if (p.dim % 4 == 0)
      launch<4>(p, partials.data(), stream);
    else
      launch<1>(p, partials.data(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(OnePass, 1, "one pass: rows in registers, dgamma/dbeta in shared-memory slabs");
