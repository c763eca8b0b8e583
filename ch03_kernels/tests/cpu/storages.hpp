// What the chapter's CPU checks of its 16-bit topics share: the two storages as a typed test's
// parameters (named bf16 and fp16), a value rounded to one, and how near its bound a correct
// result's worst element comes.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "lab/storage.hpp"

namespace storages {

// v rounded to the storage T (to nearest, even), as a float.
template <class T>
float round_to(float v) {
  return lab::to_f32(lab::from_f32<T>(v));
}

// TYPED_TEST_SUITE(Suite, storages::Both, storages::Name): each test for bf16 and for fp16.
using Both = ::testing::Types<__nv_bfloat16, __half>;
struct Name {
  template <class T>
  static std::string GetName(int) {
    return lab::StorageOf<T>::bf16 ? "bf16" : "fp16";
  }
};

// How near its bound a correct result's worst element comes: the rounding's half-ulp is the bound's
// largest part, less so in fp16. At |v| = 0.1 fp16's rounding (2^-11 |v|, 4.9e-5) is five times the
// fp32 bound's absolute 1e-5, so that an element there comes to at most 0.83 of its bound (bf16's,
// 39 times, to 0.97); only elements of magnitude 1 and more reach 0.9 in fp16.
template <class T>
constexpr double kNear = lab::StorageOf<T>::bf16 ? 0.9 : 0.8;

}  // namespace storages
