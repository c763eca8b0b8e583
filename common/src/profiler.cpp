#include "lab/profiler.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include <cupti.h>
#include <nlohmann/json.hpp>
#include <nvtx3/nvToolsExt.h>

#include "lab/check.hpp"
#include "lab/check_cupti.hpp"

namespace lab::prof {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kernel: return "kernel";
    case Kind::memcpy: return "memcpy";
    case Kind::memset: return "memset";
    case Kind::api: return "runtime";
    case Kind::range: return "range";
  }
  return "?";
}

std::string demangle(const char* name) {
  if (name == nullptr) return "(unnamed)";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

std::vector<Row> key_averages(const std::vector<Record>& records) {
  std::map<std::pair<int, std::string>, Row> by;
  double gpu_total = 0;
  for (const auto& r : records) {
    if (!on_gpu(r.kind)) continue;
    const double us = static_cast<double>(r.end_ns - r.start_ns) * 1e-3;
    Row& row = by[{static_cast<int>(r.kind), r.name}];
    if (row.calls == 0) {
      row.name = r.name;
      row.kind = r.kind;
      row.min_us = us;
      row.max_us = us;
    }
    ++row.calls;
    row.total_us += us;
    row.min_us = std::min(row.min_us, us);
    row.max_us = std::max(row.max_us, us);
    gpu_total += us;
  }
  std::vector<Row> rows;
  for (auto& [key, row] : by) {
    row.avg_us = row.total_us / row.calls;
    row.percent = gpu_total > 0 ? 100.0 * row.total_us / gpu_total : 0;
    rows.push_back(row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total_us > b.total_us; });
  return rows;
}

namespace {

std::string us_text(double us) {
  char b[32];
  if (us >= 1e6) std::snprintf(b, sizeof b, "%.3f s", us * 1e-6);
  else if (us >= 1e3) std::snprintf(b, sizeof b, "%.3f ms", us * 1e-3);
  else std::snprintf(b, sizeof b, "%.3f us", us);
  return b;
}

// For the table: "(anonymous namespace)::" says nothing a reader needs, and takes 23 characters.
std::string cut(std::string s, std::size_t width) {
  for (std::size_t at; (at = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(at, 23);
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}

}  // namespace

std::string format_table(const std::vector<Row>& rows, std::size_t name_width) {
  std::ostringstream o;
  char line[512];
  const int w = static_cast<int>(name_width);
  std::snprintf(line, sizeof line, "  %-*s  %-7s %6s %13s %13s %13s %13s %7s\n", w, "name", "kind", "calls", "total",
                "average", "min", "max", "% GPU");
  o << line;
  double total = 0;
  int calls = 0;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "  %-*s  %-7s %6d %13s %13s %13s %13s %6.1f%%\n", w, cut(r.name, name_width).c_str(),
                  kind_name(r.kind), r.calls, us_text(r.total_us).c_str(), us_text(r.avg_us).c_str(),
                  us_text(r.min_us).c_str(), us_text(r.max_us).c_str(), r.percent);
    o << line;
    total += r.total_us;
    calls += r.calls;
  }
  std::snprintf(line, sizeof line, "  %-*s  %-7s %6d %13s\n", w, "(all GPU activity)", "", calls, us_text(total).c_str());
  o << line;
  return o.str();
}

std::string chrome_trace(const std::vector<Record>& records, std::string_view process_name) {
  std::uint64_t t0 = UINT64_MAX;
  for (const auto& r : records) t0 = std::min(t0, r.start_ns);
  if (records.empty()) t0 = 0;
  // pid 1: the GPU (a track per stream); pid 2: the host (a track per thread, one for the ranges).
  constexpr int kGpu = 1, kHost = 2, kRangesTid = 0;
  nlohmann::json events = nlohmann::json::array();
  auto meta = [&](int pid, const char* what, nlohmann::json args, std::int64_t tid = -1) {
    nlohmann::json e = {{"ph", "M"}, {"pid", pid}, {"name", what}, {"args", std::move(args)}};
    if (tid >= 0) e["tid"] = tid;
    events.push_back(std::move(e));
  };
  meta(kGpu, "process_name", {{"name", "GPU: " + std::string(process_name)}});
  meta(kHost, "process_name", {{"name", "host: " + std::string(process_name)}});
  meta(kHost, "thread_name", {{"name", "phases (NVTX)"}}, kRangesTid);
  std::map<std::uint32_t, bool> streams, threads;
  for (const auto& r : records) {
    const bool gpu = on_gpu(r.kind);
    const std::int64_t tid = gpu ? r.stream : r.kind == Kind::range ? kRangesTid : r.thread;
    if (gpu && !streams.count(r.stream)) {
      streams[r.stream] = true;
      meta(kGpu, "thread_name", {{"name", "stream " + std::to_string(r.stream)}}, tid);
    }
    if (r.kind == Kind::api && !threads.count(r.thread)) {
      threads[r.thread] = true;
      meta(kHost, "thread_name", {{"name", "thread " + std::to_string(r.thread) + " (CUDA runtime)"}}, tid);
    }
    nlohmann::json e = {{"name", r.name},
                        {"cat", kind_name(r.kind)},
                        {"ph", "X"},
                        {"pid", gpu ? kGpu : kHost},
                        {"tid", tid},
                        {"ts", static_cast<double>(r.start_ns - t0) * 1e-3},
                        {"dur", static_cast<double>(r.end_ns - r.start_ns) * 1e-3}};
    if (r.bytes) e["args"] = {{"bytes", r.bytes}, {"GB/s", r.end_ns > r.start_ns ? double(r.bytes) / double(r.end_ns - r.start_ns) : 0.0}};
    if (gpu) e["args"]["device"] = r.device;
    events.push_back(std::move(e));
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump() + "\n";
}

// --- CUPTI ---------------------------------------------------------------------------------------

namespace {

std::mutex g_mutex;
std::vector<Record> g_records;
std::atomic<bool> g_active{false};

const char* memory_kind(std::uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "device static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "managed static";
    default: return "unknown";
  }
}

const char* copy_kind(std::uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";
  }
}

std::string api_name(CUpti_CallbackId cbid) {
  const char* n = nullptr;
  if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &n) != CUPTI_SUCCESS || n == nullptr)
    return "runtime call " + std::to_string(cbid);
  std::string s(n);
  if (const auto v = s.rfind("_v"); v != std::string::npos && v + 2 < s.size() &&
                                    std::all_of(s.begin() + static_cast<long>(v) + 2, s.end(), ::isdigit))
    s.erase(v);  // cudaLaunchKernel_v7000 -> cudaLaunchKernel
  return s;
}

