// Grid sizing, written once: how many blocks cover a piece of work. Kernels whose reduction or
// tiling is the lesson size their grids themselves, in the open.
#pragma once

#include <algorithm>
#include <cstddef>

namespace lab {

// ceil(n / d), for d > 0.
constexpr std::size_t ceil_div(std::size_t n, std::size_t d) { return (n + d - 1) / d; }

// Blocks of `threads` threads for `work` items, one item a thread, at least one block and at most
// `cap` (a kernel launched with the cap loops over the rest: a grid-stride loop).
constexpr unsigned grid_for(std::size_t work, unsigned threads, std::size_t cap = std::size_t{1} << 20) {
  return static_cast<unsigned>(std::clamp<std::size_t>(ceil_div(work, threads), 1, cap));
}

}  // namespace lab
