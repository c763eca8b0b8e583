// What the device is and what it can do: facts read from its attributes, datasheet-style peaks
// computed from them, and peaks measured on it once and cached per device UUID.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

namespace lab {

struct DeviceFacts {
  int ordinal = 0;
  std::string name;
  std::string uuid;  // "GPU-xxxxxxxx-xxxx-...", as nvidia-smi prints it
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  std::size_t l2_bytes = 0;
  std::size_t global_mem_bytes = 0;
  std::size_t smem_per_block_optin = 0;
  int sm_clock_khz = 0;      // peak SM clock
  int mem_clock_khz = 0;     // peak memory clock
  int bus_width_bits = 0;
  int driver_version = 0;    // e.g. 13000
  int runtime_version = 0;

  std::string arch() const;            // "sm_90"
  int fp32_lanes_per_sm() const;       // FP32 FMA units per SM for this architecture
  double datasheet_bandwidth_gbs() const;  // 2 * memory clock * bus width
  double datasheet_fp32_tflops() const;    // SMs * lanes * 2 * SM clock
  std::string describe() const;        // multi-line header every program prints first
};

std::string cuda_version_text(int v);  // 13000 -> "13.0"

// Picks the current device and proves that this binary's kernels run on it. Throws NoDevice, with
// the reason and the architectures the binary was built for, when there is no usable device.
DeviceFacts init_device();

// The facts of device `ordinal`, read from its attributes (no probe, no device selected).
DeviceFacts read_device_facts(int ordinal);
// The facts of the current device (cudaGetDevice), read once a device and kept: for host code that
// sizes a launch (SMs, shared memory a block may opt in to) where no DeviceFacts is at hand.
const DeviceFacts& current_device();

// Ceilings measured on this device: a large device-to-device copy (bytes read + written) and an
// FMA-bound kernel. Cached in cache_dir()/peaks-<uuid>.json; remeasure ignores the cache.
struct Peaks {
  double copy_gbs = 0;
  double fp32_tflops = 0;
  std::string measured_at;  // ISO date of the measurement
  bool from_cache = false;
  // Not empty when the measurement was not believed (implausible_peaks): then it says why, the two
  // figures above are the datasheet's, and nothing was cached.
  std::string rejected;
};
// A fresh measurement (or a cached one) is believed only where it reaches these shares of the
// datasheet's figures. On an idle H100 SXM the copy reaches 90% of the datasheet's 3352 GB/s and the
// FMA kernel 91% of its 66.9 TFLOP/s; four programs started at once on that card measured the FMA
// rate at 17 to 27 TFLOP/s (26 to 40%), and one of them cached it, which put later runs' FP32 share
// at 135%. A GPU time-sliced between two programs measures about half.
inline constexpr double kMinCopyShareOfDatasheet = 0.6;
inline constexpr double kMinFp32ShareOfDatasheet = 0.7;
// "" when p is believable on dev; else what is wrong with it (a sentence without a final period).
std::string implausible_peaks(const DeviceFacts& dev, const Peaks& p);
// measured when believable; else the datasheet's figures, with the reason in `rejected`.
Peaks settle_peaks(const DeviceFacts& dev, const Peaks& measured);
// The cached peaks when believable, else measured now (and cached when believable; see Peaks).
Peaks measured_peaks(const DeviceFacts& dev, bool remeasure = false);

// Measurements behind measured_peaks (need a device).
double measure_copy_bandwidth_gbs(std::size_t bytes);
double measure_fp32_tflops(const DeviceFacts& dev);
// cuBLAS SGEMM (fp32 on the CUDA cores, no TF32) on n x n matrices: the median of 6 runs after 2,
// in TFLOP/s. The denominator of a training step's model FLOPs utilisation.
double measure_sgemm_tflops(int n = 8192);
// cuBLAS's GEMM with bf16 operands and fp32 output and accumulation (CUBLAS_COMPUTE_32F, on the
// tensor cores) on n x n matrices, likewise: the denominator of a bf16 step's MFU.
double measure_bf16_gemm_tflops(int n = 8192);

// $LAB_CACHE_DIR, else $XDG_CACHE_HOME/cuda-perf-lab, else $HOME/.cache/cuda-perf-lab.
std::filesystem::path cache_dir();
std::optional<Peaks> load_peaks(const std::filesystem::path& dir, const std::string& uuid);
void save_peaks(const std::filesystem::path& dir, const std::string& uuid, const Peaks& p);

}  // namespace lab
