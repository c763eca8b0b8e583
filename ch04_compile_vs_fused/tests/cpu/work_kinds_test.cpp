// demo_gpt2_report --profile's sorting by kind of work (gpt2/work_kinds.hpp), on the names CUPTI
// gives the kernels of the steps: a product counted as "the rest" (or GELU's kernel counted as a
// product) moves the report's shares, which the README quotes against the 20% for the rest.
#include <gtest/gtest.h>

#include "gpt2/work_kinds.hpp"

namespace {

using gpt2::report::kind_of_work;
using gpt2::report::short_name;
constexpr int kProducts = 0, kAttention = 1, kAdamW = 2, kRest = 3;

TEST(WorkKinds, VendorProductsAndTheirEpiloguesAreProducts) {
  EXPECT_EQ(kind_of_work("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"), kProducts);
  EXPECT_EQ(kind_of_work("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
                         "execute_segment_k_off_kernel__5x_cublas"),
            kProducts);
  EXPECT_EQ(kind_of_work("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, "
                         "__nv_bfloat16, true, false, false>(cublasLt::cublasSplitKParams<float>, float const*)"),
            kProducts);
}

// The lab's own product with GELU in its epilogue (steps 21 and 22): both epilogues are products.
TEST(WorkKinds, TheLabsOwnProductWithItsEpilogueIsAProduct) {
  const std::string dgelu =
      "void (anonymous namespace)::dgelu_product::tile_product_kernel<(anonymous namespace)::dgelu_product::Dgelu, "
      "11, false>(CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, __nv_bfloat16 const*, float*, int, int, int)";
  const std::string bias_gelu =
      "void (anonymous namespace)::dgelu_product::tile_product_kernel<(anonymous namespace)::dgelu_product::BiasGelu, "
      "7, true>(CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, __nv_bfloat16 const*, float*, int, int, int)";
  EXPECT_EQ(kind_of_work(dgelu), kProducts);
  EXPECT_EQ(kind_of_work(bias_gelu), kProducts);
  EXPECT_EQ(short_name(dgelu), "dgelu_product::tile_product_kernel<dgelu_product::Dgelu, 11, false>");
}

// GELU's own kernels, forward and backward, stay in the rest: "gelu" alone names no product.
TEST(WorkKinds, TheSeparateGeluKernelsAreTheRest) {
  EXPECT_EQ(kind_of_work("void (anonymous namespace)::gelu_backward_act_in_flight_kernel(__nv_bfloat16*, "
                         "__nv_bfloat16 const*, float*, int, int)"),
            kRest);
  EXPECT_EQ(kind_of_work("void (anonymous namespace)::gelu_kernel<2, __nv_bfloat16>(__nv_bfloat16 const*, "
                         "__nv_bfloat16*, long)"),
            kRest);
  EXPECT_EQ(kind_of_work("void (anonymous namespace)::layer_norm_backward_kernel<1, 4, __nv_bfloat16, "
                         "__nv_bfloat16>(float const*)"),
            kRest);
  EXPECT_EQ(kind_of_work("memset "), kRest);
  EXPECT_EQ(short_name("memset "), "memset");
}

TEST(WorkKinds, AttentionAndAdamW) {
  EXPECT_EQ(kind_of_work("void (anonymous namespace)::flashbf16::forward_kernel<64, true>(float const*)"),
            kAttention);
  EXPECT_EQ(kind_of_work("void attn::hopper::backward_kernel<128>(CUtensorMap_st)"), kAttention);
  EXPECT_EQ(kind_of_work("void (anonymous namespace)::adamw_kernel(float*, float const*, float*, float*, long)"),
            kAdamW);
}

}  // namespace
