// Fused attention backward on Hopper, P^T made under dP^T's product: the previous step's kernel,
// with S^T's products waited for alone.
//  - The previous steps issue S^T = K Q^T and dP^T = V dO^T interleaved, a wgmma of each per 16 of
//    d, commit them as one group and wait for the whole group: the consumer starts on
//    P^T = exp2(S^T scale - lse), its masks and its bf16 packing only once both products have
//    completed, and its tensor-core work of the tile waits behind that arithmetic.
//  - Here S^T's products are issued first and committed as a group of their own, then dP^T's: the
//    consumer waits for S^T's group alone (wgmma.wait_group 1), makes P^T while dP^T's products
//    still run, and waits for those only to make dS^T = P^T (dP^T - delta). The same products and
//    the same arithmetic: only the order of the issue and of the waits.
// The change is Bwd::kPFirst in hopper/backward_wgmma.cuh.
// Tolerance: bf16, as the previous step (the same products, summed in the same order).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_wgmma_p_under_dp --shape 8x16x4096x64x1
#include "attention/hopper/backward_wgmma.cuh"

namespace {
using PUnderDp = flashtma::bwd::Backward<flashtma::bwd::kPUnderDp>;
}  // namespace

LAB_VARIANT_CLASS_STEP(PUnderDp, LAB_STEP,
                       "the previous step with S^T's products waited for alone: P^T is made while dP^T's "
                       "products still run");
