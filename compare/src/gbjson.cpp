#include "gbjson.hpp"

#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace compare {

namespace {

double unit_seconds(const std::string& u) {
  if (u == "ns") return 1e-9;
  if (u == "us") return 1e-6;
  if (u == "ms") return 1e-3;
  if (u == "s") return 1.0;
  throw std::runtime_error("unknown time_unit '" + u + "'");
}

// Fields of a benchmark row that are not user counters.
const std::set<std::string> kStandard = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "aggregate_name",
    "aggregate_unit", "error_occurred", "error_message", "skipped", "skip_message", "label",
    "bytes_per_second", "items_per_second"};

// "topic/program/shape[/manual_time...]"
void split_name(const std::string& name, std::string& topic, std::string& program, std::string& shape) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (true) {
    const auto slash = name.find('/', pos);
    parts.push_back(name.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos));
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  if (parts.size() < 3) throw std::runtime_error("benchmark name '" + name + "' is not topic/program/shape");
  topic = parts[0];
  program = parts[1];
  shape = parts[2];
}

}  // namespace

std::string null_non_finite(const std::string& text) {
  static const char* const kTokens[] = {"-Infinity", "Infinity", "-inf", "inf", "-nan", "nan", "NaN", "-NaN"};
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size();) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) {
        out += text[i + 1];
        i += 2;
        continue;
      }
      if (ch == '"') in_string = false;
      ++i;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
      ++i;
      continue;
    }
    bool replaced = false;
    for (const char* tok : kTokens) {
      const std::size_t len = std::char_traits<char>::length(tok);
      if (text.compare(i, len, tok) == 0) {
        out += "null";
        i += len;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

BenchmarkRun parse_benchmark_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(null_non_finite(text));
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(std::string("output is not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("benchmarks") || !j["benchmarks"].is_array())
    throw std::runtime_error("output is JSON but has no \"benchmarks\" array");
  BenchmarkRun run;
  if (j.contains("context") && j["context"].is_object())
    for (const auto& [k, v] : j["context"].items())
      if (v.is_string()) run.context[k] = v.get<std::string>();
  std::set<std::string> errored;
  for (const auto& b : j["benchmarks"]) {
    if (!b.is_object() || !b.contains("name")) throw std::runtime_error("a benchmark row has no name");
    const std::string name = b.value("run_name", b["name"].get<std::string>());
    std::string topic, program, shape;
    split_name(name, topic, program, shape);
    const bool error = b.value("error_occurred", false) ||
                       (b.contains("skipped") && b["skipped"].is_number() && b["skipped"].get<int>() != 0) ||
                       (b.contains("skipped") && b["skipped"].is_string() && b["skipped"] != "NotSkipped");
    if (error) {
      if (errored.insert(name).second)
        run.errors.push_back({topic, program, shape, b.value("error_message", b.value("skip_message", "skipped"))});
      continue;
    }
    if (b.value("run_type", "iteration") != "iteration") continue;  // aggregates are recomputed here
    Sample s{topic, program, shape, 0, {}};
    if (!b.contains("real_time") || !b["real_time"].is_number() || !b.contains("time_unit"))
      throw std::runtime_error("row '" + name + "' has no real_time/time_unit");
    s.seconds = b["real_time"].get<double>() * unit_seconds(b["time_unit"].get<std::string>());
    for (const auto& [k, v] : b.items())
      if (!kStandard.count(k) && v.is_number()) s.counters[k] = v.get<double>();
    run.samples.push_back(std::move(s));
  }
  return run;
}

}  // namespace compare
