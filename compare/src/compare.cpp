#include "compare.hpp"

#include "lab/harness.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "lab/stats.hpp"

namespace compare {

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "OK";
    case Status::wrong: return "WRONG";
    case Status::crash: return "CRASH";
    case Status::timeout: return "TIMEOUT";
    case Status::oom: return "OOM";
    case Status::no_gpu: return "NO-GPU";
    case Status::not_built: return "NOT-BUILT";
    case Status::bad_output: return "BAD-OUTPUT";
    case Status::usage: return "USAGE";
    case Status::not_applicable: return "N/A";
  }
  return "?";
}

Manifest load_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the manifest " + path + " (build the lab first: cmake --build build)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error("the manifest " + path + " is not valid JSON: " + e.what());
  }
  Manifest m;
  m.path = path;
  m.build_dir = j.value("build_dir", "");
  m.source_dir = j.value("source_dir", "");
  if (!j.contains("programs") || !j["programs"].is_array())
    throw std::runtime_error("the manifest " + path + " has no \"programs\" list");
  for (const auto& p : j["programs"]) {
    Program g;
    g.name = p.at("program").get<std::string>();
    g.path = p.at("path").get<std::string>();
    // An installed manifest names its programs relative to itself (share/cuda-perf-lab -> bin).
    if (!g.path.empty() && !std::filesystem::path(g.path).is_absolute())
      g.path = (std::filesystem::path(path).parent_path() / g.path).lexically_normal().string();
    g.folder = p.value("folder", "");
    g.source = p.value("source", "");
    g.make_target = p.value("make_target", g.name);
    g.chapter_target = p.value("chapter_target", "");
    g.chapter = p.value("chapter", 0);
    g.kind = p.value("kind", "variant");
    m.programs.push_back(std::move(g));
  }
  return m;
}

void describe_programs(Manifest& m, double timeout_s) {
  for (auto& p : m.programs) {
    std::ifstream probe(p.path);
    if (!probe) {
      p.built = false;
      p.describe_error = "not built: run `make " + p.make_target + "` (or `make " + p.chapter_target + "`) in " +
                         (m.build_dir.empty() ? std::string("the build folder") : m.build_dir);
      continue;
    }
    const ProcessResult r = run_process({p.path, "--describe"}, timeout_s);
    if (r.exit_code != 0) {
      p.built = false;
      p.describe_error = p.name + " --describe failed (" +
                         (r.signal ? signal_name(r.signal) : "exit status " + std::to_string(r.exit_code)) + ")";
      continue;
    }
    try {
      const auto j = nlohmann::json::parse(r.out);
      p.topic = j.at("topic").get<std::string>();
      p.role = j.at("role").get<std::string>();
      p.description = j.value("description", "");
      p.step = j.value("step", 0);
      for (const auto& s : j.value("sweep", nlohmann::json::array())) p.sweep.push_back(s.at("shape").get<std::string>());
      p.built = true;
    } catch (const std::exception& e) {
      p.built = false;
      p.describe_error = p.name + " --describe printed no valid description: " + e.what();
    }
  }
}

namespace {

int role_rank(const std::string& role) {
  return role == "baseline" ? 0 : role == "optimized" ? 1 : role == "library" ? 2 : role == "demo" ? 4 : 3;
}

bool chapter_matches(const Program& p, const std::string& want) {
  if (want == p.folder) return true;
  std::string digits = want;
  if (digits.rfind("ch", 0) == 0) digits = digits.substr(2);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::stoi(digits) == p.chapter;
}

}  // namespace

