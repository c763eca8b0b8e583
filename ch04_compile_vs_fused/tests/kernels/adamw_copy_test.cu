// The GPT-2 step's AdamW writing the bf16 copy of what it updates (flat_adamw.cuh; step 19,
// optimized_gpt2_step_fused_bf16_adamw_rounds.cu): on the device, against the same kernel without
// the copy, run on the same inputs.
//  - p, m and v are those of the step without a copy, bit for bit: the copy changes no update;
//  - the copy is p's new value rounded to bf16 (to nearest, even), bit for bit: the host's rounding
//    of the device's p, as round_kernel's would be (RowKernels.RoundKernelBf16);
//  - the copy covers [begin, end) and nothing outside it: poisoned before, its unwritten elements
//    fail, and a guard on either side stays as it was.
// Ranges that start at a multiple of 4 (the 8-byte stores) and that do not (one value at a time),
// with loose ends on either side of the quads.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpt2/fused/flat_adamw.cuh"
#include "lab/check.hpp"
#include "lab/memory.hpp"
#include "lab/rng.hpp"
#include "lab/testing.hpp"
#include "lab/verify.hpp"
#include "tests/kernels/kernel_testing.cuh"

namespace {

TEST(FlatAdamW, CopyIsTheUpdatedParametersRounded) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  const flat_adamw::Hyper h = flat_adamw::Hyper::of(1e-3, 0.9, 0.999, 1e-8, 0.1);
  const flat_adamw::Coef coef = flat_adamw::Coef::at_step(1e-3, 0.9, 0.999, 4);
  const std::size_t n = 4 * 9000 + 3;
  const std::vector<float> p0 = uniform(rng, n, -0.1f, 0.1f), g = uniform(rng, n, -1e-2f, 1e-2f),
                           m0 = uniform(rng, n, -1e-3f, 1e-3f), v0 = uniform(rng, n, 1e-8f, 1e-6f);
  const struct {
    std::size_t begin, end;
  } ranges[] = {{0, n}, {4 * 1000, 4 * 3000}, {4 * 17 + 1, 4 * 4000 + 2}, {4 * 5 + 3, 4 * 6 + 1}, {6, 7}};
  for (const auto& [begin, end] : ranges) {
    SCOPED_TRACE(::testing::Message() << "[" << begin << ", " << end << ")");
    auto run = [&](bool with_copy, std::vector<bf16>* copy) {
      auto p = device(p0), m = device(m0), v = device(v0), g_d = device(g);
      const std::size_t count = end - begin;
      lab::DeviceBuffer<bf16> c(count + 8);  // a 4-value guard on either side, 8-byte aligned
      lab::poison(c);
      flat_adamw::step(p.data(), g_d.data(), m.data(), v.data(), begin, end, coef, h, nullptr,
                       with_copy ? c.data() + 4 : nullptr);
      LAB_CHECK(cudaGetLastError());
      if (copy) *copy = c.download();
      return std::vector<std::vector<float>>{p.download(), m.download(), v.download()};
    };
    const auto plain = run(false, nullptr);
    std::vector<bf16> copy;
    const auto with = run(true, &copy);
    const char* names[] = {"p", "m", "v"};
    for (int k = 0; k < 3; ++k) {
      const std::vector<double> ref(plain[k].begin(), plain[k].end());
      EXPECT_PASSES(lab::compare(with[k], ref, lab::Tolerance::exact(), std::string(names[k]) + " with the copy"));
    }
    std::vector<float> got(end - begin);
    std::vector<double> ref(end - begin);
    for (std::size_t i = begin; i < end; ++i) {
      got[i - begin] = __bfloat162float(copy[4 + (i - begin)]);
      ref[i - begin] = round_bf16(with[0][i]);
    }
    EXPECT_PASSES(lab::compare(got, ref, lab::Tolerance::exact(), "the copy: p rounded to bf16"));
    for (std::size_t j : {std::size_t(0), std::size_t(3), 4 + (end - begin), 4 + (end - begin) + 3})
      EXPECT_TRUE(__bfloat162float(copy[j]) != __bfloat162float(copy[j])) << "guard " << j << " was written";
  }
}

}  // namespace
