// Optimized GELU on bf16 storage, step 1: one kernel reads eight bf16 (16 bytes) a thread, widens
// them to fp32 in registers, applies GELU in fp32 (erfcf) and writes the eight results rounded to
// bf16. Memory sees x once and y once, 4 bytes an element (the baseline moves 20, its casts going
// through memory), half of what the fp32 topic moves. At half the bytes the kernel is no longer
// bound by them: erfcf is a few dozen instructions with branches, and on an H200 this step runs at
// about half the copy rate (compare's GB/s column). The final variant replaces erfcf.
// Run: make ch03 && ./ch03_kernels/optimized_gelu_bf16_in_registers
// The same file on fp16 storage (lab::Stored16) is the program optimized_gelu_fp16_in_registers.
// lab-storage: fp16
#include "activations.cuh"

LAB_VARIANT_STEP(Gelu16, 1, "one kernel: 16-bit in, fp32 in registers (erfcf), 16-bit out (16-byte packs)") {
  ew::map_packs<<<ew::pack_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluOp{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