std::vector<const Program*> select_programs(const Manifest& m, const Selection& s) {
  std::vector<const Program*> out;
  for (const auto& p : m.programs) {
    if (s.chapter && !chapter_matches(p, *s.chapter)) continue;
    if (s.topic && p.topic != *s.topic) continue;
    out.push_back(&p);
  }
  if (out.empty()) {
    std::set<std::string> chapters, topics;
    for (const auto& p : m.programs) {
      chapters.insert(p.folder);
      if (!p.topic.empty()) topics.insert(p.topic);
    }
    std::string have = "chapters:";
    for (const auto& c : chapters) have += " " + c;
    have += "; topics:";
    for (const auto& t : topics) have += " " + t;
    throw std::invalid_argument(std::string("nothing matches ") + (s.chapter ? "--chapter " + *s.chapter + " " : "") +
                                (s.topic ? "--topic " + *s.topic : "") + " (" + have + ")");
  }
  std::stable_sort(out.begin(), out.end(), [](const Program* a, const Program* b) {
    if (a->chapter != b->chapter) return a->chapter < b->chapter;
    if (a->topic != b->topic) return a->topic < b->topic;
    if (role_rank(a->role) != role_rank(b->role)) return role_rank(a->role) < role_rank(b->role);
    if (a->step != b->step) return a->step < b->step;
    return a->name < b->name;
  });
  return out;
}

std::vector<std::string> program_args(const Program& p, const RunOptions& o, int round) {
  std::vector<std::string> a{p.path, "--seed", std::to_string(o.seed), "--cache", o.cache,
                             "--benchmark_format=json", "--benchmark_repetitions=" + std::to_string(o.repetitions)};
  if (!o.min_time.empty()) a.push_back("--benchmark_min_time=" + o.min_time);
  if (round > 1) a.push_back("--no-check");  // verified in round 1, on the same seed
  if (!o.shapes.empty()) {
    for (const auto& s : o.shapes) a.insert(a.end(), {"--shape", s});
  } else if (o.quick && !p.sweep.empty()) {
    a.insert(a.end(), {"--shape", p.sweep.front()});
  }
  return a;
}

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// The lines of a program's stderr that say what went wrong.
std::string failure_message(const std::string& err) {
  std::istringstream in(err);
  std::string line, picked;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.find("error:") != std::string::npos || line.find("FAIL") != std::string::npos ||
        line.find(": got ") != std::string::npos) {
      const auto start = line.find_first_not_of(' ');
      if (n++ < 6) picked += (picked.empty() ? "" : " | ") + trim(line.substr(start == std::string::npos ? 0 : start));
    }
  }
  if (picked.empty()) {
    // The last non-empty line, for programs that say nothing in the usual form.
    std::istringstream again(err);
    while (std::getline(again, line))
      if (!trim(line).empty()) picked = trim(line);
  }
  return picked.empty() ? "(no message)" : picked;
}

void add_samples(ProgramResult& pr, const BenchmarkRun& run, int round) {
  for (const auto& s : run.samples) {
    if (!pr.shapes.count(s.shape)) pr.shape_order.push_back(s.shape);
    Cell& c = pr.shapes[s.shape];
    c.samples.push_back(s.seconds);
    c.rounds.push_back(round);
    for (const auto& [k, v] : s.counters) c.counters[k].push_back(v);
  }
  for (const auto& e : run.errors) {
    if (!pr.shapes.count(e.shape)) pr.shape_order.push_back(e.shape);
    Cell& c = pr.shapes[e.shape];
    // The contract's markers (lab/contract.hpp): out of memory, not applicable; anything else failed.
    const auto starts = [&](const char* marker) { return e.message.rfind(marker, 0) == 0; };
    c.status = starts(lab::kOutOfMemoryMarker)     ? Status::oom
               : starts(lab::kNotApplicableMarker) ? Status::not_applicable
                                                   : Status::wrong;
    c.message = c.status == Status::not_applicable ? e.message.substr(std::string(lab::kNotApplicableMarker).size())
                                                   : e.message;
  }
}

}  // namespace

