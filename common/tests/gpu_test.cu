// Tests of the library that need a GPU; each reports SKIPPED without one.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "lab/device.hpp"
#include "lab/lab.hpp"
#include "lab/testing.hpp"
#include "lab/timing.hpp"

namespace {

TEST(Gpu, DeviceFactsAreSane) {
  LAB_REQUIRE_GPU();
  const auto d = lab::init_device();
  EXPECT_GT(d.sms, 0);
  EXPECT_GT(d.l2_bytes, 0u);
  EXPECT_GT(d.global_mem_bytes, 0u);
  EXPECT_EQ(d.uuid.rfind("GPU-", 0), 0u);
  EXPECT_EQ(d.uuid.size(), 40u);
  EXPECT_GT(d.datasheet_bandwidth_gbs(), 100.0);
}

TEST(Gpu, DeviceFillsMatchHostFills) {
  LAB_REQUIRE_GPU();
  const std::size_t n = 100003;
  lab::Rng host(77), dev(77);
  std::vector<float> hu(n), hn(n);
  std::vector<std::int32_t> hi(n);
  host.uniform(std::span<float>(hu), -3.f, 5.f);
  host.normal(std::span<float>(hn), 0.5f, 2.f);
  host.integers(std::span<std::int32_t>(hi), 0, 1000);
  lab::DeviceBuffer<float> du(n), dn(n);
  lab::DeviceBuffer<std::int32_t> di(n);
  dev.uniform(du, -3.f, 5.f);
  dev.normal(dn, 0.5f, 2.f);
  dev.integers(di, 0, 1000);
  LAB_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(du.download(), hu);  // bit for bit
  EXPECT_EQ(di.download(), hi);
  const auto gn = dn.download();
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(gn[i], hn[i], 1e-6f * (1.f + std::fabs(hn[i]))) << i;
}

TEST(Gpu, PoisonMakesEveryElementNaN) {
  LAB_REQUIRE_GPU();
  lab::DeviceBuffer<float> f(1000);
  lab::DeviceBuffer<double> d(1000);
  lab::Rng(1).uniform(f);
  lab::poison(f);
  lab::poison(d);
  for (float x : f.download()) ASSERT_TRUE(std::isnan(x));
  for (double x : d.download()) ASSERT_TRUE(std::isnan(x));
}

TEST(Gpu, OutOfMemoryNamesBytesWantedAndFree) {
  LAB_REQUIRE_GPU();
  const auto d = lab::init_device();
  const std::size_t too_much = 2 * d.global_mem_bytes;
  try {
    lab::DeviceBuffer<std::uint8_t> b(too_much);
    FAIL() << "allocating " << too_much << " bytes succeeded";
  } catch (const lab::OutOfMemory& e) {
    EXPECT_EQ(e.wanted(), too_much);
    EXPECT_GT(e.free_bytes(), 0u);
    EXPECT_EQ(e.exit_code(), lab::kExitOutOfMemory);
    EXPECT_NE(std::string(e.what()).find(std::to_string(too_much)), std::string::npos);
  }
  lab::DeviceBuffer<float> ok(1024);  // the failure left the context usable
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(Gpu, MemoryTrackerCountsPeak) {
  LAB_REQUIRE_GPU();
  lab::reset_device_memory_peak();
  const auto before = lab::device_memory_stats();
  {
    lab::DeviceBuffer<std::uint8_t> a(1 << 20);
    lab::DeviceBuffer<std::uint8_t> b(3 << 20);
  }
  const auto after = lab::device_memory_stats();
  EXPECT_EQ(after.current, before.current);
  EXPECT_EQ(after.peak, before.current + (4u << 20));
}

TEST(Gpu, CheckMacroNamesTheCall) {
  LAB_REQUIRE_GPU();
  try {
    LAB_CHECK(cudaMemcpy(nullptr, nullptr, 16, static_cast<cudaMemcpyKind>(12345)));
    FAIL() << "no throw";
  } catch (const lab::CudaError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("cudaMemcpy"), std::string::npos) << w;
    EXPECT_NE(w.find("gpu_test.cu"), std::string::npos) << w;
  }
}

__global__ void noop() {}

TEST(Gpu, LaunchCheckCatchesBadConfiguration) {
  LAB_REQUIRE_GPU();
  noop<<<1, 4096>>>();  // more threads than a block may have
  EXPECT_THROW(LAB_CHECK_LAUNCH(), lab::CudaError);
  noop<<<1, 32>>>();
  EXPECT_NO_THROW(LAB_CHECK_LAUNCH());
  LAB_CHECK(cudaDeviceSynchronize());
}

__global__ void spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

TEST(Gpu, EventTimingMeasuresGpuTime) {
  LAB_REQUIRE_GPU();
  lab::Stream s;
  lab::Event a, b;
  spin_ns<<<1, 1, 0, s>>>(1000);  // warm-up
  s.sync();
  const float ms = lab::time_once_ms([&] { spin_ns<<<1, 1, 0, s>>>(2'000'000); }, s, a, b);
  EXPECT_GE(ms, 1.9f);
  EXPECT_LT(ms, 50.f);
}

TEST(Gpu, FlusherCoversTwiceTheL2) {
  LAB_REQUIRE_GPU();
  const auto d = lab::init_device();
  lab::L2Flusher f(d.l2_bytes, d.sms);
  EXPECT_GE(f.bytes(), 2 * d.l2_bytes);
  lab::Stream s;
  f.flush(s);
  f.flush(s);
  s.sync();
}

// The sweep report's reference copy moves every 16-byte word of a size that no power of two
// divides beyond 16, and writes nothing past it.
TEST(Gpu, CopyThroughCopiesEveryWordAndNoMore) {
  LAB_REQUIRE_GPU();
  const std::size_t words = 4099, n = words * 4;  // floats: 16 bytes a word
  lab::DeviceBuffer<float> src(n), dst(n + 4);
  lab::Rng(5).uniform(src);
  lab::poison(dst);
  LAB_CHECK(cudaDeviceSynchronize());  // the fills ran on the default stream
  lab::Stream s;
  lab::copy_through(dst.data(), src.data(), words * 16, s);
  s.sync();
  const std::vector<float> a = src.download(), b = dst.download();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], b[i]) << "float " << i;
  for (std::size_t i = n; i < n + 4; ++i) EXPECT_TRUE(std::isnan(b[i])) << "float " << i << " was written";
}

