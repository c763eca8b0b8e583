// Making a variant's problem and state for a shape, checking it against the reference, and the
// demos' one-shape measurement.
#include <algorithm>

#include "harness_internal.hpp"
#include "lab/check.hpp"
#include "lab/device.hpp"
#include "lab/harness.hpp"
#include "lab/memory.hpp"
#include "lab/profiler.hpp"
#include "lab/stats.hpp"

namespace lab {

namespace {
// `out` and the timed shapes that the topic can verify, each once.
std::vector<Shape> with_timed(const TopicInfo& t, std::vector<Shape> out, const std::vector<Shape>& timed) {
  for (const auto& s : timed)
    if (reference_can_verify(t, s) && std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
  return out;
}
}  // namespace

std::vector<Shape> shapes_to_verify(const TopicInfo& t, const std::vector<Shape>& timed, bool with_check_set) {
  return with_timed(t, with_check_set ? t.checks : std::vector<Shape>{}, timed);
}

std::vector<Shape> check_set(const Variant& v) {
  std::vector<Shape> out = v.topic->checks;
  for (const Shape& s : v.declared.checks)
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

std::vector<Shape> shapes_to_verify(const Variant& v, const std::vector<Shape>& timed, bool with_check_set) {
  return with_timed(*v.topic, with_check_set ? check_set(v) : std::vector<Shape>{}, timed);
}

Verdict run_and_verify(Instance& instance, Problem& p, cudaStream_t stream) {
  p.poison(stream);
  instance.run(p, stream);
  LAB_CHECK_LAUNCH();
  LAB_CHECK(cudaStreamSynchronize(stream));
  return p.verify();
}

const DeviceFacts& detail::this_device() {
  static const DeviceFacts facts = init_device();
  return facts;
}

Prepared prepare(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream) {
  Prepared out;
  Rng rng(seed);
  out.problem = v.topic->make(s, rng, v.declared);
  LAB_CHECK(cudaDeviceSynchronize());  // inputs are complete before the variant's stream starts
  out.instance = v.prepare(*out.problem, stream);
  LAB_CHECK_LAUNCH();
  LAB_CHECK(cudaStreamSynchronize(stream));
  return out;
}

std::string unsupported(const Variant& v, const Shape& s) { return v.supports(s, detail::this_device()); }

Verdict check_variant(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream) {
  prof::Range phase("verify " + s.str());
  if (const std::string why = unsupported(v, s); !why.empty())
    throw Error(v.program + " does not support " + s.str() + ": " + why + " (ask unsupported() first)");
  Prepared pr = prepare(v, s, seed, stream);
  return run_and_verify(*pr.instance, *pr.problem, stream);
}

RunWindow profiled_runs(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream, int warmup,
                        int runs, const std::string& label) {
  Prepared pr;
  {
    prof::Range phase("setup " + label);
    pr = prepare(v, s, seed, stream);
  }
  {
    prof::Range phase("warm-up " + label);
    for (int i = 0; i < warmup; ++i) pr.instance->run(*pr.problem, stream);
    LAB_CHECK_LAUNCH();
    LAB_CHECK(cudaStreamSynchronize(stream));
  }
  RunWindow w;
  w.begin = prof::now_ns();
  {
    prof::Range phase("profiled " + label);
    for (int i = 0; i < runs; ++i) pr.instance->run(*pr.problem, stream);
    LAB_CHECK_LAUNCH();
    LAB_CHECK(cudaStreamSynchronize(stream));
  }
  w.end = prof::now_ns();
  return w;
}

Measurement measure_variant(const Variant& v, const Shape& s, std::uint64_t seed, int reps, L2Flusher& flusher,
                            bool verify, int warmup) {
  Measurement m;
  const std::size_t before = device_memory_stats().current;
  reset_device_memory_peak();
  if (m.not_applicable = unsupported(v, s); !m.not_applicable.empty()) return m;
  prof::Range range("measure " + v.program + " " + s.str());  // one NVTX range a measurement (Nsight Systems)
  try {
    Stream stream;
    Prepared pr = prepare(v, s, seed, stream);
    if (verify) {
      const Verdict verdict = run_and_verify(*pr.instance, *pr.problem, stream);
      if (!verdict.pass) throw Error(v.program + " at " + s.str() + ": wrong result: " + verdict.details());
      m.verified = true;
    }
    const auto ms =
        flushed_samples_ms([&] { pr.instance->run(*pr.problem, stream); }, stream, &flusher, reps, warmup);
    m.ms = stats::median(ms);
    m.mean_ms = stats::mean(ms);
    if (ms.size() >= 2) m.std_ms = stats::stddev(ms);
    m.peak_mib = double(device_memory_stats().peak - before) / double(1 << 20);
  } catch (const OutOfMemory&) {
    m.oom = true;
  }
  return m;
}

}  // namespace lab