Collected run_programs(const std::vector<const Program*>& programs, const RunOptions& o, std::ostream& progress) {
  Collected c;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  for (const Program* p : programs) {
    ProgramResult pr;
    pr.program = p;
    if (!p->built) {
      pr.status = Status::not_built;
      pr.message = p->describe_error;
    }
    c.programs.push_back(std::move(pr));
  }
  const int total = static_cast<int>(programs.size()) * o.rounds;
  int k = 0;
  for (int round = 1; round <= o.rounds; ++round) {
    for (auto& pr : c.programs) {
      ++k;
      const Program& p = *pr.program;
      progress << "[" << k << "/" << total << "] round " << round << "/" << o.rounds << " " << p.name << ": ";
      if (pr.status != Status::ok) {
        progress << status_name(pr.status) << ", skipped\n" << std::flush;
        continue;
      }
      progress << std::flush;
      const ProcessResult r = run_process(program_args(p, o, round), o.timeout_s);
      pr.seconds += r.seconds;
      if (r.failed_to_start) {
        pr.status = Status::bad_output;
        pr.message = "could not start: " + r.err;
      } else if (r.timed_out) {
        pr.status = Status::timeout;
        pr.message = "no result within --timeout " + std::to_string(static_cast<int>(o.timeout_s)) + " s";
      } else if (r.signal) {
        pr.status = Status::crash;
        pr.message = "killed by " + signal_name(r.signal);
      } else if (r.exit_code == lab::kExitNoDevice) {
        c.no_gpu = true;
        c.no_gpu_message = failure_message(r.err);
        pr.status = Status::no_gpu;
        pr.message = c.no_gpu_message;
        progress << "NO-GPU\n";
        c.seconds = elapsed();
        return c;  // nothing else can run either
      } else if (r.exit_code == lab::kExitUsage) {
        pr.status = Status::usage;
        pr.message = failure_message(r.err);
      } else if (r.exit_code == lab::kExitWrongResult) {
        pr.status = Status::wrong;
        pr.message = failure_message(r.err);
      } else if (r.exit_code == lab::kExitOk || r.exit_code == lab::kExitOutOfMemory) {
        try {
          const BenchmarkRun run = parse_benchmark_json(r.out);
          add_samples(pr, run, round);
          for (const auto& [key, value] : run.context)
            if (key.rfind(lab::context::kPrefix, 0) == 0 && !c.context.count(key)) c.context[key] = value;
          if (r.exit_code == lab::kExitOutOfMemory && run.errors.empty()) {
            pr.status = Status::oom;
            pr.message = failure_message(r.err);
          }
        } catch (const std::exception& e) {
          const bool oom = r.exit_code == lab::kExitOutOfMemory;
          pr.status = oom ? Status::oom : Status::bad_output;
          pr.message = oom ? failure_message(r.err) : e.what();
        }
      } else {
        pr.status = Status::crash;
        pr.message = "exit status " + std::to_string(r.exit_code) + ": " + failure_message(r.err);
      }
      progress << status_name(pr.status) << " (" << std::fixed << std::setprecision(1) << r.seconds << " s; elapsed "
               << elapsed() << " s)" << std::defaultfloat << "\n"
               << std::flush;
    }
  }
  c.seconds = elapsed();
  return c;
}

std::vector<std::vector<double>> sample_groups(const Cell& c) {
  if (c.rounds.size() != c.samples.size()) return {c.samples};
  std::map<int, std::vector<double>> by_round;
  for (std::size_t i = 0; i < c.samples.size(); ++i) by_round[c.rounds[i]].push_back(c.samples[i]);
  std::vector<std::vector<double>> out;
  for (auto& [round, v] : by_round) out.push_back(std::move(v));
  return out;
}

std::string verdict_for(double speedup, double lo, double hi, double p) {
  if (!(speedup > 0) || std::isnan(lo) || std::isnan(hi) || std::isnan(p)) return "NOISY";
  const bool significant = p < 0.05 && (lo > 1.0 || hi < 1.0);
  if (significant && speedup >= 1.02) return "FASTER";
  if (significant && speedup <= 1.0 / 1.02) return "SLOWER";
  if (lo >= 1.0 / 1.05 && hi <= 1.05) return "SAME";
  return "NOISY";
}

