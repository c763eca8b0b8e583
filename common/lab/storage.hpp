// The type a topic's tensors are stored in. A variant file whose kernels are the same for fp32 and
// 16-bit tensors (the arithmetic fp32 in registers either way) says so on a line of its own,
//   // lab-storage: bf16 fp16
// and cmake/Lab.cmake compiles it once more for each storage named: as itself, and with
// LAB_STORAGE_BF16 (LAB_STORAGE_FP16) as its storage twin, the program <name>_bf16 (<name>_fp16;
// LAB_STORAGE_SUFFIX, lab/registry.hpp, which the registration appends to the program's name). The
// file names its topic for the storage it is compiled for, through lab::Stored (a topic templated
// on its storage: `using LayerNorm = LayerNormOf<lab::Stored>;`), so `diff` of a pair shows one
// lesson for every storage and no kernel exists twice in the sources.
//
// Nothing with external linkage may depend on lab::Stored (an inline function or variable would
// differ between the objects of one file, which the chapter's test binary links together): it is
// an alias, and the suffix a macro.
#pragma once

#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "lab/elementwise.cuh"
#include "lab/verify.hpp"

namespace lab {

#if defined(LAB_STORAGE_BF16) && defined(LAB_STORAGE_FP16)
#error "a storage twin is bf16 or fp16, not both"
#elif defined(LAB_STORAGE_BF16)
using Stored = __nv_bfloat16;
#elif defined(LAB_STORAGE_FP16)
using Stored = __half;
#else
using Stored = float;
#endif

// A file named for bf16 (optimized_gelu_bf16.cu: a lesson of 16-bit storage, with kernels of its own)
// names its tensors lab::Stored16: bf16, or fp16 in its fp16 twin, which the line
//   // lab-storage: fp16
// makes (the program optimized_gelu_fp16: lab::storage_twin_name, lab/registry.hpp).
#if defined(LAB_STORAGE_FP16)
using Stored16 = __half;
#else
using Stored16 = __nv_bfloat16;
#endif

// What a storage type changes in a topic: its bytes, its name, and the check's bound, which for a
// 16-bit storage adds the output's one rounding to the arithmetic's own: to the nearest bf16 (8
// significant bits) errs by at most 2^-8 of the value; to the nearest fp16 (11 bits) by 2^-11 of it
// in fp16's normal range, and below it (|v| < 2^-14, the subnormals, spaced 2^-24) by at most 2^-25
// absolutely: kFloor. (bf16's subnormals lie below 2^-126, where no topic's output falls.)
template <class T>
struct StorageOf {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                "fp32, bf16 or fp16 storage");
  static constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  static constexpr bool fp16 = std::is_same_v<T, __half>;
  static constexpr double kRounding = bf16 ? 0x1p-8 : fp16 ? 0x1p-11 : 0.0;  // relative, of one rounding to T
  static constexpr double kFloor = fp16 ? 0x1p-25 : 0.0;                     // absolute, below T's normal range
  // The name of a topic on this storage, from its three spellings (a constant: a topic's name is).
  static constexpr const char* pick(const char* f32, const char* b16, const char* f16) {
    return bf16 ? b16 : fp16 ? f16 : f32;
  }
  // "fp32 arithmetic, <T> output": a tolerance's name for a topic's outputs in T.
  static constexpr const char* kArithmeticNote =
      pick("fp32 arithmetic", "fp32 arithmetic, bf16 output", "fp32 arithmetic, fp16 output");
  // base (the arithmetic's bound), with the output's rounding to T on top. A check with a slack
  // vector adds kFloor to each element's slack too, so that the whole-output bound holds it (an
  // output mostly below fp16's normal range: a gradient divided by many rows); one without, check().
  static Tolerance rounded(Tolerance base, const char* name) {
    if constexpr (std::is_same_v<T, float>) return base;
    return {base.atol + kFloor, base.rtol + kRounding, base.max_rel_l2 + kRounding, name};
  }
  // The bound of a topic whose outputs are fp32 arithmetic stored to T: fp32's, rounded to T.
  static Tolerance fp32_rounded() { return rounded(Tolerance::fp32(), kArithmeticNote); }
  // The check of outputs stored as T whose reference has no slack of its own (an elementwise map):
  // got against ref under tol, with kFloor in the whole output's bound as well as in each element's.
  // Below fp16's normal range a rounding errs by up to 2^-25 absolutely, which no relative bound
  // holds: an output of one element at gelu(-5) = -1.4e-6 is rounded by up to 2% of itself (on the
  // H200, session 58, the relative L2 bound alone rejected correct kernels so). compare() adds the
  // slack vector to the whole-output bound (||slack||_2 = sqrt(n) kFloor) and to each element's
  // (where fp32's atol holds it already). A topic whose reference computes a slack adds kFloor to it.
  static Verdict check(std::span<const float> got, std::span<const double> ref, Tolerance tol, std::string what) {
    const std::vector<double> floor(kFloor > 0 ? ref.size() : 0, kFloor);
    return compare(got, ref, tol, std::move(what), {}, floor);
  }
  static std::vector<float> to_float(const std::vector<T>& v) {
    std::vector<float> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = to_f32(v[i]);
    return out;
  }
};

}  // namespace lab
