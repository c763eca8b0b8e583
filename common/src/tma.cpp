#include "lab/tma.hpp"

#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "lab/check.hpp"

namespace lab::tma {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    LAB_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || p == nullptr)
      throw Error("lab::tma: the driver has no cuTensorMapEncodeTiled (it needs a CUDA 12 driver or later)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

std::string list(const std::vector<std::uint64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}

CUtensorMap map_swizzle128(CUtensorMapDataType type, const char* type_name, const void* base,
                           std::initializer_list<std::uint64_t> dims, std::initializer_list<std::uint64_t> strides_bytes,
                           std::initializer_list<std::uint32_t> box) {
  const std::vector<std::uint64_t> d(dims), s(strides_bytes);
  std::vector<std::uint32_t> b(box), element_strides(d.size(), 1);
  if (d.empty() || d.size() > 5 || s.size() + 1 != d.size() || b.size() != d.size())
    throw Error(std::string("lab::tma: a ") + type_name + " map of rank " + std::to_string(d.size()) + " with " +
                std::to_string(s.size()) + " strides and " + std::to_string(b.size()) + " box sizes");
  CUtensorMap map;
  const CUresult r = encode_tiled()(&map, type, cuuint32_t(d.size()),
                                    const_cast<void*>(base), d.data(), s.data(), b.data(), element_strides.data(),
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::vector<std::uint64_t> bb(b.begin(), b.end());
    throw CudaError("cuTensorMapEncodeTiled refused a " + std::string(type_name) + " map of dims " + list(d) + ", strides " + list(s) +
                        " bytes, box " + list(bb) + " (CUresult " + std::to_string(int(r)) + ")",
                    int(r));
  }
  return map;
}

}  // namespace

CUtensorMap bf16_map_swizzle128(const void* base, std::initializer_list<std::uint64_t> dims,
                                std::initializer_list<std::uint64_t> strides_bytes,
                                std::initializer_list<std::uint32_t> box) {
  return map_swizzle128(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, "bf16", base, dims, strides_bytes, box);
}

CUtensorMap f32_map_swizzle128(const void* base, std::initializer_list<std::uint64_t> dims,
                               std::initializer_list<std::uint64_t> strides_bytes,
                               std::initializer_list<std::uint32_t> box) {
  return map_swizzle128(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, "f32", base, dims, strides_bytes, box);
}

}  // namespace lab::tma
