// Reading a device's facts from its attributes: a file of its own, so that the Python extension,
// which links the variants but not the timing harness, has it too (python/sources.txt).
#include <cstdio>
#include <map>
#include <mutex>

#include <cuda_runtime.h>

#include "lab/check.hpp"
#include "lab/device.hpp"

namespace lab {

namespace {
std::string uuid_text(const cudaUUID_t& u) {
  std::string s = "GPU-";
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(hex, sizeof hex, "%02x", b[i]);
    s += hex;
  }
  return s;
}

int attr(cudaDeviceAttr a, int dev) {
  int v = 0;
  LAB_CHECK(cudaDeviceGetAttribute(&v, a, dev));
  return v;
}

}  // namespace

DeviceFacts read_device_facts(int ordinal) {
  DeviceFacts f;
  f.ordinal = ordinal;
  cudaDeviceProp p{};
  LAB_CHECK(cudaGetDeviceProperties(&p, f.ordinal));
  f.name = p.name;
  f.uuid = uuid_text(p.uuid);
  f.cc_major = p.major;
  f.cc_minor = p.minor;
  f.sms = p.multiProcessorCount;
  f.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  f.global_mem_bytes = p.totalGlobalMem;
  f.smem_per_block_optin = p.sharedMemPerBlockOptin;
  f.sm_clock_khz = attr(cudaDevAttrClockRate, f.ordinal);
  f.mem_clock_khz = attr(cudaDevAttrMemoryClockRate, f.ordinal);
  f.bus_width_bits = attr(cudaDevAttrGlobalMemoryBusWidth, f.ordinal);
  LAB_CHECK(cudaDriverGetVersion(&f.driver_version));
  LAB_CHECK(cudaRuntimeGetVersion(&f.runtime_version));
  return f;
}

const DeviceFacts& current_device() {
  static std::mutex m;
  static std::map<int, DeviceFacts> known;  // by ordinal; node-based, so references stay valid
  int ordinal = 0;
  LAB_CHECK(cudaGetDevice(&ordinal));
  const std::lock_guard<std::mutex> lock(m);
  auto it = known.find(ordinal);
  if (it == known.end()) it = known.emplace(ordinal, read_device_facts(ordinal)).first;
  return it->second;
}

}  // namespace lab
