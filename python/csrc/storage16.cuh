// The bridge's 16-bit dispatch, for its .cu files (ops.cpp sees no CUDA types): the kernels written
// once for bf16 and fp16 take the element type T, which the storage names.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "bridge.hpp"

namespace bridge {

// f(std::type_identity<T>{}) for the storage's 16-bit type, T __nv_bfloat16 or __half; f32 throws
// std::invalid_argument naming `what` (the operators reach this with 16-bit tensors only).
template <class F>
void on16(Storage storage, const char* what, F&& f) {
  if (storage == Storage::bf16)
    f(std::type_identity<__nv_bfloat16>{});
  else if (storage == Storage::fp16)
    f(std::type_identity<__half>{});
  else
    throw std::invalid_argument(std::string(what) + " takes bf16 or fp16 tensors");
}

}  // namespace bridge
