// The build's manifest (every program, its chapter and path), the programs' own --describe, and
// the selection of what to run (--chapter, --topic, --all).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "compare.hpp"
#include "lab/contract.hpp"
#include "lab/harness.hpp"
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
    g.after = p.value("after", "");
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
      p.describe_error = "--describe failed (" +
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
      p.describe_error = std::string("--describe printed no valid description: ") + e.what();
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

bool shapes_refused(const std::vector<const Program*>& programs, const std::vector<std::string>& shapes,
                    double timeout_s, std::string& refused) {
  std::set<std::string> topics;
  for (const Program* p : programs) {
    // A program not built cannot read a shape (the run reports it NOT-BUILT): the next of its
    // topic that is built judges the shapes.
    if (p->kind == "demo" || !p->built || !topics.insert(p->topic).second) continue;
    std::vector<std::string> argv{p->path, "--describe"};
    for (const auto& shape : shapes) argv.insert(argv.end(), {"--shape", shape});
    const ProcessResult r = run_process(argv, timeout_s);
    if (r.exit_code == lab::kExitOk) continue;
    std::string why = r.err;
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (const auto at = why.rfind('\n'); at != std::string::npos) why = why.substr(at + 1);
    if (why.rfind("error: ", 0) == 0) why = why.substr(7);
    refused = "--shape, for topic " + p->topic + " (" + p->name + "): " +
              (why.empty() ? "refused, exit status " + std::to_string(r.exit_code) : why) +
              (topics.size() > 1 || programs.size() > 1 ? " (--topic picks the topic a shape is for)" : "");
    return false;
  }
  return true;
}

std::vector<const Program*> select_programs(const Manifest& m, const Selection& s) {
  std::vector<const Program*> out;
  for (const auto& p : m.programs) {
    if (s.chapter && !chapter_matches(p, *s.chapter)) continue;
    if (s.topic && p.topic != *s.topic) continue;
    if (s.subfolder) {
      std::string under = *s.subfolder;
      while (!under.empty() && under.back() == '/') under.pop_back();
      if (!p.source.starts_with(p.folder + "/" + under + "/")) continue;
    }
    out.push_back(&p);
  }
  if (out.empty()) {
    // The topics listed are the chapter's where --chapter names one; a --topic of another chapter
    // is said to be there.
    std::set<std::string> chapters, topics, topic_elsewhere;
    std::string chapter_folder;
    for (const auto& p : m.programs) {
      chapters.insert(p.folder);
      const bool in_chapter = !s.chapter || chapter_matches(p, *s.chapter);
      if (in_chapter && chapter_folder.empty()) chapter_folder = p.folder;
      if (p.topic.empty()) continue;
      if (in_chapter) topics.insert(p.topic);
      else if (s.topic && p.topic == *s.topic) topic_elsewhere.insert(p.folder);
    }
    std::string have = "chapters:";
    for (const auto& c : chapters) have += " " + c;
    have += s.chapter && !chapter_folder.empty() ? "; topics in " + chapter_folder + ":" : "; topics:";
    for (const auto& t : topics) have += " " + t;
    if (!topic_elsewhere.empty()) {
      have += "; --topic " + *s.topic + " is in";
      for (const auto& c : topic_elsewhere) have += " " + c;
    }
    // A program not built cannot say its topic: say so, and how to build, rather than list fewer.
    const auto unbuilt_here = [&](const Program& p) { return !p.built && (!s.chapter || chapter_matches(p, *s.chapter)); };
    const auto unbuilt = std::count_if(m.programs.begin(), m.programs.end(), unbuilt_here);
    if (unbuilt > 0) {
      const auto first = std::find_if(m.programs.begin(), m.programs.end(), unbuilt_here);
      have += (topics.empty() ? " none known" : "") + std::string("; ") + std::to_string(unbuilt) +
              (unbuilt == 1 ? " program" : " programs") + " whose topic is unknown, " + first->name + ": " +
              first->describe_error;
    }
    if (s.subfolder) {  // the folders --subfolder can name: each program's folder and those above it, in the chapter
      std::set<std::string> folders;
      for (const auto& p : m.programs) {
        if ((s.chapter && !chapter_matches(p, *s.chapter)) || !p.source.starts_with(p.folder + "/")) continue;
        std::string dir = p.source.substr(p.folder.size() + 1);
        for (auto at = dir.rfind('/'); at != std::string::npos; at = dir.rfind('/')) folders.insert(dir = dir.substr(0, at));
      }
      have += "; subfolders:";
      for (const auto& f : folders) have += " " + f;
      if (folders.empty()) have += " none (every program lies in its chapter's own folder)";
    }
    if (s.chapter && std::none_of(m.programs.begin(), m.programs.end(),
                                  [&](const Program& p) { return chapter_matches(p, *s.chapter); })) {
      std::string have;
      for (const auto& c : chapters) have += (have.empty() ? "" : " ") + c;
      throw std::invalid_argument("no chapter " + *s.chapter + " (chapters: " + have + ")");
    }
    throw std::invalid_argument(std::string("nothing matches ") + (s.chapter ? "--chapter " + *s.chapter + " " : "") +
                                (s.topic ? "--topic " + *s.topic + " " : "") +
                                (s.subfolder ? "--subfolder " + *s.subfolder + " " : "") + "(" + have + ")");
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

}  // namespace compare
