// Fused attention forward on tensor cores: the fused variant's algorithm (online softmax over
// K/V tiles, no seq^2 tensor) with bf16 inputs, fp32 accumulation and the two products on
// mma.sync m16n8k16 (FlashAttention-2's arrangement). A block of 4 warps owns 128 queries, a warp
// 32 of them, so the softmax of a row never leaves its warp: the scores of a 32 x 64 tile live in
// the accumulator registers (64 a thread), their row max and sum need two shuffles across a quad
// of lanes, and the probabilities are already laid out as the A operand of P V, so P goes from
// accumulators to the next mma without touching shared memory. K and V tiles arrive through
// cp.async, one buffer each, in FlashAttention-2's schedule: the next K tile is copied while the
// softmax and P V run, the next V tile while Q K^T runs (double buffering both was measured and
// was not faster). Inputs are bf16 copies of Q, K, V (made untimed, as a bf16
// model holds them); the output O and lse are fp32. Precision: bf16 (inputs and P rounded to 8
// bits of mantissa), declared, and judged by the reference's slack for it.
// The next step, optimized_attention_fused_wgmma, runs d = 128 on Hopper's warpgroup wgmma.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_tc
#include "attention.cuh"
#include "flash_tiles.cuh"
#include "mma_tiles.cuh"

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;

// The block's shape: MT m16 tiles of queries a warp (so a K or V fragment loaded from shared
// memory feeds MT mma instructions: with one, shared memory bandwidth caps the tensor cores near
// half their rate), 16 MT kWarps queries a block, 64 keys a tile. Up to d = 64 Q's fragments stay
// in registers for the whole block; at d = 128 the O accumulators alone take MT d / 2 = 128
// registers a lane, and Q's fragments are read from shared memory at every step instead (one
// ldmatrix per m-tile and 16 of d, feeding NT mma instructions), which leaves room for 64 keys.
template <int D>
struct Config {
  static constexpr int MT = 2;
  static constexpr int kBr = 16 * MT * kWarps;
  static constexpr int kBc = 64;
  static constexpr bool kQInRegisters = D < 128;
  static constexpr int kSmemBytes = (kBr + 2 * kBc) * D * 2;  // Q, the K tile, the V tile, bf16
};

template <int D, bool Causal>
__global__ void __launch_bounds__(kThreads)
    flash_forward_tc(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                     const __nv_bfloat16* __restrict__ v, float* __restrict__ o, float* __restrict__ lse, int seq,
                     float scale_log2) {
  using L = mma::Layout<D>;
  using C = Config<D>;
  constexpr int MT = C::MT, kBr = C::kBr, kBc = C::kBc, NT = kBc / 8;
  extern __shared__ uint4 smem[];
  uint4* qs = smem;  // Q, the K tile, the V tile
  uint4* ks = qs + kBr * (D / 8);
  uint4* vs = ks + kBc * (D / 8);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int tile = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = tile * kBr;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D;
  q += head, k += head, v += head, o += head;

  mma::load_tile_async<kBr, D, kThreads>(qs, q, row0, seq);
  mma::load_tile_async<kBc, D, kThreads>(ks, k, 0, seq);
  mma::cp_async_commit();  // copy groups: Q and K tile 0; V tile 0; then per tile K kt + 1, V kt + 1
  mma::load_tile_async<kBc, D, kThreads>(vs, v, 0, seq);
  mma::cp_async_commit();

  std::uint32_t qf[MT][C::kQInRegisters ? D / 16 : 1][4];
  float acc[MT][D / 8][4] = {};
  mma::Softmax<MT> softmax;  // each row's running max and sum
  const int wrow = 16 * MT * warp;          // the warp's first row in the block
  const int qrow0 = row0 + wrow + g;        // this lane's rows: qrow0 + 16 mt + 8 h

  const int last = Causal ? min(seq, row0 + kBr) : seq;  // keys [0, last) matter
  const int tiles = (last + kBc - 1) / kBc;
  float s[MT][NT][4];  // the tile's scores, then its probabilities
  mma::sweep_kv(
      tiles, [&](int kt) { mma::load_tile_async<kBc, D, kThreads>(ks, k, kt * kBc, seq); },
      [&](int kt) { mma::load_tile_async<kBc, D, kThreads>(vs, v, kt * kBc, seq); },
      [&](int kt) {
        if constexpr (C::kQInRegisters) {
          if (kt == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int kk = 0; kk < D / 16; ++kk)
                mma::ldmatrix_x4(qf[mt][kk], qs + L::offset(wrow + 16 * mt + lane % 16, 2 * kk + lane / 16));
          }
        }

        // S = Q K^T for the warp's 16 MT rows and the tile's kBc keys: NT n-tiles of 8 keys. Each K
        // fragment pair feeds MT mma instructions.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int n = 0; n < NT; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          std::uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            if constexpr (C::kQInRegisters) {
#pragma unroll
              for (int i = 0; i < 4; ++i) a[mt][i] = qf[mt][kk][i];
            } else {
              mma::ldmatrix_x4(a[mt], qs + L::offset(wrow + 16 * mt + lane % 16, 2 * kk + lane / 16));
            }
          }
