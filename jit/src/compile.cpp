// lab::jit, part 3: compiling and caching. NVRTC compiles the source for an architecture (a
// cubin for sm_NN, PTX for compute_NN); the Cache keeps binaries in memory and on disk, keyed by a
// hash of the source, the architecture and NVRTC's version, written atomically, so that a second
// process loads the file instead of compiling.
#include "lab/jit.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nvrtc.h>

#include "detail.hpp"
#include "lab/check.hpp"
#include "lab/check_nvrtc.hpp"
#include "lab/device.hpp"

namespace lab::jit {

using namespace detail;

std::string nvrtc_version() {
  int major = 0, minor = 0;
  LAB_CHECK(nvrtcVersion(&major, &minor));
  return std::to_string(major) + "." + std::to_string(minor);
}

Binary compile(const std::string& source, const std::string& arch) {
  const bool cubin = arch.rfind("sm_", 0) == 0;
  if (!cubin && arch.rfind("compute_", 0) != 0)
    throw UsageError("lab::jit::compile: architecture '" + arch + "': expected sm_NN (cubin) or compute_NN (PTX)");
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  LAB_CHECK(nvrtcCreateProgram(&prog, source.c_str(), "lab_jit.cu", 0, nullptr, nullptr));
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  const std::string arch_flag = "--gpu-architecture=" + arch;
  const char* options[] = {arch_flag.c_str(), "--std=c++17"};
  const nvrtcResult result = nvrtcCompileProgram(prog, 2, options);
  Binary b;
  b.arch = arch;
  std::size_t log_size = 0;
  LAB_CHECK(nvrtcGetProgramLogSize(prog, &log_size));
  b.log.resize(log_size);
  if (log_size) LAB_CHECK(nvrtcGetProgramLog(prog, b.log.data()));
  while (!b.log.empty() && (b.log.back() == '\0' || b.log.back() == '\n')) b.log.pop_back();
  if (result != NVRTC_SUCCESS)
    throw Error("lab::jit: NVRTC could not compile the generated kernel for " + arch + " (" +
                nvrtcGetErrorString(result) + "):\n" + b.log);
  std::size_t size = 0;
  if (cubin) {
    LAB_CHECK(nvrtcGetCUBINSize(prog, &size));
    b.image.resize(size);
    LAB_CHECK(nvrtcGetCUBIN(prog, b.image.data()));
  } else {
    LAB_CHECK(nvrtcGetPTXSize(prog, &size));
    b.image.resize(size);
    LAB_CHECK(nvrtcGetPTX(prog, b.image.data()));
  }
  b.compile_ms = elapsed_ms(t0);
  return b;
}

std::string cache_key(const std::string& source, const std::string& arch) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // a separator no text contains
  };
  mix(source);
  mix(arch);
  mix(nvrtc_version());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Cache::Cache(std::filesystem::path dir) : dir_(std::move(dir)) {}

Cache& Cache::global() {
  static Cache cache([] {
    const char* env = std::getenv("LAB_JIT_CACHE");
    if (env && std::string(env) == "off") return std::filesystem::path();
    return lab::cache_dir() / "jit";
  }());
  return cache;
}

Binary Cache::get(const std::string& source, const std::string& arch) {
  std::lock_guard lock(mutex_);
  const std::string key = cache_key(source, arch) + "-" + arch;
  if (auto it = memory_.find(key); it != memory_.end()) {
    Binary b = it->second;
    b.compile_ms = 0, b.from_memory = true, b.from_disk = false;
    return b;
  }
  const bool cubin = arch.rfind("sm_", 0) == 0;
  const std::filesystem::path file = dir_.empty() ? dir_ : dir_ / (key + (cubin ? ".cubin" : ".ptx"));
  if (!dir_.empty()) {
    std::ifstream f(file, std::ios::binary);
    if (f) {
      Binary b;
      b.arch = arch;
      b.image.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      if (!b.image.empty()) {
        b.from_disk = true;
        memory_[key] = b;
        return b;
      }
    }
  }
  Binary b = compile(source, arch);
  ++compiles_;
  memory_[key] = b;
  if (!dir_.empty()) {  // best effort: a cache that cannot be written only costs the next compile
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::filesystem::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(b.image.data(), static_cast<std::streamsize>(b.image.size()));
    }
    std::filesystem::rename(tmp, file, ec);
    if (ec) std::filesystem::remove(tmp, ec);
  }
  return b;
}

}  // namespace lab::jit
