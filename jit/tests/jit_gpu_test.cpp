// lab::jit on the GPU: generated kernels, loaded through the driver API, against the expression
// evaluated in double; both kernels (float4 and scalar), column broadcast, awkward sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "lab/jit.hpp"
#include "lab/memory.hpp"
#include "lab/rng.hpp"
#include "lab/testing.hpp"
#include "lab/verify.hpp"

namespace {

using namespace lab::jit;

struct Case {
  std::size_t rows;
  int cols;
  std::size_t offset;  // elements to shift every pointer by: 1 makes them 4-byte aligned only
};

void check(const Expr& e, const Case& c) {
  const Arity a = arity(e);
  const std::size_t n = c.rows * std::size_t(c.cols);
  lab::Rng rng(lab::testing::run_seed());
  lab::Stream s;  // non-blocking: the fills and the poison go on it too, in order with the kernel
  std::vector<lab::DeviceBuffer<float>> ins, vecs;
  for (int k = 0; k < a.inputs; ++k) {
    ins.emplace_back(n + c.offset);
    rng.uniform(ins.back(), -2.f, 2.f, s);
  }
  for (int k = 0; k < a.columns; ++k) {
    vecs.emplace_back(std::size_t(c.cols) + c.offset);
    rng.uniform(vecs.back(), -1.f, 1.f, s);
  }
  lab::DeviceBuffer<float> out(n + c.offset);
  lab::poison(out, s);
  std::vector<const float*> in_ptrs, vec_ptrs;
  for (auto& b : ins) in_ptrs.push_back(b.data() + c.offset);
  for (auto& b : vecs) vec_ptrs.push_back(b.data() + c.offset);
  const Kernel k = Kernel::build(e, Cache::global());
  k.launch(in_ptrs, vec_ptrs, out.data() + c.offset, n, c.cols, s);
  s.sync();

  std::vector<std::vector<float>> hin, hvec;
  for (auto& b : ins) hin.push_back(b.download());
  for (auto& b : vecs) hvec.push_back(b.download());
  const auto got = out.download();
  std::vector<double> ref(n), in_v(a.inputs), vec_v(a.columns);
  for (std::size_t i = 0; i < n; ++i) {
    for (int j = 0; j < a.inputs; ++j) in_v[j] = hin[j][c.offset + i];
    for (int j = 0; j < a.columns; ++j) vec_v[j] = hvec[j][c.offset + i % std::size_t(c.cols)];
    ref[i] = evaluate(e, in_v, vec_v);
  }
  const lab::Verdict v = lab::compare(std::span<const float>(got).subspan(c.offset), ref, lab::Tolerance::fp32(), "out");
  EXPECT_TRUE(v.pass) << to_string(e) << " at " << c.rows << "x" << c.cols << " offset " << c.offset << ": "
                      << v.details();
}

TEST(JitGpu, MatchesTheDoubleReferenceOnEveryPath) {
  LAB_REQUIRE_GPU();
  const Expr x = Expr::input(0), y = Expr::input(1), bias = Expr::column(0);
  const Expr z = x * 1.5f + 0.5f;
  const std::vector<Expr> exprs = {
      0.5f * z * (1.0f + erf(z * 0.70710678f)) * sigmoid(x) + bias,  // the chapter's chain
      max(tanh(x), y) - exp(-y * y) / (1.0f + x * x) + log(2.0f + sigmoid(y)),
      Expr(2.0f) + x * 0.0f,  // a constant result, read from an input that cancels
  };
  const std::vector<Case> cases = {
      {1, 1, 0},       // one element: scalar tail of the float4 kernel, or the scalar kernel
      {1, 4, 0},       // one float4
      {7, 33, 0},      // cols not a multiple of 4: the scalar kernel
      {256, 64, 0},    // the float4 kernel, column index across quads
      {1000, 1001, 0}, // odd everything
      {300, 128, 1},   // misaligned pointers: the scalar kernel
  };
  for (const Expr& e : exprs)
    for (const Case& c : cases) check(e, c);
}

TEST(JitGpu, LaunchChecksThePointerCounts) {
  LAB_REQUIRE_GPU();
  const Kernel k = Kernel::build(Expr::input(0) + Expr::column(0), Cache::global());
  lab::DeviceBuffer<float> a(16), b(16);
  lab::Stream s;
  EXPECT_THROW(k.launch({a.data()}, {}, b.data(), 16, 4, s), lab::UsageError);
  EXPECT_THROW(k.launch({a.data(), a.data()}, {a.data()}, b.data(), 16, 4, s), lab::UsageError);
  EXPECT_THROW(k.launch({a.data()}, {a.data()}, b.data(), 16, 0, s), lab::UsageError);
}

TEST(JitGpu, TheSecondBuildComesFromTheCache) {
  LAB_REQUIRE_GPU();
  Cache cache{std::filesystem::path()};
  const Expr e = tanh(Expr::input(0)) * 3.0f;
  const Kernel first = Kernel::build(e, cache);
  const Kernel second = Kernel::build(e, cache);
  EXPECT_EQ(cache.compiles(), 1);
  EXPECT_GT(first.binary().compile_ms, 0.0);
  EXPECT_TRUE(second.binary().from_memory);
  EXPECT_EQ(first.binary().arch, device_arch());
}

// The row kernels against a double softmax (and its backward) of the expression, with the causal
// mask as the expression's select: rows longer and shorter than the block, several matrices.
TEST(JitGpu, RowSoftmaxAndItsBackwardMatchTheDoubleReference) {
  LAB_REQUIRE_GPU();
  const float scale = 0.3f;
  const Expr x = Expr::input(0);
  const Expr prologue = select(Expr::col() > Expr::row(), -INFINITY, x * scale);
  const Expr epilogue = select(Expr::col() > Expr::row(), 0.0f, x * scale);
  const RowKernel fwd = RowKernel::build(RowOp::softmax, prologue, Cache::global(), "test_rows");
  const RowKernel bwd = RowKernel::build(RowOp::softmax_backward, epilogue, Cache::global(), "test_rows");
  lab::Rng rng(lab::testing::run_seed());
  for (const int cols : {1, 7, 300, 1000}) {
    const int per_matrix = cols, matrices = 3;
    const std::size_t rows = std::size_t(per_matrix) * matrices, n = rows * cols;
    lab::DeviceBuffer<float> in(n), p(n), dp(n), ds(n);
    lab::Stream s;  // non-blocking: fills and poison on it, in order with the kernels
    rng.uniform(in, -4.f, 4.f, s);
    rng.uniform(dp, -1.f, 1.f, s);
    lab::poison(p, s);
    lab::poison(ds, s);
    fwd.launch(in.data(), nullptr, p.data(), rows, cols, per_matrix, s);
    bwd.launch(p.data(), dp.data(), ds.data(), rows, cols, per_matrix, s);
    s.sync();
    const auto hin = in.download(), hp = p.download(), hdp = dp.download();
    std::vector<double> ref_p(n), ref_ds(n);
    for (std::size_t r = 0; r < rows; ++r) {
      const double row = double(r % per_matrix);
      double m = -INFINITY, l = 0, dot = 0;
      std::vector<double> v(cols);
      for (int j = 0; j < cols; ++j) m = std::max(m, v[j] = evaluate(prologue, {hin[r * cols + j]}, {}, row, j));
      for (int j = 0; j < cols; ++j) l += std::exp(v[j] - m);
      for (int j = 0; j < cols; ++j) ref_p[r * cols + j] = std::exp(v[j] - m) / l;
      // The backward of the kernel's own P (its input), so the two checks are independent.
      for (int j = 0; j < cols; ++j) dot += double(hp[r * cols + j]) * hdp[r * cols + j];
      for (int j = 0; j < cols; ++j)
        ref_ds[r * cols + j] = evaluate(epilogue, {hp[r * cols + j] * (hdp[r * cols + j] - dot)}, {}, row, j);
    }
    const lab::Verdict vp = lab::compare(hp, ref_p, lab::Tolerance::fp32(), "P", {(long)rows, cols});
    EXPECT_TRUE(vp.pass) << cols << ": " << vp.details();
    if (cols > 1) {  // one column: the gradient is identically zero
      const lab::Verdict vd = lab::compare(ds.download(), ref_ds, lab::Tolerance::fp32(), "dS", {(long)rows, cols});
      EXPECT_TRUE(vd.pass) << cols << ": " << vd.details();
    }
  }
  lab::DeviceBuffer<float> a(16);
  lab::Stream s;
  EXPECT_THROW(fwd.launch(a.data(), a.data(), a.data(), 4, 4, 4, s), lab::UsageError);  // softmax takes one input
  EXPECT_THROW(bwd.launch(a.data(), nullptr, a.data(), 4, 4, 4, s), lab::UsageError);
}

}  // namespace
