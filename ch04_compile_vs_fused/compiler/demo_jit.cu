// Demo: lab::jit, the chapter's fusion compiler, taken apart. It prints the CUDA source generated
// for the element-wise chain (--show-source; no GPU needed), compiles it with NVRTC to PTX for any
// architecture (--arch compute_90; no GPU needed), and on a GPU measures what the first call of a
// compiled kernel costs: NVRTC's compile, the module load, against one launch of the kernel it
// produced, with the cache cold, warm in memory, and warm on disk. --attention D prints instead the
// two row kernels the compiled attention generates for head size D (causal): the softmax with the
// scale and the mask fused into its reads, and the softmax backward with them fused into its write.
// Run: make ch04 && ./ch04_compile_vs_fused/demo_jit --show-source && ./ch04_compile_vs_fused/demo_jit
// ctest-args: --show-source
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "attention/attention.cuh"
#include "compiler/elementwise_chain.cuh"
#include "lab/demo.hpp"
#include "lab/device.hpp"
#include "lab/jit.hpp"
#include "lab/stats.hpp"

namespace {

constexpr const char* kDescription =
    "lab::jit taken apart: the generated source, NVRTC's compile, and what the first call costs";

int run(bool show_source, const std::string& arch, std::int64_t elements, int attention_d) {
  if (attention_d) {
    const float scale = 1.0f / std::sqrt(float(attention_d));
    std::cout << lab::jit::generate_row(lab::jit::RowOp::softmax, attn::compiled_prologue(scale, true), "attention")
              << "\n"
              << lab::jit::generate_row(lab::jit::RowOp::softmax_backward, attn::compiled_epilogue(scale, true),
                                        "attention");
    return lab::kExitOk;
  }
  const lab::jit::Expr e = ElementwiseChain::expression();
  const std::string source = lab::jit::generate(e, "elementwise_chain");
  if (show_source) {
    std::cout << source;
    return lab::kExitOk;
  }
  if (!arch.empty()) {
    const lab::jit::Binary b = lab::jit::compile(source, arch);
    std::cout << "compiled " << lab::jit::to_string(e) << "\nfor " << arch << " with NVRTC " << lab::jit::nvrtc_version()
              << ": " << b.image.size() << " bytes of " << (arch.rfind("sm_", 0) == 0 ? "cubin" : "PTX") << " in "
              << b.compile_ms << " ms" << (b.log.empty() ? "" : "\nNVRTC log:\n" + b.log) << "\n";
    return lab::kExitOk;
  }

  const lab::DeviceFacts dev = lab::init_device();
  std::cout << dev.describe() << "\n\nexpression: " << lab::jit::to_string(e) << "\n\n";
  // Cold: a cache of its own, in memory only, so NVRTC runs.
  lab::jit::Cache cold{std::filesystem::path()};
  const lab::jit::Kernel first = lab::jit::Kernel::build(e, cold, "elementwise_chain");
  const lab::jit::Kernel again = lab::jit::Kernel::build(e, cold, "elementwise_chain");
  // The disk: a cache in a fresh folder, written once, then read by a second cache as a new
  // program would.
  const auto dir = std::filesystem::temp_directory_path() / ("lab_demo_jit_" + std::to_string(::getpid()));
  lab::jit::Cache writer(dir);
  (void)lab::jit::Kernel::build(e, writer, "elementwise_chain");
  lab::jit::Cache reader(dir);
  const auto t0 = std::chrono::steady_clock::now();
  const lab::jit::Kernel from_disk = lab::jit::Kernel::build(e, reader, "elementwise_chain");
  const double disk_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::filesystem::remove_all(dir);

  // One launch of the kernel at the size asked, for scale.
  const auto n = static_cast<std::size_t>(elements);
  const int cols = 4096;
  lab::DeviceBuffer<float> x(n), c(cols), y(n);
  lab::Rng rng(1);
  rng.uniform(x, -3.f, 3.f);
  rng.uniform(c, -1.f, 1.f);
  lab::Stream s;
  lab::L2Flusher flusher(dev.l2_bytes, dev.sms);
  const double run_ms = lab::stats::median(
      lab::flushed_samples_ms([&] { first.launch({x.data()}, {c.data()}, y.data(), n, cols, s); }, s, &flusher, 20));

  std::printf("%-44s %12s\n", "step", "ms");
  std::printf("%-44s %12.2f\n", "NVRTC compile (cold cache)", first.binary().compile_ms);
  std::printf("%-44s %12.3f\n", "module load (driver API)", first.load_ms());
  std::printf("%-44s %12.3f\n", "build again, binary from the memory cache", again.binary().compile_ms + again.load_ms());
  std::printf("%-44s %12.3f\n", "build in a new cache, binary from disk", disk_ms);
  std::printf("%-44s %12.3f\n", ("one launch, " + std::to_string(n) + " elements").c_str(), run_ms);
  std::printf("\nThe first call pays %.0f launches' worth of compile; a program that runs the kernel fewer times\n"
              "than that loses to eager mode on a cold cache, and every later process reads the disk cache.\n",
              first.binary().compile_ms / run_ms);
  return lab::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  bool show_source = false;
  std::string arch;
  std::int64_t elements = std::int64_t{1} << 26;
  int attention_d = 0;
  return lab::demo_main(
      argc, argv, {"demo_jit", "elementwise_chain", kDescription, 4},
      [&](CLI::App& app) {
        app.add_flag("--show-source", show_source, "print the CUDA source lab::jit generates for the chain and exit (no GPU)");
        app.add_option("--arch", arch, "compile the chain with NVRTC for this architecture (sm_90: cubin, compute_90: PTX) "
                                       "and print the size and time (no GPU)");
        app.add_option("--elements", elements, "elements for the launch the compile is measured against (default 2^26)")
            ->check(CLI::Range(std::int64_t{4096}, std::int64_t{1} << 32));
        app.add_option("--attention", attention_d,
                       "print the compiled attention's row kernels (causal softmax and its backward) for head size D "
                       "and exit (no GPU)")
            ->check(CLI::IsMember({16, 32, 64, 128}));
      },
      [&] { return run(show_source, arch, elements, attention_d); });
}