namespace {

const Cell* cell(const ProgramResult& pr, const std::string& shape) {
  auto it = pr.shapes.find(shape);
  return it == pr.shapes.end() ? nullptr : &it->second;
}

// Why a side has no usable samples at a shape, or "" when it has.
std::string unusable(const ProgramResult& pr, const std::string& shape, Status& status) {
  if (pr.status != Status::ok) {
    status = pr.status;
    return pr.program->name + ": " + pr.message;
  }
  const Cell* c = cell(pr, shape);
  if (!c) {
    status = Status::bad_output;
    return pr.program->name + ": no result for " + shape;
  }
  if (c->status != Status::ok) {
    status = c->status;
    return pr.program->name + ": " + c->message;
  }
  if (c->samples.empty()) {
    status = Status::bad_output;
    return pr.program->name + ": no samples for " + shape;
  }
  return "";
}

Row compare_pair(const ProgramResult& base, const ProgramResult& var, const std::string& shape, const std::string& kind,
                 std::uint64_t seed) {
  Row r;
  r.chapter = var.program->chapter;
  r.topic = var.program->topic;
  r.shape = shape;
  r.variant = var.program->name;
  r.against = base.program->name;
  r.kind = kind;
  Status st = Status::ok;
  std::string why = unusable(base, shape, st);
  if (why.empty()) why = unusable(var, shape, st);
  if (!why.empty()) {
    r.status = st;
    r.verdict = status_name(st);
    r.message = why;
    return r;
  }
  const Cell& b = *cell(base, shape);
  const Cell& v = *cell(var, shape);
  r.n_base = b.samples.size();
  r.n_var = v.samples.size();
  r.base_median = lab::stats::median(b.samples);
  r.var_median = lab::stats::median(v.samples);
  r.speedup = r.base_median / r.var_median;
  // Resampling whole rounds: samples of one process are not independent (see stats.hpp).
  const auto ci = lab::stats::bootstrap_median_ratio_ci_grouped(sample_groups(b), sample_groups(v), 0.95, 4000, seed);
  r.ci_lo = ci.lo;
  r.ci_hi = ci.hi;
  {
    // Round r of each side, for the rounds both have (a side's round can be missing: its run failed).
    std::map<int, std::vector<double>> rb, rv;
    if (b.rounds.size() == b.samples.size() && v.rounds.size() == v.samples.size()) {
      for (std::size_t i = 0; i < b.samples.size(); ++i) rb[b.rounds[i]].push_back(b.samples[i]);
      for (std::size_t i = 0; i < v.samples.size(); ++i) rv[v.rounds[i]].push_back(v.samples[i]);
    }
    std::vector<std::vector<double>> gb, gv;
    for (auto& [round, samples] : rb)
      if (auto it = rv.find(round); it != rv.end()) gb.push_back(std::move(samples)), gv.push_back(std::move(it->second));
    // Never narrower than the bootstrap's: rounds that agree exactly (a fake program, a coarse
    // timer) would give a zero-width interval that no other run could overlap.
    const auto rounds = lab::stats::round_ratio_t_interval(gb, gv);
    if (!std::isnan(rounds.lo)) {
      r.round_lo = std::min(rounds.lo, r.ci_lo);
      r.round_hi = std::max(rounds.hi, r.ci_hi);
    }
  }
  r.p = lab::stats::mann_whitney_u(b.samples, v.samples).p;
  r.verdict = verdict_for(r.speedup, r.ci_lo, r.ci_hi, r.p);
  if (auto it = v.counters.find("GB/s"); it != v.counters.end() && !it->second.empty())
    r.gbs = lab::stats::median(it->second);
  auto host_share = [](const Cell& c) {
    const auto it = c.counters.find(lab::kHostShareCounter);
    return it == c.counters.end() || it->second.empty() ? NAN : lab::stats::median(it->second);
  };
  r.base_host_share = host_share(b);
  r.var_host_share = host_share(v);
  if (!std::isnan(r.base_host_share) && !std::isnan(r.var_host_share))
    r.bound = r.base_host_share < lab::kHostBoundShare && r.var_host_share < lab::kHostBoundShare ? "GPU" : "host";
  return r;
}

Row failure_row(const ProgramResult& pr, const std::string& topic, const std::string& shape) {
  Row r;
  r.chapter = pr.program->chapter;
  r.topic = topic;
  r.shape = shape;
  r.variant = pr.program->name;
  r.status = pr.status;
  r.verdict = status_name(pr.status);
  r.message = pr.message;
  return r;
}

}  // namespace

