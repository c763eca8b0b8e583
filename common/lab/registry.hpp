// Topics and variants. A topic is a problem (shapes, inputs, reference, work counts); a variant is
// one implementation of it. A variant file registers itself with one macro, LAB_VARIANT, and the
// shared main, the chapter test binary and compare all read this registry: nothing lists variants
// by hand.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "lab/rng.hpp"
#include "lab/verify.hpp"

namespace lab {

// A problem size: row-major extents named by the topic ("rows", "cols"). Written "1000x777".
struct Shape {
  std::vector<std::int64_t> dims;
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> d) : dims(d) {}
  explicit Shape(std::vector<std::int64_t> d) : dims(std::move(d)) {}
  std::size_t rank() const { return dims.size(); }
  std::int64_t operator[](std::size_t i) const { return dims.at(i); }
  // Product of the extents; a switch (0 or 1: extents are positive) counts as 1.
  std::int64_t elements() const;
  std::string str() const;
  bool operator==(const Shape&) const = default;
};

// Parses "RxC" (rank numbers joined by 'x'). Throws UsageError naming the flag and the problem:
// wrong count, not a number, zero or negative, or an element count that overflows 64 bits. A dim
// named in `switches` is an on/off option carried in the shape (attention's "causal"): 0 or 1.
Shape parse_shape(std::string_view text, std::span<const std::string> dim_names, std::string_view flag = "--shape",
                  std::span<const std::string> switches = {});

// The least work a shape needs: bytes that must cross device memory (each input read once, each
// output written once) and algorithmic floating-point operations. Every variant of a topic is
// measured in these units, so their GB/s and TFLOP/s compare like with like.
struct Work {
  double bytes = 0;
  double flops = 0;
};

// One shape's device state, made by the topic: inputs filled from an Rng, outputs allocated.
class Problem {
 public:
  virtual ~Problem() = default;
  virtual void poison(cudaStream_t stream) = 0;  // NaN into every output element
  virtual Verdict verify() = 0;                  // reference in double against the outputs
  // Extra counters for the timing table, given the measured GPU seconds per iteration: overlap
  // efficiency, microseconds per kernel, samples per second... Called once per timed shape,
  // after timing; it may run more work of its own (never inside the timed region).
  virtual std::vector<std::pair<std::string, double>> counters(double /*seconds*/, cudaStream_t) { return {}; }

  // A variant that computes an approximation on purpose (a tanh-form GELU, tensor-core inputs)
  // names its own tolerance when it runs; verify() uses it instead of the topic's default. The
  // tolerance's name appears in every verdict, so the reader sees which one judged the result.
  std::optional<Tolerance> tolerance_override;
  Tolerance tolerance_or(Tolerance topic_default) const { return tolerance_override.value_or(topic_default); }
};

enum class Role { baseline, optimized, library };
const char* role_name(Role);

struct TopicInfo {
  std::string name;
  int chapter = 0;
  std::vector<std::string> dims;
  std::vector<std::string> switches;  // dims that are 0/1 options (causal masking), not extents
  std::vector<Shape> sweep;   // timed by default
  std::vector<Shape> checks;  // verified always, awkward sizes included
  std::function<Work(const Shape&)> work;
  std::function<std::unique_ptr<Problem>(const Shape&, Rng&)> make;
  // Topic-specific limits on a shape; returns "" when the shape is acceptable.
  std::function<std::string(const Shape&)> validate;
  // Whether a timed shape can be checked against the reference at all (beyond the cost limits).
  std::function<bool(const Shape&)> verifiable;
  std::string folder() const;  // "ch01_basics"
};

struct Variant {
  std::string program;      // the file stem and program name, e.g. "optimized_coalescing"
  Role role = Role::baseline;
  int step = 0;             // order among a topic's optimized variants (intermediate steps first)
  std::string description;  // the one thing it changes
  const TopicInfo* topic = nullptr;
  std::function<void(Problem&, cudaStream_t)> run;
};

