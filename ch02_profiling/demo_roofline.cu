// Demo: the roofline of this GPU. It measures the ceilings -- device-to-device copy bandwidth, the
// FP32 FMA peak with a kernel, and cuBLAS's SGEMM and tensor-core (TF32, BF16) GEMM rates -- prints
// the ridge points, and places kernels under the roof: a built-in set (vector add, saxpy, a
// transpose, a reduction, SGEMM) and, with --from-compare, every program of a compare run.
// Arithmetic intensity is each kernel's minimal FLOPs over its minimal bytes (the topics' work
// counts); "% roof" says how close a kernel comes to what this GPU allows at that intensity.
// Every time is the median of 10 runs with the L2 flushed before each, as in every lab program.
// Run: make ch02 && ./ch02_profiling/demo_roofline --json roofline.json && ../tools/plot_roofline.py roofline.json
// ctest-args: --floats 1048576 --gemm 512
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <cub/device/device_reduce.cuh>
#include <cuda_bf16.h>

#include "lab/demo.hpp"
#include "lab/device.hpp"
#include "lab/lab.hpp"
#include "lab/roofline.hpp"
#include "lab/stats.hpp"

namespace {

namespace rl = lab::roofline;

constexpr const char* kDescription =
    "the roofline of this GPU: measured ceilings, ridge points, and kernels placed under the roof";

__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                           std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t n4 = n / 4;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n4; i += stride) {
    const float4 x = reinterpret_cast<const float4*>(a)[i], y = reinterpret_cast<const float4*>(b)[i];
    reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  for (std::size_t i = 4 * n4 + blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) c[i] = a[i] + b[i];
}

__global__ void saxpy(float alpha, const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t n4 = n / 4;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n4; i += stride) {
    const float4 a = reinterpret_cast<const float4*>(x)[i];
    float4 b = reinterpret_cast<float4*>(y)[i];
    b = make_float4(fmaf(alpha, a.x, b.x), fmaf(alpha, a.y, b.y), fmaf(alpha, a.z, b.z), fmaf(alpha, a.w, b.w));
    reinterpret_cast<float4*>(y)[i] = b;
  }
  for (std::size_t i = 4 * n4 + blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    y[i] = fmaf(alpha, x[i], y[i]);
}

__global__ void to_bf16(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = __float2bfloat16(in[i]);
}

// Median of 10 timed runs after 3 warm-up runs, the L2 flushed before each timed one.
struct Timer {
  Timer(lab::Stream& stream, lab::L2Flusher& f) : s(stream), flusher(f) {}
  lab::Stream& s;
  lab::L2Flusher& flusher;
  double seconds(const std::function<void()>& f) {
    return lab::stats::median(lab::flushed_samples_ms(f, s, &flusher, 10)) * 1e-3;
  }
};

struct Gemms {
  double sgemm_s = 0, tf32_s = 0, bf16_s = 0;
};

