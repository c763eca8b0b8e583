// --profile's sorting of a full step's GPU records by kind of work (demo_gpt2_report): matrix
// products, attention, AdamW and the rest, by the kernel's demangled name. Host code only, so that
// a CPU test holds every kernel family to its kind (tests/cpu/work_kinds_test.cpp).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

namespace gpt2::report {

// A kernel's demangled name without "(anonymous namespace)::", its return type and its parameter
// list: "layer_norm_backward_kernel<4, 2, __nv_bfloat16>".
inline std::string short_name(std::string name) {
  constexpr std::string_view anonymous = "(anonymous namespace)::";
  for (std::size_t at; (at = name.find(anonymous)) != std::string::npos;) name.erase(at, anonymous.size());
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  int depth = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    else if (name[i] == '>') --depth;
    else if (name[i] == '(' && depth == 0 && i > 0) return name.substr(0, i);
  }
  while (!name.empty() && name.back() == ' ') name.pop_back();  // CUPTI's "memset "
  return name;
}

// The kind of work of a GPU record, by its (demangled) name: 0 matrix products, 1 attention,
// 2 AdamW, 3 the rest.
//   - products: cuBLAS's and cuBLASLt's kernels (gemm, xmma, nvjet, cutlass, splitk), their
//     epilogues included (bias, GELU), and the lab's own products with an epilogue
//     (fused/gelu_product.cuh's tile_product_kernel, namespace dgelu_product): the GELU arithmetic
//     in their epilogues counts with the product as it does in cuBLASLt's GELU epilogue kernels.
//   - attention: the flash kernels and the attention namespace's (attn::).
inline int kind_of_work(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("flash") || has("attn::")) return 1;
  if (has("gemm") || has("xmma") || has("nvjet") || has("cutlass") || has("cublas") || has("splitk")) return 0;
  if (has("dgelu_product::")) return 0;
  if (has("adamw")) return 2;
  return 3;
}

}  // namespace gpt2::report
