// Optimized GELU backward on bf16 storage, step 1: one kernel reads eight bf16 of x and of dy (16
// bytes each) a thread, computes dy gelu'(x) in fp32 in registers (erfcf and expf) and writes the
// eight results rounded to bf16. Memory sees x, dy and dx once each, 6 bytes an element (the
// baseline moves 30), half of what the fp32 topic moves; at that rate erfcf's instructions, not the
// bytes, set its time, as in the forward. The final variant replaces erfcf.
// Run: make ch03 && ./ch03_kernels/optimized_gelu_backward_bf16_in_registers
// The same file on fp16 storage (lab::Stored16) is the program optimized_gelu_backward_fp16_in_registers.
// lab-storage: fp16
#include "activations.cuh"

LAB_VARIANT_STEP(GeluBackward16, 1, "one kernel: 16-bit in, fp32 in registers (erfcf), 16-bit out (16-byte packs)") {
  ew::map_packs<<<ew::pack_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluOp{}, p.x.data(), p.dy.data(), p.dx.data(),
                                                                    p.n);
  LAB_CHECK_LAUNCH();
}
