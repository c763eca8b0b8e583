// compare's run file (--json), written and read in one place: the run's metadata (device, clocks,
// commit), its rows and raw samples; parse_run_file is the one reader, for --replay and --against.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <stdexcept>

#include "lab/contract.hpp"
#include "lab/stats.hpp"
#include "process.hpp"
#include "report.hpp"

namespace compare {

namespace {

std::string ctx(const Collected& c, const char* key, const char* fallback = "?") {
  auto it = c.context.find(key);
  return it == c.context.end() ? fallback : it->second;
}

std::string which(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string d;
  while (std::getline(dirs, d, ':')) {
    const std::string p = (d.empty() ? "." : d) + "/" + name;
    if (FILE* f = std::fopen(p.c_str(), "r")) {
      std::fclose(f);
      return p;
    }
  }
  return "";
}

nlohmann::json maybe(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

}  // namespace

std::string git_commit(const std::string& source_dir) {
  if (const char* c = std::getenv("LAB_GIT_COMMIT"); c && *c) return c;  // a tree copied without .git
  const std::string git = which("git");
  if (git.empty() || source_dir.empty()) return "unknown";
  const auto head = run_process({git, "-C", source_dir, "rev-parse", "--short=12", "HEAD"}, 10);
  if (head.exit_code != 0) return "unknown";
  std::string commit = head.out.substr(0, head.out.find('\n'));
  const auto dirty = run_process({git, "-C", source_dir, "status", "--porcelain", "--untracked-files=no"}, 10);
  if (dirty.exit_code == 0 && !dirty.out.empty()) commit += "-dirty";
  return commit;
}

Meta make_meta(const Collected& c, const RunOptions& o, const std::string& source_dir, const std::string& command,
               int rounds_done) {
  Meta m;
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  m.date = buf;
  m.commit = git_commit(source_dir);
  m.command = command;
  m.device = ctx(c, "lab_device");
  m.uuid = ctx(c, "lab_device_uuid", "");
  m.arch = ctx(c, "lab_arch");
  m.driver = ctx(c, "lab_driver");
  m.runtime = ctx(c, "lab_runtime");
  m.sm_clock_mhz = ctx(c, "lab_sm_clock_mhz");
  m.mem_clock_mhz = ctx(c, "lab_mem_clock_mhz");
  m.cache = o.cache;
  m.peak_copy_gbs = ctx(c, "lab_peak_copy_gbs", "");
  m.peak_fp32_tflops = ctx(c, "lab_peak_fp32_tflops", "");
  m.repetitions = o.repetitions;
  m.rounds = o.rounds;
  if (rounds_done > 0 && rounds_done < o.rounds) m.rounds = rounds_done, m.rounds_planned = o.rounds;
  m.seed = o.seed;
  return m;
}

std::string Meta::line() const {
  std::ostringstream o;
  o << device << " (" << arch << "), driver " << driver << ", CUDA " << runtime << ", max clocks SM " << sm_clock_mhz
    << " MHz / memory " << mem_clock_mhz << " MHz; cache " << cache << "; " << repetitions * rounds
    << " samples a side (" << repetitions << " x " << rounds << " rounds, interleaved); " << date << "; commit "
    << commit;
  if (partial())
    o << "; UNFINISHED: " << rounds << " of the " << rounds_planned
      << " rounds asked for (written while the run was under way; a run cut short keeps what it finished)";
  return o.str();
}

nlohmann::json to_json(const Collected& c, const Analysis& a, const Meta& m) {
  nlohmann::json j;
  j["format"] = 1;
  j["tool"] = "cuda-perf-lab compare";
  j["date"] = m.date;
  j["git_commit"] = m.commit;
  j["command"] = m.command;
  j["device"] = {{"name", m.device},       {"uuid", m.uuid},         {"arch", m.arch},
                 {"driver", m.driver},     {"cuda", m.runtime},      {"sm_clock_mhz", m.sm_clock_mhz},
                 {"mem_clock_mhz", m.mem_clock_mhz}, {"peak_copy_gbs", m.peak_copy_gbs},
                 {"peak_fp32_tflops", m.peak_fp32_tflops}};
  j["options"] = {{"repetitions", m.repetitions}, {"rounds", m.rounds}, {"cache", m.cache}, {"seed", m.seed}};
  if (m.partial()) j["options"]["rounds_planned"] = m.rounds_planned;
  j["programs"] = nlohmann::json::array();
  for (const auto& pr : c.programs) {
    nlohmann::json p = {{"program", pr.program->name}, {"topic", pr.program->topic},   {"role", pr.program->role},
                        {"step", pr.program->step},    {"chapter", pr.program->chapter}, {"folder", pr.program->folder},
                        {"status", status_name(pr.status)}, {"message", pr.message}, {"seconds", pr.seconds}};
    if (!pr.program->after.empty()) p["after"] = pr.program->after;  // a replay pairs the steps as the run did
    p["shapes"] = nlohmann::json::array();
    for (const auto& s : pr.shape_order) {
      const Cell& cl = pr.shapes.at(s);
      nlohmann::json e = {{"shape", s}, {"status", status_name(cl.status)}, {"message", cl.message},
                          {"samples_s", cl.samples}, {"rounds", cl.rounds}, {"counters", cl.counters}};
      e["median_s"] = cl.samples.empty() ? nlohmann::json(nullptr) : nlohmann::json(lab::stats::median(cl.samples));
      p["shapes"].push_back(e);
    }
    j["programs"].push_back(p);
  }
  j["rows"] = nlohmann::json::array();
  for (const auto& r : a.rows)
    j["rows"].push_back({{"chapter", r.chapter}, {"topic", r.topic}, {"shape", r.shape}, {"variant", r.variant},
                         {"against", r.against}, {"kind", r.kind}, {"status", status_name(r.status)},
                         {"message", r.message}, {"against_median_s", maybe(r.base_median)},
                         {"variant_median_s", maybe(r.var_median)}, {"speedup", maybe(r.speedup)},
                         {"ci95", {maybe(r.ci_lo), maybe(r.ci_hi)}},
                         {"round_ci95", {maybe(r.round_lo), maybe(r.round_hi)}}, {"p_value", maybe(r.p)}, {"verdict", r.verdict},
                         {"variant_gbs", maybe(r.gbs)}, {"n_against", r.n_base}, {"n_variant", r.n_var},
                         {"bound", r.bound}, {"host_share", {maybe(r.base_host_share), maybe(r.var_host_share)}}});
  j["chapters"] = nlohmann::json::array();
  for (const auto& s : a.chapters)
    j["chapters"].push_back({{"chapter", s.chapter}, {"folder", s.folder}, {"geomean_speedup", maybe(s.geomean)},
                             {"matched_shapes", s.matched}});
  return j;
}

namespace {
Status status_from(const std::string& s) {
  for (Status st : {Status::ok, Status::wrong, Status::crash, Status::timeout, Status::oom, Status::no_gpu,
                    Status::not_built, Status::bad_output, Status::usage, Status::not_applicable})
    if (s == status_name(st)) return st;
  throw std::runtime_error("unknown status '" + s + "'");
}
}  // namespace

void replay(const nlohmann::json& j, Replayed& out) {
  if (j.value("tool", "") != "cuda-perf-lab compare") throw std::runtime_error("not a compare --json file");
  try {
    const auto& d = j.at("device");
    Meta& m = out.meta;
    m.date = j.at("date");
    m.commit = j.at("git_commit");
    m.command = j.value("command", "");
    m.device = d.at("name");
    m.uuid = d.value("uuid", "");
    m.arch = d.value("arch", "?");
    m.driver = d.value("driver", "?");
    m.runtime = d.value("cuda", "?");
    m.sm_clock_mhz = d.value("sm_clock_mhz", "?");
    m.mem_clock_mhz = d.value("mem_clock_mhz", "?");
    m.peak_copy_gbs = d.value("peak_copy_gbs", "");
    m.peak_fp32_tflops = d.value("peak_fp32_tflops", "");
    const auto& o = j.at("options");
    m.repetitions = o.at("repetitions");
    m.rounds = o.at("rounds");
    m.rounds_planned = o.value("rounds_planned", 0);  // only in a file written while its run was under way
    m.cache = o.at("cache");
    m.seed = o.at("seed");
    const auto& progs = j.at("programs");
    out.programs.clear();
    out.programs.reserve(progs.size());  // ProgramResult points into it
    for (const auto& p : progs) {
      Program g;
      g.name = p.at("program");
      g.topic = p.at("topic");
      g.role = p.at("role");
      g.step = p.at("step");
      g.chapter = p.at("chapter");
      g.folder = p.at("folder");
      g.after = p.value("after", "");
      g.built = true;
      out.programs.push_back(std::move(g));
    }
    Collected& c = out.collected;
    c.context = {{"lab_device", m.device}, {"lab_device_uuid", m.uuid}};
    for (std::size_t i = 0; i < progs.size(); ++i) {
      const auto& p = progs[i];
      ProgramResult pr;
      pr.program = &out.programs[i];
      pr.status = status_from(p.at("status"));
      pr.message = p.value("message", "");
      pr.seconds = p.value("seconds", 0.0);
      for (const auto& sh : p.at("shapes")) {
        const std::string name = sh.at("shape");
        pr.shape_order.push_back(name);
        Cell& cl = pr.shapes[name];
        cl.status = status_from(sh.at("status"));
        cl.message = sh.value("message", "");
        cl.samples = sh.at("samples_s").get<std::vector<double>>();
        cl.rounds = sh.value("rounds", std::vector<int>{});  // absent in runs before rounds were kept
        cl.counters = sh.at("counters").get<std::map<std::string, std::vector<double>>>();
      }
      c.programs.push_back(std::move(pr));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("a field is missing or has the wrong type: ") + e.what());
  }
}

void merge_replays(const std::vector<nlohmann::json>& runs, const std::vector<std::string>& names, Replayed& out) {
  if (runs.empty()) throw std::runtime_error("no run to replay");
  std::vector<Replayed> each(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    try {
      replay(runs[i], each[i]);
    } catch (const std::exception& e) {
      throw std::runtime_error(names[i] + ": " + e.what());
    }
  }
  const Meta& first = each[0].meta;
  auto join_distinct = [&](auto field) {
    std::vector<std::string> seen;
    for (const Replayed& r : each)
      if (std::find(seen.begin(), seen.end(), field(r.meta)) == seen.end()) seen.push_back(field(r.meta));
    std::string s;
    for (std::size_t i = 0; i < seen.size(); ++i) s += (i ? (i + 1 == seen.size() ? " and " : ", ") : "") + seen[i];
    return s;
  };
  for (std::size_t i = 1; i < each.size(); ++i) {
    const Meta& m = each[i].meta;
    const bool same_device = !first.uuid.empty() && !m.uuid.empty() ? first.uuid == m.uuid : first.device == m.device;
    if (!same_device)
      throw std::runtime_error(names[i] + " ran on " + m.device + " (" + m.uuid + "), " + names[0] + " on " +
                               first.device + " (" + first.uuid + "): runs of one device only");
    if (m.repetitions != first.repetitions || m.rounds != first.rounds || m.cache != first.cache)
      throw std::runtime_error(names[i] + " took " + std::to_string(m.repetitions) + " x " + std::to_string(m.rounds) +
                               " samples (cache " + m.cache + "), " + names[0] + " " +
                               std::to_string(first.repetitions) + " x " + std::to_string(first.rounds) + " (cache " +
                               first.cache + "): merge runs of the same samples only");
  }
  out.meta = first;
  out.meta.date = join_distinct([](const Meta& m) { return m.date; });
  out.meta.commit = join_distinct([](const Meta& m) { return m.commit; });
  out.meta.command = join_distinct([](const Meta& m) { return m.command; });
  // The programs, each once, in the order the runs name them; then their results, shapes joined.
  std::size_t total = 0;
  for (const Replayed& r : each) total += r.programs.size();
  out.programs.clear();
  out.programs.reserve(total);  // ProgramResult points into it: no reallocation below
  out.collected = Collected{};
  out.collected.context = each[0].collected.context;
  std::map<std::string, std::size_t> at;  // program name -> index in out.collected.programs
  std::map<std::string, std::string> from;  // program name -> the run that gave it
  for (std::size_t i = 0; i < each.size(); ++i)
    for (ProgramResult& pr : each[i].collected.programs) {
      const std::string& name = pr.program->name;
      const auto it = at.find(name);
      if (it == at.end()) {
        out.programs.push_back(*pr.program);
        pr.program = &out.programs.back();
        at[name] = out.collected.programs.size();
        from[name] = names[i];
        out.collected.programs.push_back(std::move(pr));
        continue;
      }
      ProgramResult& into = out.collected.programs[it->second];
      if (into.status != pr.status)
        throw std::runtime_error(name + " is " + status_name(into.status) + " in " + from[name] + " and " +
                                 status_name(pr.status) + " in " + names[i]);
      for (const std::string& shape : pr.shape_order) {
        if (into.shapes.count(shape))
          throw std::runtime_error(name + " at " + shape + " is in " + from[name] + " and in " + names[i] +
                                   ": one measurement a program and shape");
        into.shape_order.push_back(shape);
        into.shapes[shape] = std::move(pr.shapes[shape]);
      }
      into.seconds += pr.seconds;
    }
}

nlohmann::json parse_run_file(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::runtime_error("not a compare --json file (the top level is not an object)");
  for (const char* key : {"rows", "programs"})
    if (!j.contains(key) || !j[key].is_array())
      throw std::runtime_error(std::string("not a compare --json file (no '") + key + "' array)");
  for (const auto& r : j["rows"])
    if (!r.is_object() || !r.contains("variant") || !r.contains("shape") || !r.contains("kind"))
      throw std::runtime_error("not a compare --json file (a row without variant, kind and shape)");
  return j;
}

void steps_after_from(const Manifest& m, Replayed& r) {
  for (Program& p : r.programs) {
    if (!p.after.empty()) continue;
    for (const Program& q : m.programs)
      if (q.name == p.name) p.after = q.after;
  }
}

}  // namespace compare
