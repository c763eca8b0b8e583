#include "lab/registry.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "lab/check.hpp"
#include "lab/contract.hpp"

namespace lab {

std::int64_t Shape::elements() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= std::max<std::int64_t>(d, 1);
  return n;
}

std::string Shape::str() const {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

Shape parse_shape(std::string_view text, std::span<const std::string> dim_names, std::string_view flag,
                  std::span<const std::string> switches) {
  std::string names;
  for (std::size_t i = 0; i < dim_names.size(); ++i) {
    if (i) names += 'x';
    names += dim_names[i];
  }
  const std::string where = std::string(flag) + " " + std::string(text) + ": ";
  const std::string expect = "expected " + std::to_string(dim_names.size()) + " positive integers joined by 'x' (" + names + ")";
  std::vector<std::int64_t> dims;
  std::size_t pos = 0;
  while (true) {
    const std::size_t x = text.find('x', pos);
    const std::string_view part = text.substr(pos, x == std::string_view::npos ? std::string_view::npos : x - pos);
    if (part.empty()) throw UsageError(where + expect);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec == std::errc::result_out_of_range)
      throw UsageError(where + "'" + std::string(part) + "' does not fit in 64 bits");
    if (ec != std::errc() || end != part.data() + part.size())
      throw UsageError(where + "'" + std::string(part) + "' is not an integer; " + expect);
    const std::size_t i = dims.size();
    const bool is_switch =
        i < dim_names.size() && std::find(switches.begin(), switches.end(), dim_names[i]) != switches.end();
    if (is_switch && v != 0 && v != 1)
      throw UsageError(where + dim_names[i] + " is a switch: 0 (off) or 1 (on), got " + std::to_string(v));
    if (!is_switch && v <= 0) throw UsageError(where + "every extent must be positive, got " + std::to_string(v));
    dims.push_back(v);
    if (x == std::string_view::npos) break;
    pos = x + 1;
  }
  if (dims.size() != dim_names.size())
    throw UsageError(where + "got " + std::to_string(dims.size()) + " numbers; " + expect);
  std::int64_t n = 1;
  for (auto d : dims) {
    if (d == 0) continue;  // a switch that is off
    if (n > std::numeric_limits<std::int64_t>::max() / 16 / d)  // leave room for bytes per element
      throw UsageError(where + "the element count overflows 64-bit arithmetic");
    n *= d;
  }
  return Shape(std::move(dims));
}

bool reference_can_verify(const TopicInfo& t, const Shape& s) {
  // (A TopicInfo made by hand, as some tests make one, may leave the functions empty.)
  const Work w = t.reference_work ? t.reference_work(s) : t.work ? t.work(s) : Work{};
  return w.bytes <= kVerifyBytesLimit && w.flops <= kVerifyFlopsLimit && (!t.verifiable || t.verifiable(s));
}

const char* role_name(Role r) {
  switch (r) {
    case Role::baseline: return "baseline";
    case Role::optimized: return "optimized";
    case Role::library: return "library";
  }
  return "?";
}

std::string chapter_folder(int chapter) {
  switch (chapter) {
    case 1: return "ch01_basics";
    case 2: return "ch02_profiling";
    case 3: return "ch03_kernels";
    case 4: return "ch04_compile_vs_fused";
    default: return "";
  }
}

std::string TopicInfo::folder() const { return chapter_folder(chapter); }

std::string program_name_from_path(std::string_view path) {
  const auto slash = path.find_last_of("/\\");
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  const auto dot = path.find('.');
  path = path.substr(0, dot);
  // A ladder's sort key ("03_", "03a_": digits, then lower-case letters, then '_') is not part of
  // the program's name (cmake/Lab.cmake strips it the same way).
  std::size_t i = 0;
  while (i < path.size() && path[i] >= '0' && path[i] <= '9') ++i;
  if (i > 0) {
    std::size_t j = i;
    while (j < path.size() && path[j] >= 'a' && path[j] <= 'z') ++j;
    if (j < path.size() && path[j] == '_') path.remove_prefix(j + 1);
  }
  return std::string(path);
}

std::string storage_twin_name(std::string program, std::string_view suffix) {
  if (suffix.empty()) return program;
  bool named_for_bf16 = false;  // each "_bf16" that is a word of the name (as CMake's REGEX REPLACE)
  for (std::size_t at = program.find("_bf16"); at != std::string::npos; at = program.find("_bf16", at + 1)) {
    if (at + 5 == program.size() || program[at + 5] == '_') {
      program.replace(at, 5, suffix);
      named_for_bf16 = true;
    }
  }
  return named_for_bf16 ? program : program + std::string(suffix);
}

