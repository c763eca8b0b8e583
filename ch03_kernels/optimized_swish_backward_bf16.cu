// Optimized Swish backward on bf16 storage: one kernel reads eight bf16 of x and of dy (16 bytes each)
// a thread, computes dy swish'(x) in fp32 in registers and writes the eight results rounded to bf16.
// Memory sees x, dy and dx once each, 6 bytes an element (the baseline moves 30), half of what the
// fp32 topic moves.
// Run: make ch03 && ./ch03_kernels/optimized_swish_backward_bf16
// The same file on fp16 storage (lab::Stored16) is the program optimized_swish_backward_fp16.
// lab-storage: fp16
#include "activations.cuh"

LAB_VARIANT(SwishBackward16, optimized, "one kernel: 16-bit in, fp32 in registers, 16-bit out (16-byte packs)") {
  ew::map_packs<<<ew::pack_blocks(p.n), ew::kThreads, 0, stream>>>(act::SwishOp{}, p.x.data(), p.dy.data(), p.dx.data(),
                                                                    p.n);
  LAB_CHECK_LAUNCH();
}
