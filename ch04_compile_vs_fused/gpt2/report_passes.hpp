// The GPT-2 report's two extra passes (demo_gpt2_report --profile and --dump), beside its timing:
// where one full step's GPU time goes, by kind of work (profile_step), and one full step of each
// implementation written to files for tools/torch_gpt2.py --check (dump).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt2/gpt2.cuh"
#include "gpt2/work_kinds.hpp"
#include "lab/demo.hpp"
#include "lab/harness.hpp"
#include "lab/profiler.hpp"

namespace gpt2::report {

// Where one full step's GPU time goes (--profile): ms a step by kind of work.
struct Breakdown {
  static constexpr const char* kKinds[] = {"matrix products", "attention", "AdamW", "the rest"};
  double ms[4] = {0, 0, 0, 0};
  double step_ms = 0;  // the profiled steps' time on the host's clock, a step
  std::string not_run;  // N/A or OOM
  // "the rest" by kernel (short_name: no anonymous namespace, no parameter list), ms a step, and
  // how many launches a step: where to look next.
  struct Part {
    double ms = 0;
    double launches = 0;
  };
  std::map<std::string, Part> rest;
};

// --profile: one implementation's full step under CUPTI (the header says what is counted where).
inline Breakdown profile_step(const lab::Variant& variant, const lab::Shape& shape, std::uint64_t seed) {
  constexpr int kWarmup = 2, kSteps = 3;
  Breakdown b;
  if (!lab::unsupported(variant, shape).empty()) {
    b.not_run = "N/A";
    return b;
  }
  lab::Stream stream;
  lab::prof::Session session;  // before the variant's prepare step, which may capture a graph
  try {
    lab::Prepared pr = lab::prepare(variant, shape, seed, stream);
    for (int i = 0; i < kWarmup; ++i) pr.instance->run(*pr.problem, stream);
    LAB_CHECK_LAUNCH();
    stream.sync();
    const std::uint64_t t0 = lab::prof::now_ns();
    for (int i = 0; i < kSteps; ++i) pr.instance->run(*pr.problem, stream);
    LAB_CHECK_LAUNCH();
    stream.sync();
    const std::uint64_t t1 = lab::prof::now_ns();
    b.step_ms = double(t1 - t0) * 1e-6 / kSteps;
    for (const lab::prof::Record& r : session.stop())
      if (lab::prof::on_gpu(r.kind) && r.start_ns >= t0 && r.start_ns <= t1) {
        const int kind = kind_of_work(r.name);
        const double ms = double(r.end_ns - r.start_ns) * 1e-6 / kSteps;
        b.ms[kind] += ms;
        if (kind == 3) {
          Breakdown::Part& part = b.rest[short_name(r.name)];
          part.ms += ms, part.launches += 1.0 / kSteps;
        }
      }
  } catch (const lab::OutOfMemory&) {
    b.not_run = "OOM";
  }
  return b;
}

inline void write_raw(const std::filesystem::path& file, const void* data, std::size_t bytes) {
  std::ofstream f(file, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!f) throw lab::Error(file.string() + ": write failed");
}
template <class T>
inline std::string dump_vector(const std::filesystem::path& dir, const std::string& name, const std::vector<T>& v) {
  write_raw(dir / name, v.data(), v.size() * sizeof(T));
  return name;
}

// One full step with each implementation on the same seeded inputs; the files are raw
// little-endian arrays (float32 or int32) that gpt2_dump.json names and describes.
// impls: each implementation's name and variant; shape: the configuration's full step.
inline int dump(const std::filesystem::path& dir, const std::string& size_name, const lab::Shape& shape,
                std::uint64_t seed, const std::vector<std::pair<std::string, const lab::Variant*>>& impls) {
  std::filesystem::create_directories(dir);
  if (const std::string why = Gpt2Step::validate(shape); !why.empty())
    throw lab::UsageError("shape " + shape.str() + ": " + why);
  const gpt2::Config c = gpt2::config_of(shape);
  nlohmann::json j;
  j["format"] = 1;
  j["tool"] = "demo_gpt2_report --dump";
  j["config"] = {{"model_size", size_name}, {"layers", c.layers}, {"d_model", c.d},   {"heads", c.heads},
                 {"context", c.context},     {"batch", c.batch},   {"vocab", c.vocab}, {"seed", seed}};
  const gpt2::AdamW hp;
  j["adamw"] = {{"lr", hp.lr},   {"beta1", hp.beta1},  {"beta2", hp.beta2}, {"eps", hp.eps},
                {"weight_decay", hp.weight_decay}, {"step", gpt2::kCheckStep}};
  j["layout"] = nlohmann::json::array();
  for (const auto& t : gpt2::layout(c))
    j["layout"].push_back({{"name", t.name}, {"shape", t.shape}, {"offset", t.offset}, {"size", t.size}});
  lab::Stream stream;
  bool inputs_written = false;
  std::vector<float> params0;
  for (const auto& [name, variant] : impls) {
    if (const std::string why = lab::unsupported(*variant, shape); !why.empty()) {
      std::cerr << "dump: " << name << " does not run " << shape.str() << ": " << why << "\n";
      j["variants"][name] = {{"not_applicable", why}};
      continue;
    }
    lab::Prepared pr = lab::prepare(*variant, shape, seed, stream);
    auto& p = dynamic_cast<Gpt2Step::Problem&>(*pr.problem);
    std::vector<float> before = p.params.download();
    if (!inputs_written) {
      j["inputs"] = {{"params", dump_vector(dir, "params.f32", before)},
                     {"m", dump_vector(dir, "m.f32", p.m.download())},
                     {"v", dump_vector(dir, "v.f32", p.v.download())},
                     {"tokens", dump_vector(dir, "tokens.i32", p.tokens.download())},
                     {"targets", dump_vector(dir, "targets.i32", p.targets.download())}};
      params0 = std::move(before);
      inputs_written = true;
    } else if (before != params0) {
      throw lab::Error("dump: " + name + " was given other parameters than the first implementation");
    }
    p.poison(stream);
    pr.instance->run(p, stream);
    LAB_CHECK_LAUNCH();
    LAB_CHECK(cudaStreamSynchronize(stream));
    const std::string& n = name;
    j["variants"][n] = {{"program", variant->program},
                        {"precision", variant->declared.precision},
                        {"loss", p.loss.download()[0]},
                        {"grads", dump_vector(dir, n + ".grads.f32", p.grads.download())},
                        {"params", dump_vector(dir, n + ".params.f32", p.params.download())},
                        {"m", dump_vector(dir, n + ".m.f32", p.m.download())},
                        {"v", dump_vector(dir, n + ".v.f32", p.v.download())}};
    std::cerr << "dump: " << n << ": loss " << p.loss.download()[0] << "\n";
  }
  lab::write_output((dir / "gpt2_dump.json").string(), j.dump(1) + "\n", "the manifest");
  return lab::kExitOk;
}

}  // namespace gpt2::report
