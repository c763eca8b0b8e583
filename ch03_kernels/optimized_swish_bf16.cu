// Optimized Swish on bf16 storage: one kernel reads eight bf16 (16 bytes) a thread, widens them to
// fp32 in registers, applies Swish in fp32 and writes the eight results rounded to bf16. Memory sees
// x once and y once, 4 bytes an element (the baseline moves 20, its casts going through memory),
// and half of what the fp32 topic moves: the same arithmetic at the bf16 copy rate.
// Run: make ch03 && ./ch03_kernels/optimized_swish_bf16
// The same file on fp16 storage (lab::Stored16) is the program optimized_swish_fp16.
// lab-storage: fp16
#include "activations.cuh"

LAB_VARIANT(Swish16, optimized, "one kernel: 16-bit in, fp32 in registers, 16-bit out (16-byte packs)") {
  ew::map_packs<<<ew::pack_blocks(p.n), ew::kThreads, 0, stream>>>(act::SwishOp{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
