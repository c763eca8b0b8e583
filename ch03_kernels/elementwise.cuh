// The two ways this chapter's element-wise kernels read memory, shared by every activation topic
// (the function applied lives with the topic; the access pattern is what a variant chooses):
//   map_scalar: one thread per element, 4-byte loads (the first kernel everyone writes);
//   map_vec4:   16-byte loads and stores, four elements a thread, grid-stride, the tail one by one.
// Unary: y = f(x). Binary (backward passes): dx = f(x, dy). Both are lab/elementwise.cuh's; this
// header adds the flat topics' shapes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lab/elementwise.cuh"
#include "lab/registry.hpp"

namespace ew {

// The shapes of every topic over one flat array (the activations, the MSE): one dimension, a size
// that fits the L2 and one far beyond it; awkward sizes: one element, fewer than a float4, a
// float4 and one, a large odd count.
struct FlatShapes {
  static constexpr int chapter = 3;
  static std::vector<std::string> dims() { return {"elements"}; }
  static std::vector<lab::Shape> sweep() { return {{16777216}, {268435456}}; }
  static std::vector<lab::Shape> checks() { return {{1}, {3}, {4097}, {1000003}}; }
  static std::string validate(const lab::Shape& s) {
    return s[0] > (std::int64_t{1} << 32) ? "at most 4294967296 elements" : "";
  }
};

// The maps themselves live in common (lab/elementwise.cuh), shared with ch02's square.
constexpr int kThreads = lab::kMapThreads;
using lab::Identity;
using lab::map_packs;
using lab::map_scalar;
using lab::map_vec4;
using lab::pack_blocks;
using lab::scalar_blocks;
using lab::vec4_blocks;

}  // namespace ew
