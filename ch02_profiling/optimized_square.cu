// Optimized square: x * x, one FMUL. Each element costs 8 bytes of memory traffic, so one might
// expect every version to run at the memory's speed; on an H100 the hundred-odd instructions of
// powf do not hide behind the loads, and the multiply is the only one of the three that runs at
// the copy rate (all three access memory alike, with 16-byte loads and stores: lab::map_vec4).
// Compare the times, then the SASS (`make square_sass`).
// Run: make ch02 && ./ch02_profiling/optimized_square
#include "lab/elementwise.cuh"
#include "square.cuh"

namespace {
struct Mul {
  __device__ float operator()(float v) const { return v * v; }
};
}  // namespace

LAB_VARIANT(Square, optimized, "x * x: one multiply") {
  lab::map_vec4<<<lab::vec4_blocks(p.n), lab::kMapThreads, 0, stream>>>(Mul{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
