// Demo: five ways to time the same kernel, side by side, and why they disagree.
//   1. events around the very first launch   - includes loading the module onto the GPU
//   2. host clock, no synchronization         - measures only the launch call: the GPU runs later
//   3. host clock, synchronized               - kernel plus launch and synchronization latency
//   4. events after warm-up, one launch       - the kernel, but one sample, with a warm L2
//   5. median of many, cache flushed          - what every lab program reports
// It is not a baseline/optimized pair: compare lists it, and you run it directly.
// Run: make ch02 && ./ch02_profiling/demo_timing_pitfalls
// ctest-args: --floats 1048576 --samples 5
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "lab/demo.hpp"
#include "lab/device.hpp"
#include "lab/lab.hpp"
#include "lab/stats.hpp"

namespace {

__global__ void scale(const float* __restrict__ x, float* __restrict__ y, std::size_t n, float a) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    y[i] = a * x[i];
}

double host_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr const char* kDescription = "five ways to time one kernel, side by side (a demo, not a pair)";

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = std::int64_t{1} << 26;
  int samples = 50;
  auto options = [&](CLI::App& app) {
    app.add_option("--floats", n, "elements the kernel reads and writes (default 67108864)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 32));
    app.add_option("--samples", samples, "launches for the median (default 50)")->check(CLI::Range(3, 100000));
  };
  return lab::demo_main(argc, argv, {"demo_timing_pitfalls", "timing_pitfalls", kDescription, 2}, options, [&] {
    const lab::DeviceFacts dev = lab::init_device();
    std::cout << dev.describe() << "\n";
    const std::size_t count = static_cast<std::size_t>(n);
    lab::DeviceBuffer<float> x(count), y(count);
    lab::Rng(1).uniform(x);
    lab::Stream s;
    lab::Event a, b;
    lab::L2Flusher flusher(dev.l2_bytes, dev.sms);
    LAB_CHECK(cudaDeviceSynchronize());
    const dim3 grid(dev.sms * 8), block(256);
    auto launch = [&] {
      scale<<<grid, block, 0, s>>>(x.data(), y.data(), count, 2.f);
      LAB_CHECK_LAUNCH();
    };

    // 1. The very first launch of this kernel: lazy module loading happens inside it.
    const double first = lab::time_once_ms(launch, s, a, b) * 1e-3;
    // 2. Host clock around the launch call only.
    double t0 = host_seconds();
    launch();
    const double no_sync = host_seconds() - t0;
    s.sync();
    // 3. Host clock around launch and synchronize.
    t0 = host_seconds();
    launch();
    s.sync();
    const double with_sync = host_seconds() - t0;
    // 4. Events, one launch, after the warm-up above (the L2 still holds what the last run touched).
    const double one_event = lab::time_once_ms(launch, s, a, b) * 1e-3;
    // 5. The lab's way: the median of many event-timed launches, each after an L2 flush.
    std::vector<double> t = lab::flushed_samples_ms(launch, s, &flusher, samples, /*warmup=*/0);
    for (double& x : t) x *= 1e-3;
    const double median = lab::stats::median(t);
    const double cv = lab::stats::cv(t);

    const double bytes = 2.0 * count * sizeof(float);
    struct Line {
      const char* method;
      double seconds;
      const char* why;
    };
    const Line lines[] = {
        {"events around the first launch", first, "includes loading the kernel's module onto the GPU (lazy loading)"},
        {"host clock, no sync", no_sync, "times only the launch call: the kernel has not run yet"},
        {"host clock, synchronized", with_sync, "adds launch and synchronization latency to the kernel"},
        {"events after warm-up, one launch", one_event, "the kernel alone, but one sample and a warm L2"},
        {"median of many, L2 flushed", median, "the lab's method: GPU time, cold cache, robust to outliers"},
    };
    std::printf("\nscale kernel, %zu floats (%.0f MB read + written), %d samples for the median (cv %.2f%%)\n\n",
                count, bytes / 1e6, samples, 100 * cv);
    std::printf("%-34s %12s %10s %9s  %s\n", "method", "time", "GB/s", "vs lab", "why");
    for (const auto& l : lines)
      std::printf("%-34s %9.2f us %10.0f %8.2fx  %s\n", l.method, l.seconds * 1e6, bytes / l.seconds / 1e9,
                  l.seconds / median, l.why);
    return lab::kExitOk;
  });
}