// The sweep report's floor for an operation that reads more than it writes (a loss) or writes more
// than it reads: move_through writes exactly its first `written` bytes, each word the word read at
// its place where one was read, and nothing past them; a read with nothing written runs.
TEST(Gpu, MoveThroughWritesWhatItReadsAndNoMore) {
  LAB_REQUIRE_GPU();
  const std::size_t words = 4099, n = words * 4;  // floats: 16 bytes a word
  lab::DeviceBuffer<float> src(n), dst(n + 4);
  lab::DeviceBuffer<int> sink(1);
  lab::Rng(7).uniform(src);
  LAB_CHECK(cudaDeviceSynchronize());
  const std::vector<float> a = src.download();
  lab::Stream s;
  for (const std::size_t written : {std::size_t{0}, std::size_t{1}, std::size_t{37}, words / 3}) {
    lab::poison(dst, s);
    lab::move_through(dst.data(), written * 16, src.data(), words * 16, sink.data(), s);
    s.sync();
    const std::vector<float> b = dst.download();
    for (std::size_t i = 0; i < n + 4; ++i) {
      if (i < written * 4)
        ASSERT_EQ(a[i], b[i]) << "float " << i << " of " << written << " words written";
      else
        ASSERT_TRUE(std::isnan(b[i])) << "float " << i << " was written (" << written << " words asked)";
    }
  }
  // More written than read: the words past the read ones are written too.
  lab::poison(dst, s);
  lab::move_through(dst.data(), words * 16, src.data(), 5 * 16, sink.data(), s);
  s.sync();
  const std::vector<float> b = dst.download();
  for (std::size_t i = 0; i < 20; ++i) ASSERT_EQ(a[i], b[i]) << "float " << i;
  for (std::size_t i = 20; i < n; ++i) ASSERT_FALSE(std::isnan(b[i])) << "float " << i << " was not written";
  for (std::size_t i = n; i < n + 4; ++i) EXPECT_TRUE(std::isnan(b[i])) << "float " << i << " was written";
}