constexpr std::size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Record> got;
  CUpti_Activity* a = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
    Record r;
    switch (a->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
        r = {Kind::kernel, demangle(k->name), k->start, k->end, k->deviceId, k->streamId, 0, 0};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
        const std::string name = std::string("memcpy ") + copy_kind(m->copyKind) + " (" + memory_kind(m->srcKind) +
                                 " -> " + memory_kind(m->dstKind) + ")";
        r = {Kind::memcpy, name, m->start, m->end, m->deviceId, m->streamId, 0, m->bytes};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
        r = {Kind::memset, std::string("memset (") + memory_kind(static_cast<std::uint8_t>(m->memoryKind)) + ")",
             m->start, m->end, m->deviceId, m->streamId, 0, m->bytes};
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(a);
        r = {Kind::api, api_name(api->cbid), api->start, api->end, 0, 0, api->threadId, 0};
        break;
      }
      default:
        continue;
    }
    if (r.end_ns >= r.start_ns && r.start_ns != 0) got.push_back(std::move(r));
  }
  std::free(buffer);
  std::lock_guard lock(g_mutex);
  g_records.insert(g_records.end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME};

}  // namespace

std::uint64_t now_ns() {
  std::uint64_t t = 0;
  LAB_CHECK(cuptiGetTimestamp(&t));
  return t;
}

std::uint32_t stream_id(cudaStream_t s) {
  std::uint32_t id = 0;
  LAB_CHECK(cuptiGetStreamIdEx(nullptr, s, 0, &id));
  return id;
}

Session::Session() {
  if (g_active.exchange(true)) throw Error("profiler: a profiling session is already running in this process");
  {
    std::lock_guard lock(g_mutex);
    g_records.clear();
  }
  try {
    LAB_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    for (auto k : kKinds) LAB_CHECK(cuptiActivityEnable(k));
  } catch (...) {
    for (auto k : kKinds) cuptiActivityDisable(k);
    g_active = false;
    throw;
  }
}

std::vector<Record> Session::stop() {
  std::vector<Record> out;
  if (stopped_) return out;
  stopped_ = true;
  LAB_CHECK(cudaDeviceSynchronize());
  LAB_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  for (auto k : kKinds) cuptiActivityDisable(k);
  {
    std::lock_guard lock(g_mutex);
    out.swap(g_records);
  }
  g_active = false;
  std::stable_sort(out.begin(), out.end(), [](const Record& a, const Record& b) { return a.start_ns < b.start_ns; });
  return out;
}

Session::~Session() {
  if (stopped_) return;
  try {
    stop();
  } catch (...) {
    g_active = false;  // a destructor does not throw; the records are lost
  }
}

Range::Range(std::string name) : name_(std::move(name)) {
  nvtxRangePushA(name_.c_str());
  if (g_active.load()) {
    std::uint64_t t = 0;
    recording_ = cuptiGetTimestamp(&t) == CUPTI_SUCCESS;
    start_ = t;
  }
}

Range::~Range() {
  nvtxRangePop();
  if (!recording_ || !g_active.load()) return;
  std::uint64_t t = 0;
  if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) return;
  std::lock_guard lock(g_mutex);
  g_records.push_back({Kind::range, name_, start_, t, 0, 0, 0, 0});
}

}  // namespace lab::prof
