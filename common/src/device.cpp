#include "lab/device.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "lab/check.hpp"

namespace lab {

namespace detail {
cudaError_t probe_device_code();  // device.cu
}

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

std::string DeviceFacts::arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }

int DeviceFacts::fp32_lanes_per_sm() const {
  // FP32 FMA units per SM, from the CUDA programming guide's arithmetic-throughput table.
  switch (cc_major) {
    case 6: return cc_minor == 0 ? 64 : 128;
    case 7: return 64;
    case 8: return cc_minor == 0 ? 64 : 128;
    default: return 128;  // 9.x (Hopper), 10.x and 12.x (Blackwell)
  }
}

double DeviceFacts::datasheet_bandwidth_gbs() const {
  return 2.0 * mem_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9;
}

double DeviceFacts::datasheet_fp32_tflops() const {
  return static_cast<double>(sms) * fp32_lanes_per_sm() * 2.0 * sm_clock_khz * 1e3 / 1e12;
}

std::string DeviceFacts::describe() const {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "device %d: %s (%s, %d SMs, %.0f MiB L2, %.1f GiB)\n"
                "  driver CUDA %s, runtime CUDA %s, binary built for %s\n"
                "  max clocks: SM %d MHz, memory %d MHz, %d-bit bus\n"
                "  datasheet peaks (from attributes): %.0f GB/s, FP32 %.1f TFLOP/s",
                ordinal, name.c_str(), arch().c_str(), sms, l2_bytes / 1048576.0, global_mem_bytes / 1073741824.0,
                cuda_version_text(driver_version).c_str(), cuda_version_text(runtime_version).c_str(),
                built_architectures(), sm_clock_khz / 1000, mem_clock_khz / 1000, bus_width_bits,
                datasheet_bandwidth_gbs(), datasheet_fp32_tflops());
  return buf;
}

namespace {
std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}
}  // namespace

DeviceFacts init_device() {
  int n = 0;
  const cudaError_t r = cudaGetDeviceCount(&n);
  if (r != cudaSuccess || n == 0) {
    cudaGetLastError();
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;  // 0: no driver installed
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = CUDART_VERSION;
    cudaGetLastError();
    const std::string why = no_device_reason(r, n, driver, runtime);
    throw NoDevice("no usable CUDA device: " + why + ". This binary was built for " + built_architectures() +
                   " and needs an NVIDIA GPU of that architecture with a CUDA 13 driver.");
  }
  int ordinal = 0;
  LAB_CHECK(cudaGetDevice(&ordinal));
  const DeviceFacts f = read_device_facts(ordinal);
  const cudaError_t probe = detail::probe_device_code();
  if (probe != cudaSuccess) {
    cudaGetLastError();
    throw NoDevice(std::string("the device ") + f.name + " (" + f.arch() + ") cannot run this binary's kernels (" +
                   cudaGetErrorName(probe) + "): it was built for " + built_architectures() +
                   "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(f.cc_major) +
                   std::to_string(f.cc_minor));
  }
  return f;
}

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("LAB_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "cuda-perf-lab";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "cuda-perf-lab";
  return std::filesystem::temp_directory_path() / "cuda-perf-lab";
}

namespace {
std::filesystem::path peaks_file(const std::filesystem::path& dir, const std::string& uuid) {
  return dir / ("peaks-" + uuid + ".json");
}
constexpr int kPeaksFormat = 1;
}  // namespace

std::optional<Peaks> load_peaks(const std::filesystem::path& dir, const std::string& uuid) {
  std::ifstream in(peaks_file(dir, uuid));
  if (!in) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(in);
    if (j.at("format").get<int>() != kPeaksFormat || j.at("uuid").get<std::string>() != uuid) return std::nullopt;
    Peaks p;
    p.copy_gbs = j.at("copy_gbs").get<double>();
    p.fp32_tflops = j.at("fp32_tflops").get<double>();
    p.measured_at = j.at("measured_at").get<std::string>();
    p.from_cache = true;
    if (!(p.copy_gbs > 0 && p.fp32_tflops > 0)) return std::nullopt;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged cache is remeasured, not trusted
  }
}

void save_peaks(const std::filesystem::path& dir, const std::string& uuid, const Peaks& p) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const nlohmann::json j = {{"format", kPeaksFormat},     {"uuid", uuid},
                            {"copy_gbs", p.copy_gbs},     {"fp32_tflops", p.fp32_tflops},
                            {"measured_at", p.measured_at}};
  const auto path = peaks_file(dir, uuid);
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return;  // a read-only cache folder only costs a remeasurement next time
    out << j.dump(2) << "\n";
  }
  std::filesystem::rename(tmp, path, ec);
}

std::string implausible_peaks(const DeviceFacts& dev, const Peaks& p) {
  std::string why;
  auto test = [&](const char* what, double got, double datasheet, double min_share, const char* unit, int digits) {
    if (!(datasheet > 0) || got >= min_share * datasheet) return;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s%s %.*f %s is %.0f%% of the datasheet's %.*f (below %.0f%%)",
                  why.empty() ? "" : "; ", what, digits, got, unit, 100.0 * got / datasheet, digits, datasheet,
                  100.0 * min_share);
    why += buf;
  };
  test("copy", p.copy_gbs, dev.datasheet_bandwidth_gbs(), kMinCopyShareOfDatasheet, "GB/s", 0);
  test("FP32", p.fp32_tflops, dev.datasheet_fp32_tflops(), kMinFp32ShareOfDatasheet, "TFLOP/s", 1);
  if (!why.empty()) why += ": another program is probably using the GPU";
  return why;
}

Peaks settle_peaks(const DeviceFacts& dev, const Peaks& measured) {
  std::string why = implausible_peaks(dev, measured);
  if (why.empty()) return measured;
  Peaks p;
  p.copy_gbs = dev.datasheet_bandwidth_gbs();
  p.fp32_tflops = dev.datasheet_fp32_tflops();
  p.measured_at = measured.measured_at;
  p.rejected = std::move(why);
  return p;
}

Peaks measured_peaks(const DeviceFacts& dev, bool remeasure) {
  const auto dir = cache_dir();
  if (!remeasure)  // a cache written before the plausibility test existed may hold a contended measurement
    if (auto p = load_peaks(dir, dev.uuid); p && implausible_peaks(dev, *p).empty()) return *p;
  std::size_t free_b = 0, total_b = 0;
  LAB_CHECK(cudaMemGetInfo(&free_b, &total_b));
  // A whole number of MiB: cudaMemcpy is slower on sizes that are not (see copy_through).
  const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, free_b / 4) >> 20 << 20;
  Peaks p;
  p.copy_gbs = measure_copy_bandwidth_gbs(bytes);
  p.fp32_tflops = measure_fp32_tflops(dev);
  p.measured_at = today();
  Peaks settled = settle_peaks(dev, p);
  if (settled.rejected.empty()) save_peaks(dir, dev.uuid, p);
  return settled;
}

}  // namespace lab