// A flush evicts what a kernel just wrote: re-reading a buffer of half the L2 is slower right
// after a flush than right after a previous read (when it is still in the L2).
__global__ void read_sum(const float* p, std::size_t n, float* out) {
  float s = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) s += p[i];
  if (s == -1.f) *out = s;
}

TEST(Gpu, FlushMakesTheNextReadCold) {
  LAB_REQUIRE_GPU();
  const auto d = lab::init_device();
  const std::size_t n = d.l2_bytes / 2 / sizeof(float);
  lab::DeviceBuffer<float> buf(n), out(1);
  lab::Rng(3).uniform(buf);
  lab::L2Flusher f(d.l2_bytes, d.sms);
  lab::Stream s;
  lab::Event a, b;
  auto read = [&] { read_sum<<<d.sms * 8, 256, 0, s>>>(buf.data(), n, out.data()); };
  std::vector<double> hot, cold;
  for (int i = 0; i < 20; ++i) {
    read();
    hot.push_back(lab::time_once_ms(read, s, a, b));
    f.flush(s);
    cold.push_back(lab::time_once_ms(read, s, a, b));
  }
  std::sort(hot.begin(), hot.end());
  std::sort(cold.begin(), cold.end());
  EXPECT_GT(cold[10], 1.2 * hot[10]) << "median cold " << cold[10] << " ms, hot " << hot[10] << " ms";
}

TEST(Gpu, MeasuredPeaksStayUnderTheDatasheet) {
  LAB_REQUIRE_GPU();
  const auto d = lab::init_device();
  const double copy = lab::measure_copy_bandwidth_gbs(std::size_t{256} << 20);
  const double fp32 = lab::measure_fp32_tflops(d);
  // A measurement above the datasheet would mean the lab miscounts bytes or FLOPs.
  EXPECT_GT(copy, 0.3 * d.datasheet_bandwidth_gbs());
  EXPECT_LT(copy, 1.05 * d.datasheet_bandwidth_gbs());
  EXPECT_GT(fp32, 0.3 * d.datasheet_fp32_tflops());
  EXPECT_LT(fp32, 1.05 * d.datasheet_fp32_tflops());
}

