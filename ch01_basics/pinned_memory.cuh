// The problem behind the pinned-memory lesson: copy a buffer from the host to the device and back.
// The GPU's copy engines move data by DMA, which needs host memory the operating system cannot
// page out. Memory from malloc/new (pageable) must first be copied by the CPU into a pinned
// staging buffer the driver owns, a chunk at a time; memory from cudaMallocHost is pinned already,
// so the copy engine reads it directly at the full speed of the bus.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "lab/lab.hpp"

struct PinnedMemory {
  static constexpr const char* name = "pinned_memory";
  static constexpr int chapter = 1;
  static std::vector<std::string> dims() { return {"floats"}; }
  // 16 MiB, 256 MiB, 1 GiB.
  static std::vector<lab::Shape> sweep() { return {{4194304}, {67108864}, {268435456}}; }
  // One float; a size that is no multiple of a page or of the copy engines' chunk; one page and one.
  static std::vector<lab::Shape> checks() { return {{1}, {1000003}, {1025}, {4194305}}; }
  // Bytes over the bus: host to device, then device to host.
  static lab::Work work(const lab::Shape& s) { return {.bytes = 2.0 * s[0] * sizeof(float)}; }
  static std::string validate(const lab::Shape& s) {
    return s[0] > (std::int64_t{1} << 32) ? "at most 4294967296 floats (16 GiB)" : "";
  }

  struct Problem : lab::Problem {
    std::size_t n;
    std::vector<float> pageable_in, pageable_out;
    lab::PinnedBuffer<float> pinned_in, pinned_out;
    lab::DeviceBuffer<float> dev;

    Problem(const lab::Shape& s, lab::Rng& rng)
        : n(static_cast<std::size_t>(s[0])), pageable_in(n), pageable_out(n), pinned_in(n), pinned_out(n), dev(n) {
      rng.uniform(std::span<float>(pageable_in));
      std::copy(pageable_in.begin(), pageable_in.end(), pinned_in.data());
    }
    void poison(cudaStream_t s) override {
      lab::poison(dev, s);
      std::fill(pageable_out.begin(), pageable_out.end(), std::numeric_limits<float>::quiet_NaN());
      std::fill(pinned_out.data(), pinned_out.data() + n, std::numeric_limits<float>::quiet_NaN());
    }
    // The host memory the variant copies from and into: it declares which (.writes = {"pinned"} or
    // {"pageable"}); null when it declared neither.
    bool pinned() const { return declared().writes_output("pinned"); }
    bool declared_host_memory() const { return pinned() || declared().writes_output("pageable"); }
    const float* src() const { return pinned() ? pinned_in.data() : pageable_in.data(); }
    float* dst() { return pinned() ? pinned_out.data() : pageable_out.data(); }
    lab::Verdict verify() override {
      const std::vector<double> ref(pageable_in.begin(), pageable_in.end());
      if (!declared_host_memory()) {
        lab::Verdict v;
        v.reason = "the variant did not declare the host memory it copies into (.writes = {\"pinned\"} or {\"pageable\"})";
        return v;
      }
      return lab::compare(std::span<const float>(dst(), n), ref, lab::Tolerance::exact(), "host copy");
    }
    // Each direction alone, on the host memory the variant used.
    std::vector<std::pair<std::string, double>> counters(double, cudaStream_t s) override {
      if (!declared_host_memory()) return {};
      lab::Event a, b;
      const double bytes = static_cast<double>(n * sizeof(float));
      const float h2d = lab::time_once_ms([&] { LAB_CHECK(cudaMemcpyAsync(dev.data(), src(), n * sizeof(float), cudaMemcpyHostToDevice, s)); }, s, a, b);
      const float d2h = lab::time_once_ms([&] { LAB_CHECK(cudaMemcpyAsync(dst(), dev.data(), n * sizeof(float), cudaMemcpyDeviceToHost, s)); }, s, a, b);
      return {{"H2D_GB/s", bytes / (h2d * 1e-3) / 1e9}, {"D2H_GB/s", bytes / (d2h * 1e-3) / 1e9}};
    }
  };
};