// Chapter number -> folder name ("ch01_basics"); "" for an unknown chapter.
std::string chapter_folder(int chapter);

class Registry {
 public:
  static Registry& global();  // what LAB_VARIANT registers into
  // Adds a topic once; later calls with the same name return the first.
  const TopicInfo& add_topic(TopicInfo t);
  // Adds a variant; throws Error when the program name is taken.
  const Variant& add(Variant v);
  std::vector<const Variant*> variants() const;  // in topic, role, step order
  const Variant* find(std::string_view program) const;
  std::vector<const Variant*> of_topic(std::string_view topic) const;

 private:
  std::vector<std::unique_ptr<TopicInfo>> topics_;
  std::vector<std::unique_ptr<Variant>> variants_;
};

// "path/to/optimized_coalescing.cu" -> "optimized_coalescing".
std::string program_name_from_path(std::string_view path);

// The topic's description for the registry, from its static members:
//   name, chapter, dims(), sweep(), checks(), work(shape), Problem(shape, rng), optional validate(shape),
//   verifiable(shape) and switches().
template <class T>
TopicInfo topic_info() {
  TopicInfo t;
  t.name = T::name;
  t.chapter = T::chapter;
  t.dims = T::dims();
  if constexpr (requires { T::switches(); }) t.switches = T::switches();
  t.sweep = T::sweep();
  t.checks = T::checks();
  t.work = [](const Shape& s) { return T::work(s); };
  t.make = [](const Shape& s, Rng& r) -> std::unique_ptr<Problem> { return std::make_unique<typename T::Problem>(s, r); };
  if constexpr (requires(const Shape& s) { T::validate(s); }) {
    t.validate = [](const Shape& s) { return std::string(T::validate(s)); };
  } else {
    t.validate = [](const Shape&) { return std::string(); };
  }
  if constexpr (requires(const Shape& s) { T::verifiable(s); }) {
    t.verifiable = [](const Shape& s) { return static_cast<bool>(T::verifiable(s)); };
  } else {
    t.verifiable = [](const Shape&) { return true; };
  }
  return t;
}

template <class T>
const Variant& register_variant(Registry& reg, std::string program, Role role, int step, std::string description,
                                void (*fn)(typename T::Problem&, cudaStream_t)) {
  Variant v;
  v.program = std::move(program);
  v.role = role;
  v.step = step;
  v.description = std::move(description);
  v.topic = &reg.add_topic(topic_info<T>());
  v.run = [fn](Problem& p, cudaStream_t s) { fn(static_cast<typename T::Problem&>(p), s); };
  return reg.add(std::move(v));
}

inline constexpr int kFinalStep = 1000;

}  // namespace lab

#define LAB_DETAIL_VARIANT(Topic, role, step, description)                                                 \
  static void lab_variant_run(Topic::Problem& p, cudaStream_t stream);                                      \
  [[maybe_unused]] static const ::lab::Variant* lab_variant_registration = &::lab::register_variant<Topic>( \
      ::lab::Registry::global(), ::lab::program_name_from_path(__FILE__), ::lab::Role::role, step,          \
      description, &lab_variant_run);                                                                       \
  static void lab_variant_run([[maybe_unused]] Topic::Problem& p, [[maybe_unused]] cudaStream_t stream)

// Registers this file's variant of Topic and opens its run function, whose parameters are
// `p` (Topic::Problem&: inputs, outputs, shape) and `stream` (the stream to launch on).
//   LAB_VARIANT(Transpose, optimized, "shared-memory tile with padding") { kernel<<<g, b, 0, stream>>>(...); }
// role: baseline, optimized or library. One variant per file; the program takes the file's name.
#define LAB_VARIANT(Topic, role, description) LAB_DETAIL_VARIANT(Topic, role, ::lab::kFinalStep, description)

// An intermediate optimized step (1, 2, ...), listed before the final optimized variant.
#define LAB_VARIANT_STEP(Topic, step, description) LAB_DETAIL_VARIANT(Topic, optimized, step, description)
