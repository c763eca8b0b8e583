// lab::jit on the CPU: the expression graph, the generated source, NVRTC compiling it to PTX (no GPU
// needed), and the cache in memory and on disk.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>

#include "lab/check.hpp"
#include "lab/jit.hpp"

namespace {

using namespace lab::jit;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("lab_jit_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { std::filesystem::remove_all(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

Expr chain() {
  const Expr x = Expr::input(0);
  const Expr z = x * 1.5f + 0.5f;
  return 0.5f * z * (1.0f + erf(z * 0.70710678f)) * sigmoid(x) + Expr::column(0);
}

TEST(Jit, ArityCountsInputsAndColumns) {
  EXPECT_EQ(arity(chain()).inputs, 1);
  EXPECT_EQ(arity(chain()).columns, 1);
  const Expr e = max(Expr::input(2), Expr::column(3)) / 2.0f;
  EXPECT_EQ(arity(e).inputs, 3);
  EXPECT_EQ(arity(e).columns, 4);
  EXPECT_EQ(arity(Expr(1.0f)).inputs, 0);
}

TEST(Jit, IndicesBeyondTheLimitsAreUsageErrors) {
  EXPECT_THROW(Expr::input(kMaxInputs), lab::UsageError);
  EXPECT_THROW(Expr::input(-1), lab::UsageError);
  EXPECT_THROW(Expr::column(kMaxColumns), lab::UsageError);
  try {
    Expr::column(9);
    FAIL() << "no error";
  } catch (const lab::UsageError& e) {
    EXPECT_STREQ(e.what(), "lab::jit::Expr::column(9): column vectors are 0..7");
  }
}

TEST(Jit, ToStringIsInfix) {
  EXPECT_EQ(to_string(tanh(Expr::input(0) * 1.5f) + Expr::column(0)), "(tanh((in0 * 1.5)) + vec0[col])");
  EXPECT_EQ(to_string(-exp(Expr::input(1))), "-exp(in1)");
}

TEST(Jit, EvaluateInDouble) {
  const Expr x = Expr::input(0);
  EXPECT_DOUBLE_EQ(evaluate(sigmoid(x), {0.0}, {}), 0.5);
  EXPECT_DOUBLE_EQ(evaluate(max(x, Expr::column(0)) - 1.0f, {2.0}, {3.0}), 2.0);
  EXPECT_NEAR(evaluate(log(exp(x)) / 2.0f, {3.0}, {}), 1.5, 1e-15);
  EXPECT_DOUBLE_EQ(evaluate(erf(x) + tanh(x), {0.0}, {}), 0.0);
  EXPECT_DOUBLE_EQ(evaluate(sqrt(x * x + 16.0f), {3.0}, {}), 5.0);
  EXPECT_EQ(to_string(sqrt(x)), "sqrt(in0)");
  const std::string src = generate(Expr::input(1) / (sqrt(x) + 1e-8f));
  EXPECT_NE(src.find("sqrtf("), std::string::npos) << src;
  EXPECT_FALSE(compile(src, "compute_90").image.empty());  // NVRTC takes it (PTX: no GPU needed)
}

TEST(Jit, SourceHasBothKernelsAndComputesASharedNodeOnce) {
  const std::string src = generate(chain(), "chain");
  EXPECT_NE(src.find("extern \"C\" __global__ void chain_scalar(const LabJitArgs a)"), std::string::npos) << src;
  EXPECT_NE(src.find("extern \"C\" __global__ void chain_vec4(const LabJitArgs a)"), std::string::npos) << src;
  EXPECT_NE(src.find("erff("), std::string::npos);
  EXPECT_NE(src.find("__ldg(reinterpret_cast<const float4*>(a.in[0]) + q)"), std::string::npos) << src;
  EXPECT_NE(src.find("i % a.cols"), std::string::npos);  // the column broadcast
  // x is used twice and z twice: each is read or computed once.
  EXPECT_EQ(count(src, "= in0;"), 1u) << src;
  EXPECT_EQ(count(src, "erff("), 1u);
  // Constants are exact hexadecimal literals.
  EXPECT_NE(src.find("0x1.8p+0f"), std::string::npos) << src;  // 1.5
}

TEST(Jit, WithoutColumnsNoModulo) {
  const std::string src = generate(exp(Expr::input(0)) * Expr::input(1));
  EXPECT_EQ(src.find("% a.cols"), std::string::npos) << src;
  EXPECT_NE(src.find("__ldg(a.in[1] + i)"), std::string::npos) << src;
}

TEST(Jit, NvrtcCompilesTheSourceToPtxWithoutAGpu) {
  const Binary b = compile(generate(chain(), "chain"), "compute_90");
  const std::string ptx(b.image.begin(), b.image.end());
  EXPECT_NE(ptx.find(".entry chain_scalar"), std::string::npos);
  EXPECT_NE(ptx.find(".entry chain_vec4"), std::string::npos);
  EXPECT_NE(ptx.find("ld.global.nc.v4.f32"), std::string::npos) << "the float4 kernel loads 16 bytes at a time, read-only";
  EXPECT_GT(b.compile_ms, 0.0);
  EXPECT_FALSE(b.from_memory || b.from_disk);
}

TEST(Jit, ACompileErrorCarriesNvrtcsLog) {
  try {
    compile("extern \"C\" __global__ void k() { this is not cuda; }", "compute_90");
    FAIL() << "no error";
  } catch (const lab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("error"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("compute_90"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compile("", "gfx90a"), lab::UsageError);
}

TEST(Jit, CacheKeyChangesWithSourceAndArchitecture) {
  const std::string a = generate(chain()), b = generate(chain() * 2.0f);
  EXPECT_EQ(cache_key(a, "sm_90"), cache_key(a, "sm_90"));
  EXPECT_NE(cache_key(a, "sm_90"), cache_key(b, "sm_90"));
  EXPECT_NE(cache_key(a, "sm_90"), cache_key(a, "sm_80"));
  EXPECT_TRUE(std::regex_match(cache_key(a, "sm_90"), std::regex("[0-9a-f]{16}")));
}

TEST(Jit, CacheCompilesOnceThenServesFromMemoryAndFromDisk) {
  TempDir dir;
  const std::string src = generate(chain());
  Cache first(dir.path);
  const Binary a = first.get(src, "compute_90");
  EXPECT_EQ(first.compiles(), 1);
  EXPECT_FALSE(a.from_memory || a.from_disk);
  const Binary b = first.get(src, "compute_90");
  EXPECT_EQ(first.compiles(), 1);
  EXPECT_TRUE(b.from_memory);
  EXPECT_EQ(b.compile_ms, 0.0);
  EXPECT_EQ(a.image, b.image);
  // A second program (a new cache on the same folder) reads the file instead of compiling.
  Cache second(dir.path);
  const Binary c = second.get(src, "compute_90");
  EXPECT_EQ(second.compiles(), 0);
  EXPECT_TRUE(c.from_disk);
  EXPECT_EQ(a.image, c.image);
  EXPECT_TRUE(std::filesystem::exists(dir.path / (cache_key(src, "compute_90") + "-compute_90.ptx")));
  // Another architecture is another entry.
  second.get(src, "compute_80");
  EXPECT_EQ(second.compiles(), 1);
}

TEST(Jit, AMemoryOnlyCacheWritesNoFile) {
  Cache memory_only{std::filesystem::path()};
  memory_only.get(generate(Expr::input(0) + 1.0f), "compute_90");
  EXPECT_EQ(memory_only.compiles(), 1);
  EXPECT_TRUE(memory_only.get(generate(Expr::input(0) + 1.0f), "compute_90").from_memory);
}

TEST(Jit, RowAndColumnOnlyInRowKernels) {
  const Expr masked = select(Expr::col() > Expr::row(), -INFINITY, Expr::input(0) * 0.125f);
  EXPECT_EQ(to_string(masked), "select((col > row), -inf, (in0 * 0.125))");
  EXPECT_DOUBLE_EQ(evaluate(masked, {2.0}, {}, /*row=*/3, /*col=*/1), 0.25);
  EXPECT_EQ(evaluate(masked, {2.0}, {}, 1, 3), -INFINITY);
  EXPECT_THROW(generate(masked), lab::UsageError);  // the element-wise kernels have no row
  EXPECT_THROW(generate_row(RowOp::softmax, Expr::input(1)), lab::UsageError);
  EXPECT_THROW(generate_row(RowOp::softmax, Expr::input(0) + Expr::column(0)), lab::UsageError);
}

TEST(Jit, RowKernelsCompileToPtxWithTheExpressionInside) {
  const Expr masked = select(Expr::col() > Expr::row(), -INFINITY, Expr::input(0) * 0.125f);
  const std::string fwd = generate_row(RowOp::softmax, masked, "attn");
  // The prologue is read in both passes and never stored: two calls of the element function.
  std::size_t calls = 0;
  for (std::size_t at = fwd.find("attn_element(__ldg"); at != std::string::npos; at = fwd.find("attn_element(__ldg", at + 1))
    ++calls;
  EXPECT_EQ(calls, 2u) << fwd;
  const std::string bwd = generate_row(RowOp::softmax_backward, Expr::input(0) * 0.125f, "attn");
  EXPECT_NE(bwd.find("attn_element(p * (__ldg(dx + j) - dot)"), std::string::npos) << bwd;
  for (const auto& [src, entry] : {std::pair{fwd, ".entry attn_softmax"}, std::pair{bwd, ".entry attn_softmax_backward"}}) {
    const Binary b = compile(src, "compute_90");
    const std::string ptx(b.image.begin(), b.image.end());
    EXPECT_NE(ptx.find(entry), std::string::npos) << entry;
  }
}

}  // namespace