Analysis analyse(const Collected& c, std::uint64_t seed) {
  Analysis a;
  // Group by topic, keeping run order (baseline, steps, optimized, library).
  std::vector<std::string> topics;
  std::map<std::string, std::vector<const ProgramResult*>> by_topic;
  for (const auto& pr : c.programs) {
    const std::string t = pr.program->topic.empty() ? pr.program->name : pr.program->topic;
    if (!by_topic.count(t)) topics.push_back(t);
    by_topic[t].push_back(&pr);
    if (pr.status != Status::ok) a.any_failure = true;
    for (const auto& [shape, cl] : pr.shapes)
      if (cl.status != Status::ok && cl.status != Status::not_applicable) a.any_failure = true;
  }
  std::map<int, std::vector<double>> final_speedups;
  std::map<int, std::string> folders;
  for (const auto& t : topics) {
    const auto& progs = by_topic[t];
    const ProgramResult* base = nullptr;
    const ProgramResult* lib = nullptr;
    std::vector<const ProgramResult*> opt;
    for (const auto* pr : progs) {
      const std::string& role = pr->program->role;
      if (role == "baseline" && !base) base = pr;
      else if (role == "optimized") opt.push_back(pr);
      else if (role == "library" && !lib) lib = pr;
    }
    // The shapes, in the order the programs reported them.
    std::vector<std::string> shapes;
    for (const auto* pr : progs)
      for (const auto& s : pr->shape_order)
        if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
    if (shapes.empty()) shapes.push_back("(none)");
    for (const auto& shape : shapes) {
      // The final speedup at a shape: the last optimized variant's, or where it does not apply
      // (N/A), the last one's that does; none when a variant that applies failed.
      double final_speedup = NAN;
      bool final_valid = true;
      int final_chapter = 0;
      for (std::size_t i = 0; i < opt.size(); ++i) {
        if (base) {
          Row r = compare_pair(*base, *opt[i], shape, "vs baseline", seed);
          final_chapter = r.chapter;
          if (r.status == Status::ok) final_speedup = r.speedup, final_valid = true;
          else if (r.status != Status::not_applicable) final_valid = false;
          if (i + 1 == opt.size() && final_valid && !std::isnan(final_speedup))
            final_speedups[final_chapter].push_back(final_speedup);
          folders[r.chapter] = opt[i]->program->folder;
          a.rows.push_back(std::move(r));
        }
        if (i > 0) a.rows.push_back(compare_pair(*opt[i - 1], *opt[i], shape, "vs previous step", seed));
        if (lib && i + 1 == opt.size()) a.rows.push_back(compare_pair(*lib, *opt[i], shape, "vs library", seed));
      }
      if (lib && base) a.rows.push_back(compare_pair(*base, *lib, shape, "vs baseline", seed));
      // A lone baseline that failed is still a row.
      if (opt.empty() && !lib && base && base->status != Status::ok) a.rows.push_back(failure_row(*base, t, shape));
    }
    // Programs with no pair at all (no baseline): failures must still show.
    if (!base)
      for (const auto* pr : progs)
        if (pr->status != Status::ok) a.rows.push_back(failure_row(*pr, t, ""));
  }
  for (const auto& r : a.rows)
    if (r.status != Status::ok && r.status != Status::not_applicable) a.any_failure = true;
  for (const auto& [ch, v] : final_speedups) {
    ChapterSummary s;
    s.chapter = ch;
    s.folder = folders[ch];
    s.matched = static_cast<int>(v.size());
    s.geomean = v.empty() ? NAN : lab::stats::geomean(v);
    a.chapters.push_back(s);
  }
  return a;
}

