// Baseline GELU backward on bf16 storage, as autograd runs it on tensors cast to fp32: x and dy cast
// to fp32 by two kernels and written to memory, the chapter's fp32 backward (optimized_gelu_backward.cu's
// float4 map) in a third, dx rounded to bf16 by a fourth. The arithmetic is fp32's, as in the
// optimized variant; the traffic is 2 x (2 + 4) + 12 + 4 + 2 = 30 bytes an element where 6 must
// move. optimized_gelu_backward_bf16.cu does the casts in registers, in one kernel.
// Run: make ch03 && ./ch03_kernels/baseline_gelu_backward_bf16
// The same file on fp16 storage (lab::Stored16) is the program baseline_gelu_backward_fp16.
// lab-storage: fp16
#include "activations.cuh"

namespace {
struct CastThrough {
  using Topic = GeluBackward16;
  lab::DeviceBuffer<float> x32, dy32, dx32;  // the fp32 copies the casts write
  explicit CastThrough(const Topic::Problem& p) : x32(p.n), dy32(p.n), dx32(p.n) {}
  void run(Topic::Problem& p, cudaStream_t stream) {
    const unsigned packs = ew::pack_blocks(p.n);
    ew::map_packs<<<packs, ew::kThreads, 0, stream>>>(ew::Identity{}, p.x.data(), x32.data(), p.n);
    LAB_CHECK_LAUNCH();
    ew::map_packs<<<packs, ew::kThreads, 0, stream>>>(ew::Identity{}, p.dy.data(), dy32.data(), p.n);
    LAB_CHECK_LAUNCH();
    ew::map_vec4<<<ew::vec4_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluOp{}, x32.data(), dy32.data(),
                                                                      dx32.data(), p.n);
    LAB_CHECK_LAUNCH();
    ew::map_packs<<<packs, ew::kThreads, 0, stream>>>(ew::Identity{}, dx32.data(), p.dx.data(), p.n);
    LAB_CHECK_LAUNCH();
  }
};
}  // namespace

LAB_VARIANT_CLASS(CastThrough, baseline, "casts through memory: x, dy to fp32, the fp32 backward, dx to 16-bit (four kernels)");