Gemms time_gemms(int n, lab::Stream& s, Timer& t) {
  const std::size_t nn = std::size_t(n) * n;
  lab::DeviceBuffer<float> a(nn), b(nn), c(nn);
  lab::Rng(11).uniform(a, -1.f, 1.f, s);
  lab::Rng(12).uniform(b, -1.f, 1.f, s);
  lab::CublasHandle h(s);
  const float one = 1.f, zero = 0.f;
  Gemms g;
  LAB_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // FP32 on the CUDA cores, no TF32
  g.sgemm_s = t.seconds([&] {
    LAB_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, b.data(), n, &zero, c.data(), n));
  });
  g.tf32_s = t.seconds([&] {
    LAB_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_32F, n, b.data(), CUDA_R_32F, n,
                           &zero, c.data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
  });
  lab::DeviceBuffer<__nv_bfloat16> ah(nn), bh(nn), ch(nn);
  to_bf16<<<1024, 256, 0, s>>>(a.data(), ah.data(), nn);
  to_bf16<<<1024, 256, 0, s>>>(b.data(), bh.data(), nn);
  LAB_CHECK_LAUNCH();
  g.bf16_s = t.seconds([&] {
    LAB_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, ah.data(), CUDA_R_16BF, n, bh.data(), CUDA_R_16BF,
                           n, &zero, ch.data(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  return g;
}

std::vector<rl::Point> builtin_points(std::size_t n, const Gemms& g, int gemm_n, const rl::Ceilings& c, int sms,
                                      lab::Stream& s, Timer& t) {
  std::vector<rl::Point> pts;
  const double fn = static_cast<double>(n);
  const unsigned blocks = static_cast<unsigned>(sms) * 8;
  {
    lab::DeviceBuffer<float> x(n), y(n), z(n);
    lab::Rng(1).uniform(x, -1.f, 1.f, s);
    lab::Rng(2).uniform(y, -1.f, 1.f, s);
    const double add = t.seconds([&] {
      vector_add<<<blocks, 256, 0, s>>>(x.data(), y.data(), z.data(), n);
      LAB_CHECK_LAUNCH();
    });
    pts.push_back(rl::place("vector add (c = a + b)", "built-in", 12 * fn, fn, add, c));
    const double ax = t.seconds([&] {
      saxpy<<<blocks, 256, 0, s>>>(1.0001f, x.data(), y.data(), n);
      LAB_CHECK_LAUNCH();
    });
    pts.push_back(rl::place("saxpy (y = a x + y)", "built-in", 12 * fn, 2 * fn, ax, c));

    // Reduction: CUB's sum, one read of the array.
    std::size_t temp_bytes = 0;
    LAB_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, x.data(), z.data(), static_cast<long long>(n), s.get()));
    lab::DeviceBuffer<std::uint8_t> temp(temp_bytes ? temp_bytes : 1);
    const double red = t.seconds([&] {
      LAB_CHECK(cub::DeviceReduce::Sum(temp.data(), temp_bytes, x.data(), z.data(), static_cast<long long>(n), s.get()));
    });
    pts.push_back(rl::place("reduction (CUB sum)", "built-in", 4 * fn, fn, red, c));
  }
  {
    // Transpose of a square matrix through cuBLAS geam (C = A^T): a read and a write per element.
    const int side = static_cast<int>(std::sqrt(fn));
    const std::size_t m = std::size_t(side) * side;
    lab::DeviceBuffer<float> a(m), out(m);
    lab::Rng(3).uniform(a, -1.f, 1.f, s);
    lab::CublasHandle h(s);
    const float one = 1.f, zero = 0.f;
    const double tr = t.seconds([&] {
      LAB_CHECK(cublasSgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, side, side, &one, a.data(), side, &zero, out.data(), side,
                            out.data(), side));
    });
    pts.push_back(rl::place("transpose " + std::to_string(side) + "^2 (cuBLAS geam)", "built-in", 8.0 * double(m), 0, tr, c));
  }
  const double gn = gemm_n;
  pts.push_back(rl::place("SGEMM " + std::to_string(gemm_n) + "^3 (cuBLAS, FP32)", "built-in", 12 * gn * gn,
                          2 * gn * gn * gn, g.sgemm_s, c));
  return pts;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw lab::UsageError("--from-compare " + path + ": cannot read it");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t floats = std::int64_t{1} << 28;
  int gemm_n = 8192;
  std::string from_compare, csv_path, json_path;
  bool no_builtin = false;
  auto options = [&](CLI::App& app) {
    app.add_option("--floats", floats, "elements of the built-in memory-bound kernels (default 268435456)")
        ->check(CLI::Range(std::int64_t{1024}, std::int64_t{1} << 31));
    app.add_option("--gemm", gemm_n, "N of the N x N x N GEMMs that measure the compute ceilings (default 8192)")
        ->check(CLI::Range(64, 32768));
    app.add_option("--from-compare", from_compare, "also place every program and shape of this compare --json run");
    app.add_flag("--no-builtin", no_builtin, "place only the compare run's programs, not the built-in kernels");
    app.add_option("--csv", csv_path, "write the placed kernels as CSV")->check(lab::cli::output_file());
    app.add_option("--json", json_path, "write ceilings, ridge points and kernels as JSON (for tools/plot_roofline.py)")
        ->check(lab::cli::output_file());
  };
  return lab::demo_main(argc, argv, {"demo_roofline", "roofline", kDescription, 2}, options, [&] {
    // Every input and output is checked before the GPU work: nothing is measured only to be lost.
    const std::string compare_text = from_compare.empty() ? "" : read_file(from_compare);
    if (no_builtin && from_compare.empty()) throw lab::UsageError("--no-builtin needs --from-compare FILE");
    for (const auto* path : {&csv_path, &json_path})
      if (!path->empty() && !std::ofstream(*path)) throw lab::UsageError(*path + ": cannot create the file");

    const lab::DeviceFacts dev = lab::init_device();
    std::cout << dev.describe() << "\n\nmeasuring the ceilings (medians of 10 runs, L2 flushed before each)...\n"
              << std::flush;
    lab::Stream s;
    lab::L2Flusher flusher(dev.l2_bytes, dev.sms);
    Timer t(s, flusher);
    rl::Ceilings c;
    c.copy_gbs = lab::measure_copy_bandwidth_gbs(std::size_t{1} << 30);
    c.fp32_tflops = lab::measure_fp32_tflops(dev);
    const Gemms g = time_gemms(gemm_n, s, t);
    const double flops = 2.0 * double(gemm_n) * gemm_n * gemm_n;
    c.sgemm_tflops = flops / g.sgemm_s / 1e12;
    c.tf32_tflops = flops / g.tf32_s / 1e12;
    c.bf16_tflops = flops / g.bf16_s / 1e12;

    std::printf("\n%-40s %12s %16s %18s\n", "ceiling", "measured", "datasheet", "ridge (FLOP/byte)");
    std::printf("%-40s %7.0f GB/s %11.0f GB/s %18s\n", "copy, device to device (read + write)", c.copy_gbs,
                dev.datasheet_bandwidth_gbs(), "");
    auto row = [&](const char* name, double tf, double sheet) {
      char ds[32] = "";
      if (sheet > 0) std::snprintf(ds, sizeof ds, "%.1f TFLOP/s", sheet);
      std::printf("%-40s %5.1f TFLOP/s %16s %18.1f\n", name, tf, ds, rl::ridge(tf, c.copy_gbs));
    };
    row("FP32 FMA (a kernel of FMA chains)", c.fp32_tflops, dev.datasheet_fp32_tflops());
    const std::string gemm_name = std::to_string(gemm_n) + "^3";
    row(("cuBLAS SGEMM " + gemm_name + " (FP32, CUDA cores)").c_str(), c.sgemm_tflops, 0);
    row(("cuBLAS GEMM " + gemm_name + " TF32 tensor cores").c_str(), c.tf32_tflops, 0);
    row(("cuBLAS GEMM " + gemm_name + " BF16 tensor cores").c_str(), c.bf16_tflops, 0);
    std::printf("(a kernel left of a ridge point is memory-bound on that unit: bytes, not FLOPs, set its pace)\n");

    std::vector<rl::Point> pts;
    if (!no_builtin) {
      std::cout << "\nplacing the built-in kernels (" << floats << " floats)...\n" << std::flush;
      pts = builtin_points(static_cast<std::size_t>(floats), g, gemm_n, c, dev.sms, s, t);
    }
    if (!compare_text.empty()) {
      std::vector<rl::Point> more;
      try {
        more = rl::from_compare_json(compare_text, from_compare, c);
      } catch (const std::exception& e) {
        throw lab::UsageError("--from-compare " + from_compare + ": " + e.what());
      }
      pts.insert(pts.end(), more.begin(), more.end());
    }
    std::cout << "\nkernels on the FP32 roofline (% roof: of the copy bandwidth when memory-bound, of the FP32 FMA "
                 "peak when compute-bound):\n"
              << rl::table(c, pts);
    if (!csv_path.empty()) std::ofstream(csv_path) << rl::csv(pts);
    if (!json_path.empty()) std::ofstream(json_path) << rl::to_json(c, pts, dev.name);
    for (const auto* path : {&csv_path, &json_path})
      if (!path->empty()) std::cout << "wrote " << *path << "\n";
    return lab::kExitOk;
  });
}