#pragma unroll
          for (int nn = 0; nn < NT / 2; ++nn) {
            std::uint32_t b[4];
            mma::ldmatrix_x4(b, ks + L::offset(16 * nn + lane % 8 + 8 * (lane / 16), 2 * kk + (lane / 8) % 2));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma::mma_bf16(s[mt][2 * nn], a[mt], b[0], b[1]);
              mma::mma_bf16(s[mt][2 * nn + 1], a[mt], b[2], b[3]);
            }
          }
        }
      },
      [&](int kt) {
        mma::mask_scores<Causal>(s, kt * kBc, row0, qrow0, seq);
        softmax.tile(s, scale_log2, acc);
      },
      [&](int) {
        // O += P V: P's accumulators are the A fragments of a 16-key step, as bf16 pairs; each V
        // fragment pair feeds MT mma instructions.
#pragma unroll
        for (int kk = 0; kk < kBc / 16; ++kk) {
          std::uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            a[mt][0] = mma::pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            a[mt][1] = mma::pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            a[mt][2] = mma::pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            a[mt][3] = mma::pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
          }
#pragma unroll
          for (int dn = 0; dn < D / 16; ++dn) {
            std::uint32_t b[4];
            mma::ldmatrix_x4_trans(b, vs + L::offset(16 * kk + lane % 8 + 8 * ((lane / 8) % 2), 2 * dn + lane / 16));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma::mma_bf16(acc[mt][2 * dn], a[mt], b[0], b[1]);
              mma::mma_bf16(acc[mt][2 * dn + 1], a[mt], b[2], b[3]);
            }
          }
        }
      });
  softmax.write(acc, o, lse + std::size_t(blockIdx.y) * seq, qrow0, seq);
}


// The variant's state: the bf16 copies of Q, K and V, made before timing.
struct TensorCores {
  using Topic = Attention;
  attn::Bf16Inputs in16;
  TensorCores(const Attention::Problem& p, cudaStream_t stream) : in16(p, stream) {}
  static lab::Declared declared() { return {.precision = "bf16", .writes = {"lse"}}; }

  void run(Attention::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    flash::dispatch(a.d, a.causal, [&](auto dc, auto causal) {
      constexpr int D = decltype(dc)::value;
      auto kernel = flash_forward_tc<D, decltype(causal)::value>;
      constexpr int bytes = Config<D>::kSmemBytes;
      LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      const dim3 grid((a.seq + Config<D>::kBr - 1) / Config<D>::kBr, a.bh());
      kernel<<<grid, kThreads, bytes, stream>>>(in16.q.data(), in16.k.data(), in16.v.data(), p.o.data(), p.lse.data(),
                                                a.seq, a.scale() * flash::kLog2e);
      LAB_CHECK(cudaGetLastError());
    });
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(TensorCores, 4, "fused on tensor cores: bf16 mma.sync, fp32 accumulation, P kept in registers");
