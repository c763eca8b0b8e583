// The type a topic's tensors are stored in. A variant file whose kernels are the same for fp32 and
// bf16 tensors (the arithmetic fp32 in registers either way) says so on a line of its own,
//   // lab-storage: bf16
// and cmake/Lab.cmake compiles it twice: as itself, and with LAB_STORAGE_BF16 as its storage twin,
// the program <name>_bf16 (LAB_STORAGE_SUFFIX, lab/registry.hpp, which the registration appends
// to the program's name). The file names its topic for the storage it is compiled for, through lab::Stored (a topic
// templated on its storage: `using LayerNorm = LayerNormOf<lab::Stored>;`), so `diff` of a pair
// shows one lesson for both storages and no kernel exists twice in the sources.
//
// Nothing with external linkage may depend on lab::Stored (an inline function or variable would
// differ between the two objects of one file, which the chapter's test binary links together):
// it is an alias, and the suffix a macro.
#pragma once

#include <limits>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>

#include "lab/elementwise.cuh"
#include "lab/verify.hpp"

namespace lab {

#if defined(LAB_STORAGE_BF16)
using Stored = __nv_bfloat16;
#else
using Stored = float;
#endif

// What a storage type changes in a topic: its bytes, and the check's bound, which for bf16 adds
// the output's one rounding to the nearest bf16 (8 significant bits: at most 2^-8 of the value)
// to the arithmetic's own.
template <class T>
struct StorageOf {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16>, "fp32 or bf16 storage");
  static constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  static constexpr double kRounding = bf16 ? 0x1p-8 : 0.0;  // relative, of one rounding to T
  // base (the arithmetic's bound), with the output's rounding to T on top.
  static Tolerance rounded(Tolerance base, const char* name) {
    if constexpr (!bf16) return base;
    return {base.atol, base.rtol + kRounding, base.max_rel_l2 + kRounding, name};
  }
  static std::vector<float> to_float(const std::vector<T>& v) {
    std::vector<float> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = to_f32(v[i]);
    return out;
  }
};

}  // namespace lab
