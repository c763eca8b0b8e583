// Baseline GELU on bf16 storage, as `F.gelu(x.float()).to(torch.bfloat16)` runs it: the input cast to
// fp32 by one kernel and written to memory, the chapter's fp32 GELU (optimized_gelu.cu's float4 map)
// in a second, its result rounded to bf16 by a third. The arithmetic is fp32's, as in the optimized
// variant; the traffic is 2 + 4 (the cast) + 4 + 4 (the GELU) + 4 + 2 (the rounding) = 20 bytes an
// element where 4 must move, and two fp32 copies of the array sit in memory. optimized_gelu_bf16.cu
// does the casts in registers, in one kernel.
// Run: make ch03 && ./ch03_kernels/baseline_gelu_bf16
// The same file on fp16 storage (lab::Stored16) is the program baseline_gelu_fp16.
// lab-storage: fp16
#include "activations.cuh"

namespace {
struct CastThrough {
  using Topic = Gelu16;
  lab::DeviceBuffer<float> x32, y32;  // the fp32 copies the casts write
  explicit CastThrough(const Topic::Problem& p) : x32(p.n), y32(p.n) {}
  void run(Topic::Problem& p, cudaStream_t stream) {
    ew::map_packs<<<ew::pack_blocks(p.n), ew::kThreads, 0, stream>>>(ew::Identity{}, p.x.data(), x32.data(), p.n);
    LAB_CHECK_LAUNCH();
    ew::map_vec4<<<ew::vec4_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluOp{}, x32.data(), y32.data(), p.n);
    LAB_CHECK_LAUNCH();
    ew::map_packs<<<ew::pack_blocks(p.n), ew::kThreads, 0, stream>>>(ew::Identity{}, y32.data(), p.y.data(), p.n);
    LAB_CHECK_LAUNCH();
  }
};
}  // namespace

LAB_VARIANT_CLASS(CastThrough, baseline, "casts through memory: 16-bit to fp32, the fp32 GELU, fp32 to 16-bit (three kernels)");
