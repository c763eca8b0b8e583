// Verification must reject wrong transposes, and every ch01 transpose must agree with the others
// bit for bit on the same inputs.
#include <gtest/gtest.h>

#include "coalescing.cuh"
#include "lab/harness.hpp"
#include "lab/testing.hpp"

namespace {

// Right everywhere except the very last element, which it never writes.
__global__ void transpose_skip_last(const float* in, float* out, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols && !(r == rows - 1 && c == cols - 1))
    out[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * cols + c];
}

// Off by one at the right edge: the last column is read from its neighbour.
__global__ void transpose_edge_off_by_one(const float* in, float* out, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) {
    const int src = (c == cols - 1 && cols > 1) ? c - 1 : c;
    out[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * cols + src];
  }
}

dim3 grid16(const Coalescing::Problem& p) { return dim3((p.cols + 15) / 16, (p.rows + 15) / 16); }

void run_skip_last(Coalescing::Problem& p, cudaStream_t s) {
  transpose_skip_last<<<grid16(p), dim3(16, 16), 0, s>>>(p.in.data(), p.out.data(), p.rows, p.cols);
  LAB_CHECK_LAUNCH();
}
void run_edge_off_by_one(Coalescing::Problem& p, cudaStream_t s) {
  transpose_edge_off_by_one<<<grid16(p), dim3(16, 16), 0, s>>>(p.in.data(), p.out.data(), p.rows, p.cols);
  LAB_CHECK_LAUNCH();
}

struct Wrong {
  lab::Registry reg;  // kept apart from the chapter's registry, which must hold only right variants
  const lab::Variant* skip = &lab::register_variant<Coalescing>(reg, "wrong_skip_last", lab::Role::optimized, 1,
                                                                "leaves one element unwritten", &run_skip_last);
  const lab::Variant* edge = &lab::register_variant<Coalescing>(reg, "wrong_edge", lab::Role::optimized, 2,
                                                                "off by one at the last column", &run_edge_off_by_one);
};

TEST(CoalescingVerification, RejectsAnUnwrittenElement) {
  LAB_REQUIRE_GPU();
  Wrong w;
  lab::Stream s;
  const lab::Verdict v = lab::check_variant(*w.skip, {1000, 777}, lab::testing::run_seed(), s);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.bad, 1u);
  EXPECT_EQ(v.nan, 1u);  // the poison shows through
  ASSERT_FALSE(v.first.empty());
  // out is cols x rows; the unwritten element is out[cols-1][rows-1].
  EXPECT_EQ(v.first[0].index, std::size_t{777} * 1000 - 1);
  EXPECT_NE(v.details().find("out[776, 999]"), std::string::npos) << v.details();
}

TEST(CoalescingVerification, RejectsAnOffByOneAtTheEdge) {
  LAB_REQUIRE_GPU();
  Wrong w;
  lab::Stream s;
  const lab::Verdict v = lab::check_variant(*w.edge, {31, 4097}, lab::testing::run_seed(), s);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.nan, 0u);      // every element written ...
  EXPECT_EQ(v.bad, 31u);     // ... but the whole last column (a row of out) is wrong
  EXPECT_EQ(v.first[0].index, std::size_t{4096} * 31);
}

TEST(CoalescingVerification, SameSeedSameInputs) {
  LAB_REQUIRE_GPU();
  lab::Rng a(11), b(11), c(12);
  Coalescing::Problem p1({33, 65}, a), p2({33, 65}, b), p3({33, 65}, c);
  LAB_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(p1.in.download(), p2.in.download());
  EXPECT_NE(p1.in.download(), p3.in.download());
}

TEST(CoalescingVerification, AllVariantsAgreeBitForBit) {
  LAB_REQUIRE_GPU();
  const auto variants = lab::Registry::global().of_topic("coalescing");
  ASSERT_GE(variants.size(), 2u);
  const lab::Shape shape{1537, 2049};
  lab::Stream s;
  std::vector<float> first;
  for (const lab::Variant* v : variants) {
    lab::Prepared pr = lab::prepare(*v, shape, lab::testing::run_seed(), s);
    auto& p = dynamic_cast<Coalescing::Problem&>(*pr.problem);
    p.poison(s);
    pr.instance->run(p, s);
    s.sync();
    const auto out = p.out.download();
    if (first.empty())
      first = out;
    else
      EXPECT_TRUE(out == first) << v->program << " differs from " << variants.front()->program;
  }
}

}  // namespace
