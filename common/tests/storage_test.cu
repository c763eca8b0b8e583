// lab::StorageOf's rounding constants against every value of each 16-bit storage (CPU only): a
// rounding to the nearest bf16 or fp16 errs by at most kRounding |v| + kFloor, and by that much
// somewhere (the bound is the rounding's own, not a loose one). The worst case of a rounding is the
// midpoint between two neighbours; each is exact in fp32 (12 significant bits at most), so the test
// rounds every midpoint with the library's own conversion (lab::from_f32) and measures the error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "lab/storage.hpp"

namespace {

// Every finite non-negative value of T in increasing order, as floats (16-bit patterns 0x0000 up
// to the largest finite one: increasing for non-negative IEEE-style values).
template <class T>
std::vector<float> finite_values() {
  std::vector<float> out;
  for (std::uint32_t bits = 0; bits < 0x8000u; ++bits) {
    std::conditional_t<std::is_same_v<T, __half>, __half_raw, __nv_bfloat16_raw> raw;
    raw.x = static_cast<unsigned short>(bits);
    const float v = lab::to_f32(T(raw));
    if (!std::isfinite(v)) break;
    out.push_back(v);
  }
  return out;
}

struct Worst {
  double share = 0;    // the largest error / bound over the midpoints considered
  bool exceeded = false;
};

// The midpoints between neighbours of T at or above `from` (and their negatives), each rounded to T:
// the error against kRounding |v| + kFloor.
template <class T>
Worst midpoints(float from) {
  using S = lab::StorageOf<T>;
  const std::vector<float> v = finite_values<T>();
  Worst w;
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    if (v[i] < from) continue;
    for (const float sign : {1.f, -1.f}) {
      const float mid = sign * (0.5f * v[i] + 0.5f * v[i + 1]);  // exact: T's neighbours differ in one ulp
      const double err = std::fabs(double(lab::to_f32(lab::from_f32<T>(mid))) - double(mid));
      const double bound = S::kRounding * std::fabs(double(mid)) + S::kFloor;
      w.share = std::max(w.share, err / bound);
      w.exceeded = w.exceeded || err > bound;
    }
  }
  return w;
}

TEST(StorageRounding, Fp16EveryMidpointIsHeldAndTheBoundIsReached) {
  // From the smallest subnormal up: the floor holds the subnormals (steps of 2^-24), the relative
  // 2^-11 the normal range.
  const Worst all = midpoints<__half>(0.f);
  EXPECT_FALSE(all.exceeded) << "a rounding to fp16 beyond kRounding |v| + kFloor";
  EXPECT_GT(all.share, 0.999);
  // Without the floor the subnormals' rounding is not held: kFloor is needed.
  using S = lab::StorageOf<__half>;
  const float sub = 0x1p-24f * 1.5f;  // between the two smallest subnormals
  EXPECT_GT(std::fabs(lab::to_f32(lab::from_f32<__half>(sub)) - sub), S::kRounding * sub);
  // The normal range alone reaches the relative bound (at the bottom of each binade).
  EXPECT_GT(midpoints<__half>(0x1p-14f).share, 0.999);
}

TEST(StorageRounding, Bf16EveryMidpointInTheNormalRangeIsHeld) {
  // bf16's subnormals lie below 2^-126, where no topic's output falls: kFloor is 0 for bf16, and
  // the normal range is held by 2^-8 relative, reached at the bottom of each binade.
  const Worst normal = midpoints<__nv_bfloat16>(0x1p-126f);
  EXPECT_FALSE(normal.exceeded) << "a rounding to bf16 beyond 2^-8 of the value";
  EXPECT_GT(normal.share, 0.99);
}

TEST(StorageRounding, RoundedToleranceAddsTheRoundingAndTheFloor) {
  const lab::Tolerance base = lab::Tolerance::fp32();
  const lab::Tolerance h = lab::StorageOf<__half>::rounded(base, "h");
  EXPECT_EQ(h.rtol, base.rtol + 0x1p-11);
  EXPECT_EQ(h.max_rel_l2, base.max_rel_l2 + 0x1p-11);
  EXPECT_EQ(h.atol, base.atol + 0x1p-25);
  const lab::Tolerance b = lab::StorageOf<__nv_bfloat16>::rounded(base, "b");
  EXPECT_EQ(b.rtol, base.rtol + 0x1p-8);
  EXPECT_EQ(b.atol, base.atol);
  const lab::Tolerance f = lab::StorageOf<float>::rounded(base, "f");
  EXPECT_EQ(f.rtol, base.rtol);
  EXPECT_EQ(f.atol, base.atol);
  EXPECT_STREQ(lab::StorageOf<__half>::pick("a", "b", "c"), "c");
  EXPECT_STREQ(lab::StorageOf<__nv_bfloat16>::pick("a", "b", "c"), "b");
  EXPECT_STREQ(lab::StorageOf<float>::pick("a", "b", "c"), "a");
}

}  // namespace