const Declared Problem::kNothingDeclared{};

bool Declared::writes_output(std::string_view name) const {
  return std::find(writes.begin(), writes.end(), name) != writes.end();
}

Registry& Registry::global() {
  static Registry r;
  return r;
}

const TopicInfo& Registry::add_topic(TopicInfo t) {
  for (const auto& have : topics_)
    if (have->name == t.name) {
      if (have->chapter != t.chapter)
        problems_.push_back("topic '" + t.name + "' registered in chapters " + std::to_string(have->chapter) +
                            " and " + std::to_string(t.chapter));
      return *have;
    }
  topics_.push_back(std::make_unique<TopicInfo>(std::move(t)));
  return *topics_.back();
}

const Variant& Registry::add(Variant v) {
  std::string problem;
  if (v.program.empty()) problem = "variant with an empty program name";
  else if (!v.topic) problem = "variant '" + v.program + "' has no topic";
  else if (registered(v.program)) problem = "variant '" + v.program + "' registered twice";
  else if (!v.prepare) problem = "variant '" + v.program + "' has no prepare step";
  else if (v.declared.tolerance && !v.topic->reads_tolerance)
    problem = "variant '" + v.program + "' declares a tolerance (" + v.declared.tolerance->name + "), which topic '" +
              v.topic->name + "''s check does not read (it would be judged by the topic's own bound): the topic " +
              "reads it with Problem::tolerance_or and says so with `static constexpr bool reads_declared_tolerance = true`";
  // Its own check shapes: the topic's kind of shape, and within what the reference can verify.
  if (problem.empty())
    for (const Shape& s : v.declared.checks) {
      std::string why = s.rank() != v.topic->dims.size() ? "not " + std::to_string(v.topic->dims.size()) + " extents"
                        : v.topic->validate ? v.topic->validate(s) : "";
      if (why.empty() && !reference_can_verify(*v.topic, s)) why = "over the CPU reference's limits or the topic's own";
      if (!why.empty()) {
        problem = "variant '" + v.program + "' declares the check shape " + s.str() + ", which topic '" +
                  v.topic->name + "' cannot verify: " + why;
        break;
      }
    }
  // One baseline, one library and one final optimized variant a topic, and each step number once:
  // the order compare runs and the README lists them is the step order, so a tie is a mistake.
  if (problem.empty())
    for (const auto& have : variants_)
      if (have->topic->name == v.topic->name && have->role == v.role && have->step == v.step) {
        problem = "variants '" + have->program + "' and '" + v.program + "' of topic '" + v.topic->name +
                  "' are both the " + role_name(v.role) +
                  (v.role == Role::optimized && v.step != kFinalStep ? " step " + std::to_string(v.step) : " variant") +
                  ": give each its own step (LAB_VARIANT_STEP)";
        break;
      }
  if (!problem.empty()) {
    problems_.push_back(std::move(problem));
    refused_.push_back(std::make_unique<Variant>(std::move(v)));
    return *refused_.back();
  }
  if (!v.supports) v.supports = [](const Shape&, const DeviceFacts&) { return std::string(); };
  variants_.push_back(std::make_unique<Variant>(std::move(v)));
  return *variants_.back();
}

void Registry::throw_if_refused() const {
  if (problems_.empty()) return;
  std::string all = "this program's variants do not register: ";
  for (std::size_t i = 0; i < problems_.size(); ++i) all += (i ? "; " : "") + problems_[i];
  throw Error(all, kExitUsage);
}

const Variant* Registry::registered(std::string_view program) const {
  for (const auto& v : variants_)
    if (v->program == program) return v.get();
  return nullptr;
}

std::vector<const Variant*> Registry::variants() const {
  throw_if_refused();
  std::vector<const Variant*> out;
  for (const auto& v : variants_) out.push_back(v.get());
  std::stable_sort(out.begin(), out.end(), [](const Variant* a, const Variant* b) {
    if (a->topic->chapter != b->topic->chapter) return a->topic->chapter < b->topic->chapter;
    if (a->topic->name != b->topic->name) return a->topic->name < b->topic->name;
    if (a->role != b->role) return a->role < b->role;
    if (a->step != b->step) return a->step < b->step;
    return a->program < b->program;
  });
  return out;
}

const Variant* Registry::find(std::string_view program) const {
  throw_if_refused();
  return registered(program);
}

std::vector<const Variant*> Registry::of_topic(std::string_view topic) const {
  std::vector<const Variant*> out;
  for (const Variant* v : variants())
    if (v->topic->name == topic) out.push_back(v);
  return out;
}

}  // namespace lab
