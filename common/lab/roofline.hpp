// The roofline model: a kernel at arithmetic intensity I (FLOP per byte of memory traffic) can run
// no faster than min(compute peak, I x memory bandwidth). The ridge point, peak / bandwidth, splits
// memory-bound kernels (left of it: bytes set the pace) from compute-bound ones (right of it).
// The ceilings are measured on the GPU at hand (ch02_profiling/demo_roofline); this part is
// arithmetic only, so it is tested without a GPU.
#pragma once

#include <string>
#include <vector>

namespace lab::roofline {

struct Ceilings {
  double copy_gbs = 0;     // device-to-device copy bandwidth (read + write), measured
  double fp32_tflops = 0;  // FP32 FMA peak, measured with a kernel: the roof of FP32 kernels
  double sgemm_tflops = 0, tf32_tflops = 0, bf16_tflops = 0;  // cuBLAS GEMM rates (0: not measured)
};

// FLOP per byte where a compute ceiling meets the bandwidth slope.
double ridge(double tflops, double gbs);

struct Point {
  std::string name, source;  // source: "built-in" or the compare JSON's file name
  double gbs = 0, tflops = 0;
  double intensity = 0;  // FLOP per byte (0: a kernel that only moves data)
  std::string bound;     // "memory" or "compute", against the FP32 roof
  double roof_tflops = 0;  // the roof above the point (memory-bound kernels with no FLOPs: 0)
  double percent = 0;      // of the roof: achieved bandwidth over copy bandwidth when memory-bound,
                           // achieved TFLOP/s over the FP32 peak when compute-bound
};

// From the work and the time taken.
Point place(const std::string& name, const std::string& source, double bytes, double flops, double seconds,
            const Ceilings& c);
// From achieved rates (a compare run's GB/s and TFLOP/s counters).
Point place_rates(const std::string& name, const std::string& source, double gbs, double tflops, const Ceilings& c);

// Every program and shape of a compare --json run that has a GB/s counter, placed. Throws
// std::runtime_error naming the problem when the text is not a compare run.
std::vector<Point> from_compare_json(const std::string& text, const std::string& source, const Ceilings& c);

std::string table(const Ceilings& c, const std::vector<Point>& points);
std::string csv(const std::vector<Point>& points);
// Ceilings, ridge points and points as JSON, for tools/plot_roofline.py.
std::string to_json(const Ceilings& c, const std::vector<Point>& points, const std::string& device);

}  // namespace lab::roofline