// A cache holding a contended measurement (written before the plausibility test existed) is measured
// again; what comes back is believable or the datasheet's, never the cached figure.
TEST(Gpu, ImplausibleCachedPeaksAreMeasuredAgain) {
  LAB_REQUIRE_GPU();
  const auto d = lab::init_device();
  const auto dir = std::filesystem::temp_directory_path() / ("lab-peaks-gpu-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  lab::Peaks poisoned;
  poisoned.copy_gbs = 0.9 * d.datasheet_bandwidth_gbs();
  poisoned.fp32_tflops = 0.35 * d.datasheet_fp32_tflops();
  poisoned.measured_at = "2026-11-23T21:33:07Z";
  lab::save_peaks(dir, d.uuid, poisoned);
  ASSERT_TRUE(lab::load_peaks(dir, d.uuid).has_value());
  ::setenv("LAB_CACHE_DIR", dir.c_str(), 1);
  const lab::Peaks p = lab::measured_peaks(d);
  ::unsetenv("LAB_CACHE_DIR");
  EXPECT_FALSE(p.from_cache);
  EXPECT_NE(p.fp32_tflops, poisoned.fp32_tflops);
  const auto cached = lab::load_peaks(dir, d.uuid);
  ASSERT_TRUE(cached.has_value());
  if (p.rejected.empty()) {  // an idle device: the fresh measurement replaced the poisoned one
    EXPECT_EQ(lab::implausible_peaks(d, p), "");
    EXPECT_DOUBLE_EQ(cached->fp32_tflops, p.fp32_tflops);
  } else {  // a busy one (ctest -j): the datasheet's figures, and the cache left as it was
    EXPECT_DOUBLE_EQ(p.fp32_tflops, d.datasheet_fp32_tflops());
    EXPECT_DOUBLE_EQ(cached->fp32_tflops, poisoned.fp32_tflops);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

namespace {

__global__ void lab_test_twice(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.f;
}

TEST(Gpu, ProfilerRecordsKernelsCopiesCallsAndRanges) {
  LAB_REQUIRE_GPU();
  lab::init_device();
  const int n = 1 << 20;
  std::vector<float> h(n, 1.f);
  lab::DeviceBuffer<float> d(n);
  for (int session = 0; session < 2; ++session) {  // a second session after the first works too
    std::vector<lab::prof::Record> rec;
    {
      lab::prof::Session s;
      {
        lab::prof::Range r("work");
        LAB_CHECK(cudaMemcpy(d.data(), h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        lab_test_twice<<<n / 256, 256>>>(d.data(), n);
        LAB_CHECK_LAUNCH();
        LAB_CHECK(cudaMemset(d.data(), 0, 4096));
        LAB_CHECK(cudaDeviceSynchronize());
      }
      rec = s.stop();
    }
    const lab::prof::Record *kernel = nullptr, *copy = nullptr, *set = nullptr, *launch = nullptr, *range = nullptr;
    for (const auto& r : rec) {
      if (r.kind == lab::prof::Kind::kernel && r.name.find("lab_test_twice(float*, int)") != std::string::npos) kernel = &r;
      if (r.kind == lab::prof::Kind::memcpy) copy = &r;
      if (r.kind == lab::prof::Kind::memset) set = &r;
      if (r.kind == lab::prof::Kind::api && r.name == "cudaLaunchKernel") launch = &r;
      if (r.kind == lab::prof::Kind::range && r.name == "work") range = &r;
    }
    ASSERT_NE(kernel, nullptr) << "session " << session << ": " << rec.size() << " records";
    ASSERT_NE(copy, nullptr);
    ASSERT_NE(set, nullptr);
    ASSERT_NE(launch, nullptr);
    ASSERT_NE(range, nullptr);
    EXPECT_EQ(copy->name, "memcpy HtoD (pageable -> device)");
    EXPECT_EQ(copy->bytes, n * sizeof(float));
    EXPECT_EQ(set->bytes, 4096u);
    EXPECT_GT(kernel->end_ns, kernel->start_ns);
    // One clock for host and GPU: the launch call precedes the kernel, and the range, closed after
    // a synchronize, holds both.
    EXPECT_LE(launch->start_ns, kernel->start_ns);
    EXPECT_LE(range->start_ns, launch->start_ns);
    EXPECT_GE(range->end_ns, kernel->end_ns);
    const auto rows = lab::prof::key_averages(rec);
    ASSERT_GE(rows.size(), 3u);
    double pct = 0;
    for (const auto& r : rows) pct += r.percent;
    EXPECT_NEAR(pct, 100.0, 1e-6);
  }
}

TEST(Gpu, ProfilerPutsWorkOnItsStreams) {
  LAB_REQUIRE_GPU();
  lab::init_device();
  const int n = 1 << 16;
  lab::PinnedBuffer<float> h(n);
  lab::DeviceBuffer<float> d(n);
  lab::Stream compute, copies;
  lab::prof::Session s;
  const std::uint32_t compute_id = lab::prof::stream_id(compute), copies_id = lab::prof::stream_id(copies);
  ASSERT_NE(compute_id, copies_id);
  lab_test_twice<<<n / 256, 256, 0, compute>>>(d.data(), n);
  LAB_CHECK_LAUNCH();
  compute.sync();
  LAB_CHECK(cudaMemcpyAsync(h.data(), d.data(), n * sizeof(float), cudaMemcpyDeviceToHost, copies));
  copies.sync();
  const auto rec = s.stop();
  int kernels = 0, memcpys = 0;
  for (const auto& r : rec) {
    if (r.kind == lab::prof::Kind::kernel) {
      ++kernels;
      EXPECT_EQ(r.stream, compute_id);
    }
    if (r.kind == lab::prof::Kind::memcpy) {
      ++memcpys;
      EXPECT_EQ(r.stream, copies_id);
      EXPECT_EQ(r.name, "memcpy DtoH (device -> pinned)");
    }
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(memcpys, 1);
}

}  // namespace
