#include "lab/roofline.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "lab/stats.hpp"

namespace lab::roofline {

double ridge(double tflops, double gbs) { return gbs > 0 ? tflops * 1e12 / (gbs * 1e9) : 0; }

Point place_rates(const std::string& name, const std::string& source, double gbs, double tflops, const Ceilings& c) {
  if (!(c.copy_gbs > 0) || !(c.fp32_tflops > 0)) throw std::invalid_argument("roofline: ceilings not measured");
  Point p;
  p.name = name;
  p.source = source;
  p.gbs = gbs;
  p.tflops = tflops;
  p.intensity = gbs > 0 ? tflops * 1e12 / (gbs * 1e9) : 0;
  if (p.intensity < ridge(c.fp32_tflops, c.copy_gbs)) {
    p.bound = "memory";
    p.roof_tflops = p.intensity * c.copy_gbs * 1e9 / 1e12;
    p.percent = 100.0 * gbs / c.copy_gbs;
  } else {
    p.bound = "compute";
    p.roof_tflops = c.fp32_tflops;
    p.percent = 100.0 * tflops / c.fp32_tflops;
  }
  return p;
}

Point place(const std::string& name, const std::string& source, double bytes, double flops, double seconds,
            const Ceilings& c) {
  if (!(seconds > 0)) throw std::invalid_argument("roofline: a time must be positive");
  return place_rates(name, source, bytes / seconds / 1e9, flops / seconds / 1e12, c);
}

std::vector<Point> from_compare_json(const std::string& text, const std::string& source, const Ceilings& c) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("programs") || !j["programs"].is_array())
    throw std::runtime_error("no \"programs\" list: not a compare --json run");
  std::vector<Point> out;
  for (const auto& p : j["programs"]) {
    const std::string program = p.value("program", "?");
    if (p.value("status", "OK") != "OK") continue;
    for (const auto& s : p.value("shapes", nlohmann::json::array())) {
      if (s.value("status", "OK") != "OK" || !s.contains("counters")) continue;
      const auto& k = s["counters"];
      auto med = [&](const char* name) {
        if (!k.contains(name)) return 0.0;
        const auto v = k[name].get<std::vector<double>>();
        return v.empty() ? 0.0 : stats::median(v);
      };
      const double gbs = med("GB/s");
      if (!(gbs > 0)) continue;
      out.push_back(place_rates(program + " " + s.value("shape", ""), source, gbs, med("TFLOP/s"), c));
    }
  }
  return out;
}

std::string table(const Ceilings& c, const std::vector<Point>& points) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "  %-46s %11s %10s %10s %8s %11s %8s\n", "kernel", "FLOP/byte", "GB/s", "TFLOP/s",
                "bound", "roof", "% roof");
  o << line;
  for (const auto& p : points) {
    char roof[32];
    if (p.bound == "memory")
      std::snprintf(roof, sizeof roof, "%.0f GB/s", c.copy_gbs);
    else
      std::snprintf(roof, sizeof roof, "%.1f TF/s", p.roof_tflops);
    std::snprintf(line, sizeof line, "  %-46s %11.3g %10.1f %10.3f %8s %11s %7.1f%%\n", p.name.substr(0, 46).c_str(),
                  p.intensity, p.gbs, p.tflops, p.bound.c_str(), roof, p.percent);
    o << line;
  }
  return o.str();
}

std::string csv(const std::vector<Point>& points) {
  std::ostringstream o;
  o << "kernel,source,flop_per_byte,gbs,tflops,bound,roof_tflops,percent_of_roof\n";
  for (const auto& p : points)
    o << '"' << p.name << "\",\"" << p.source << "\"," << p.intensity << ',' << p.gbs << ',' << p.tflops << ','
      << p.bound << ',' << p.roof_tflops << ',' << p.percent << '\n';
  return o.str();
}

std::string to_json(const Ceilings& c, const std::vector<Point>& points, const std::string& device) {
  nlohmann::json j;
  j["tool"] = "cuda-perf-lab roofline";
  j["device"] = device;
  j["ceilings"] = {{"copy_gbs", c.copy_gbs},
                   {"fp32_tflops", c.fp32_tflops},
                   {"sgemm_tflops", c.sgemm_tflops},
                   {"tf32_tflops", c.tf32_tflops},
                   {"bf16_tflops", c.bf16_tflops}};
  j["ridge_flop_per_byte"] = {{"fp32", ridge(c.fp32_tflops, c.copy_gbs)},
                              {"tf32", ridge(c.tf32_tflops, c.copy_gbs)},
                              {"bf16", ridge(c.bf16_tflops, c.copy_gbs)}};
  j["points"] = nlohmann::json::array();
  for (const auto& p : points)
    j["points"].push_back({{"name", p.name},
                           {"source", p.source},
                           {"flop_per_byte", p.intensity},
                           {"gbs", p.gbs},
                           {"tflops", p.tflops},
                           {"bound", p.bound},
                           {"roof_tflops", p.roof_tflops},
                           {"percent_of_roof", p.percent}});
  return j.dump(2) + "\n";
}

}  // namespace lab::roofline