std::vector<Change> against(const std::string& text, const Collected& now, bool ignore_device, std::string& error) {
  std::vector<Change> out;
  nlohmann::json prev;
  try {
    prev = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    error = std::string("the previous run is not valid JSON: ") + e.what();
    return out;
  }
  const std::string prev_uuid = prev.value("device", nlohmann::json::object()).value("uuid", "");
  const auto it = now.context.find("lab_device_uuid");
  const std::string now_uuid = it == now.context.end() ? "" : it->second;
  if (!ignore_device && prev_uuid != now_uuid) {
    error = "the previous run was on another device (" + prev.value("device", nlohmann::json::object()).value("name", "?") +
            ", " + prev_uuid + "); pass --ignore-device to compare anyway";
    return out;
  }
  for (const auto& pp : prev.value("programs", nlohmann::json::array())) {
    const std::string name = pp.value("program", "");
    const ProgramResult* cur = nullptr;
    for (const auto& pr : now.programs)
      if (pr.program->name == name) cur = &pr;
    if (!cur) continue;
    for (const auto& ps : pp.value("shapes", nlohmann::json::array())) {
      const std::string shape = ps.value("shape", "");
      const auto cit = cur->shapes.find(shape);
      Cell before;
      before.samples = ps.value("samples_s", std::vector<double>{});
      before.rounds = ps.value("rounds", std::vector<int>{});
      const auto& samples = before.samples;
      if (cit == cur->shapes.end() || cit->second.samples.empty() || samples.empty()) continue;
      Change ch;
      ch.program = name;
      ch.shape = shape;
      ch.before = lab::stats::median(samples);
      ch.after = lab::stats::median(cit->second.samples);
      ch.ratio = ch.before / ch.after;
      // Between two runs the unit of independence is the process: with 4 or more rounds a side the
      // test compares the rounds' medians (a busy host slows a whole process, not one sample).
      const auto gb = sample_groups(before), ga = sample_groups(cit->second);
      if (gb.size() >= 4 && ga.size() >= 4) {
        std::vector<double> mb, ma;
        for (const auto& g : gb) mb.push_back(lab::stats::median(g));
        for (const auto& g : ga) ma.push_back(lab::stats::median(g));
        ch.p = lab::stats::mann_whitney_u(mb, ma).p;
      } else {
        ch.p = lab::stats::mann_whitney_u(samples, cit->second.samples).p;
      }
      const auto ci = lab::stats::bootstrap_median_ratio_ci_grouped(gb, ga, 0.95, 4000, 1);
      const std::string v = verdict_for(ch.ratio, ci.lo, ci.hi, ch.p);
      ch.verdict = v == "FASTER" ? (ch.ratio >= 1.05 ? "IMPROVED" : "SAME")
                   : v == "SLOWER" ? (ch.ratio <= 1 / 1.05 ? "REGRESSED" : "SAME")
                                   : v;
      out.push_back(ch);
    }
  }
  return out;
}

void validate_previous_run(const std::string& text) {
  nlohmann::json prev;
  try {
    prev = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("not valid JSON: ") + e.what());
  }
  if (!prev.is_object()) throw std::runtime_error("not a compare --json file (the top level is not an object)");
  for (const char* key : {"rows", "programs"})
    if (!prev.contains(key) || !prev[key].is_array())
      throw std::runtime_error(std::string("not a compare --json file (no '") + key + "' array)");
  for (const auto& r : prev["rows"])
    if (!r.is_object() || !r.contains("variant") || !r.contains("shape") || !r.contains("kind"))
      throw std::runtime_error("not a compare --json file (a row without variant, kind and shape)");
}

