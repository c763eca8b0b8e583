// Fused attention forward on Hopper, the softmax overlapped with the products inside each
// warpgroup: the previous step's ping-pong (hopper/flash_tma.cuh's frame, turns at the tensor cores), and
// a warpgroup no longer waits for both of its turn's products before its softmax. Its turn issues
// S_j = Q K_j^T first and O += P_{j-1} V_{j-1} second, as two commit groups; it waits for the first
// alone (wgmma.wait_group 1), exponentiates S_j while P_{j-1} V_{j-1} still runs, and only then
// waits for the second, rescales O by the new row maxima (Softmax::exponentiate and rescale, the
// two halves of Softmax::tile) and packs P_j. The P V product is asynchronous to the thread that
// issued it: its accumulators (O) and its A operand (P) stay untouched in registers until the
// wait, which is why the rescale moves after it and P_j is packed into the registers P_{j-1} frees
// only then. FlashAttention-3's "intra-warpgroup overlap": with the ping-pong, the tensor cores
// now wait neither for another warpgroup's softmax nor for their own.
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_overlap --shape 8x16x4096x128x0
// The consumer's schedule is in hopper/overlapped.cuh (Overlapped), which the next step launches too.
#include "attention/hopper/overlapped.cuh"

namespace {
using Overlap = flashtma::Forward<flashtma::Overlapped>;
}  // namespace

LAB_VARIANT_CLASS_STEP(Overlap, LAB_STEP,
                       "warp-specialised, ping-pong, and the softmax of tile j under the P V of tile j - 1 inside each "
                       "warpgroup (d = 64, 128; sm_90a): FlashAttention-3's schedule");
