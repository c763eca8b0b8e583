// The mma.sync attention kernels (attention/kernels/flash_bf16.cuh) at head size 256, which the
// chapter's attention topic does not take (its fp32 kernels are written for up to 128)
// and the Python package's 16-bit attention does: the forward with one m-tile a warp (64 queries a
// block), the backward with two blocks a key block, each accumulating half of dK's, dV's and dQ's
// columns (the grid's z). They are held to the topic's own checks, as the chapter's tensor-core
// variants are at the head sizes it takes (optimized_attention_fused_tc,
// optimized_attention_backward_fused_tc): O and lse against the double reference with bf16's slack
// and O normwise against the emulation of the kernel's roundings (its tiles of 64 keys); dQ, dK
// and dV against the reference and normwise against the bf16 backward's emulation, where 1% of a
// gradient's elements off fails. Sequences below, at and off the 64-row tile, causal on and off,
// several heads.
#include <gtest/gtest.h>

#include <any>
#include <memory>
#include <string>

#include "attention/attention.cuh"
#include "attention/kernels/flash_bf16.cuh"
#include "lab/check.hpp"
#include "lab/registry.hpp"
#include "lab/rng.hpp"
#include "lab/testing.hpp"
#include "tests/kernels/kernel_testing.cuh"

namespace {

const lab::Shape kWide[] = {{1, 1, 1, 256, 0}, {1, 2, 64, 256, 1}, {2, 1, 129, 256, 0}, {1, 2, 200, 256, 1},
                            {1, 1, 300, 256, 0}};

std::string name(const lab::Shape& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" + std::to_string(s[3]) +
         (s[4] ? " causal" : "");
}

// What the chapter's tensor-core variants declare, for the topic's checks.
const lab::Declared kForward{.precision = "bf16", .writes = {"lse"}, .schedule = [](const lab::Shape&) {
                               return std::any(attn::ForwardSchedule(flashbf16::fwd::Config<256>::kBc));
                             }};
const lab::Declared kBackward{.precision = "bf16"};

// Each of kWide's shapes made by Topic with the declarations, run by `run` on the problem (which
// returns with the kernels done: its bf16 copies are freed there), and held to the topic's verify().
template <class Topic, class Run>
void each_wide_shape(const lab::Declared& declared, Run run) {
  const std::uint64_t seed = lab::testing::run_seed();  // EXPECT_PASSES names it
  lab::Rng rng(seed);
  const lab::TopicInfo topic = lab::topic_info<Topic>();
  for (const lab::Shape& s : kWide) {
    SCOPED_TRACE(name(s));
    const std::unique_ptr<lab::Problem> made = topic.make(s, rng, declared);
    auto& p = static_cast<typename Topic::Problem&>(*made);
    run(p, p.dims);
    EXPECT_PASSES(p.verify());
  }
}

TEST(FlashBf16Wide, ForwardAtHeadSize256) {
  LAB_REQUIRE_GPU();
  each_wide_shape<Attention>(kForward, [](Attention::Problem& p, const attn::Dims& a) {
    attn::Bf16Inputs in16(p, nullptr);
    flashbf16::forward<__nv_bfloat16, 256>(in16.q.data(), in16.k.data(), in16.v.data(), p.o.data(), p.lse.data(),
                                           a.bh(), a.seq, a.d, a.causal, a.scale(), nullptr);
    LAB_CHECK(cudaDeviceSynchronize());
  });
}

TEST(FlashBf16Wide, BackwardAtHeadSize256) {
  LAB_REQUIRE_GPU();
  each_wide_shape<AttentionBackward>(kBackward, [](AttentionBackward::Problem& p, const attn::Dims& a) {
    attn::SavedOutput saved(p, nullptr);  // O and lse from the eager fp32 forward, as the variant's
    attn::Bf16Inputs in16(p, nullptr, p.dout.data());
    saved.prologue(a, p.dout.data(), p.dq.data(), nullptr);  // delta, and dQ = 0 for the atomics
    flashbf16::backward<__nv_bfloat16, 256>(in16.q.data(), in16.k.data(), in16.v.data(), in16.dout.data(),
                                            saved.lse.data(), saved.delta.data(), p.dq.data(), p.dk.data(),
                                            p.dv.data(), a.bh(), a.seq, a.d, a.causal, a.scale(), nullptr);
    LAB_CHECK(cudaDeviceSynchronize());
  });
}

}  // namespace
