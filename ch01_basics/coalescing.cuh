// The problem behind the coalescing lesson: transpose a rows x cols fp32 matrix (out = in^T).
// A transpose does no arithmetic, so its speed is all memory access: each element is read once
// and written once, and the only question is whether a warp's 32 accesses land in a few 128-byte
// segments (coalesced) or in 32 different ones.
#pragma once

#include <climits>
#include <string>
#include <vector>

#include "lab/lab.hpp"

struct Coalescing {
  static constexpr const char* name = "coalescing";
  static constexpr int chapter = 1;
  static std::vector<std::string> dims() { return {"rows", "cols"}; }
  static std::vector<lab::Shape> sweep() { return {{1024, 1024}, {4096, 4096}, {8192, 8192}, {16384, 16384}}; }
  // One element; thin and tall; sizes that are not multiples of the 32x32 tile (odd, prime, off by
  // one); one row, one column; and one large square.
  static std::vector<lab::Shape> checks() {
    return {{1, 1}, {1000, 777}, {31, 4097}, {4097, 31}, {33, 65}, {1, 1000}, {1000, 1}, {2053, 2048}};
  }
  // Read the matrix once, write it once.
  static lab::Work work(const lab::Shape& s) { return {.bytes = 2.0 * s[0] * s[1] * sizeof(float)}; }
  // The kernels tile the matrix in 32x32 blocks on a 2-D grid (at most 65535 tiles down).
  static std::string validate(const lab::Shape& s) {
    if (s[0] > 65535LL * kTile) return "at most " + std::to_string(65535LL * kTile) + " rows";
    if (s[1] > INT_MAX - kTile) return "at most " + std::to_string(INT_MAX - kTile) + " columns";
    return "";
  }

  static constexpr int kTile = 32;     // a tile is 32x32 elements
  static constexpr int kBlockRows = 8; // a block is 32x8 threads: each thread moves 4 elements

  struct Problem : lab::Problem {
    int rows, cols;
    lab::DeviceBuffer<float> in, out;
    Problem(const lab::Shape& s, lab::Rng& rng)
        : rows(static_cast<int>(s[0])), cols(static_cast<int>(s[1])), in(s.elements()), out(s.elements()) {
      rng.uniform(in, -1.f, 1.f);
    }
    dim3 grid() const { return dim3((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile); }
    static dim3 block() { return dim3(kTile, kBlockRows); }

    void poison(cudaStream_t s) override { lab::poison(out, s); }
    lab::Verdict verify() override {
      const std::vector<float> a = in.download(), b = out.download();
      std::vector<double> ref(a.size());
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) ref[static_cast<std::size_t>(c) * rows + r] = a[static_cast<std::size_t>(r) * cols + c];
      return lab::compare(b, ref, lab::Tolerance::exact(), "out", {cols, rows});
    }
  };
};