Agreement row_agreement(const std::string& text, const Analysis& now) {
  Agreement a;
  nlohmann::json prev;
  try {
    prev = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the previous run is not valid JSON: ") + e.what());
  }
  std::map<std::string, const nlohmann::json*> before;
  auto key = [](const std::string& v, const std::string& k, const std::string& ag, const std::string& s) {
    return v + "|" + k + "|" + ag + "|" + s;
  };
  if (!prev.is_object() || !prev.contains("rows") || !prev["rows"].is_array())
    throw std::runtime_error("the previous run has no rows (not a compare --json file)");
  for (const auto& r : prev["rows"])  // pointers into prev: no copy of the array
    before[key(r.value("variant", ""), r.value("kind", ""), r.value("against", ""), r.value("shape", ""))] = &r;
  for (const auto& r : now.rows) {
    const auto it = before.find(key(r.variant, r.kind, r.against, r.shape));
    if (it == before.end()) continue;
    const nlohmann::json& o = *it->second;
    RowChange c;
    c.variant = r.variant;
    c.kind = r.kind;
    c.against = r.against;
    c.shape = r.shape;
    c.verdict_before = o.value("verdict", "");
    c.verdict_after = r.verdict;
    if (o.contains("speedup") && o["speedup"].is_number()) c.before = o["speedup"].get<double>();
    c.after = r.speedup;
    if (!(c.before > 0 && c.after > 0)) continue;  // a failure row: its status already says so
    c.diff_pct = 100.0 * (c.after / c.before - 1.0);
    c.within_ci = c.before >= r.ci_lo && c.before <= r.ci_hi;
    auto pair_at = [&](const char* k, double& lo, double& hi) {
      if (!o.contains(k) || !o[k].is_array() || o[k].size() != 2 || !o[k][0].is_number() || !o[k][1].is_number())
        return false;
      lo = o[k][0].get<double>(), hi = o[k][1].get<double>();
      return true;
    };
    // Round-level intervals on both sides where both have one; a previous run saved without one (or
    // a run of one round) falls back to the bootstrap intervals.
    const bool rounds_now = !std::isnan(r.round_lo) && !std::isnan(r.round_hi);
    if (rounds_now && pair_at("round_ci95", c.before_lo, c.before_hi)) {
      c.after_lo = r.round_lo, c.after_hi = r.round_hi;
      c.intervals_overlap = c.before_lo <= c.after_hi && c.after_lo <= c.before_hi;
    } else if (pair_at("ci95", c.before_lo, c.before_hi)) {
      c.after_lo = r.ci_lo, c.after_hi = r.ci_hi;
      c.intervals_overlap = c.before_lo <= c.after_hi && c.after_lo <= c.before_hi;
    } else {
      c.after_lo = r.ci_lo, c.after_hi = r.ci_hi;
      c.intervals_overlap = c.within_ci;  // no interval saved: this run's alone
    }
    c.bound = r.bound;
    if (r.bound == "GPU") {
      c.rule = "within 5%";
      c.agrees = std::fabs(c.diff_pct) <= kGpuBoundAgreementPct;
    } else {
      c.rule = "intervals overlap";
      c.agrees = c.intervals_overlap;
    }
    a.rows.push_back(c);
  }
  for (const auto& c : a.rows) {
    if (c.verdict_before != c.verdict_after) ++a.verdicts_differ;
    if (std::fabs(c.diff_pct) > 5.0) ++a.over_5pct;
    if (c.bound == "GPU") {
      ++a.gpu_rows;
      if (!c.agrees) ++a.gpu_failed;
    } else {
      ++a.host_rows;
      if (!c.agrees) ++a.host_failed;
    }
    if (!std::isnan(c.diff_pct) && (!a.largest || std::fabs(c.diff_pct) > std::fabs(a.largest->diff_pct)))
      a.largest = &c;
  }
  return a;
}

}  // namespace compare
