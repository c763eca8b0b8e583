// Topics and variants. A topic is a problem (shapes, inputs, reference, work counts); a variant is
// one implementation of it. A variant file registers itself with one macro, LAB_VARIANT, and the
// shared main, the chapter test binary and compare all read this registry: nothing lists variants
// by hand.
#pragma once

#include <any>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "lab/contract.hpp"
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
  // The bytes the inputs and outputs occupy, where that is not `bytes`: less where a buffer updated
  // in place is read and written (counted twice above, held once), more where an input is held but
  // not counted as traffic (the GPT-2 step's tokens). The least device memory any variant needs,
  // which a program checks before it allocates. 0: `bytes`.
  double memory = 0;
  // The part of `bytes` that is written (the outputs), for a report that sets the operation beside
  // a plain kernel moving the same bytes the same way (demo_sweep_report's floor): a loss that
  // reads its logits and writes one number is held to a read of them, not to a copy. Negative:
  // not stated, taken as half (a copy).
  double written = -1;
  double least_memory() const { return memory > 0 ? memory : bytes; }
  double written_bytes() const { return written >= 0 ? written : bytes / 2; }
};

struct DeviceFacts;
struct TopicInfo;

// What a variant declares about itself, beside its kernels: read by the topic's verify and counters,
// printed by --describe. Declared once in the variant's file, never assigned while it runs.
struct Declared {
  // An approximation on purpose (a tanh-form GELU, bf16 tensor-core inputs): the tolerance that
  // judges it instead of the topic's default. Its name appears in every verdict.
  std::optional<Tolerance> tolerance = std::nullopt;
  // The arithmetic of its products, for references that model their rounding: "fp32", "3xtf32",
  // "bf16" (attention's slack).
  std::string precision = "fp32";
  // The optional outputs it writes (attention's "lse"), or the one of several places it writes to
  // (the pinned-memory lesson's "pinned" or "pageable" host buffers); the topic checks those named.
  std::vector<std::string> writes = {};
  // The bytes it moves through device memory per run, where that is more than the topic's minimum
  // (Work::bytes): a lesson about traffic shows both. Reported as moved_GB/s and bytes_x_minimum.
  std::function<double(const Shape&)> moved_bytes = {};
  // The order of its arithmetic at a shape, for references that emulate it (a type the topic
  // defines, in std::any: attention's attn::ForwardSchedule, the tiles of keys over which a bf16
  // forward's online softmax keeps its running maximum, to which its P is rounded).
  std::function<std::any(const Shape&)> schedule = {};
  // Shapes it adds to its topic's check set: where a code path of its own starts that the topic's
  // shapes do not reach (a persistent kernel's blocks run more than one item only where a shape has
  // more items than the GPU has SMs). Verified with the check set (lab::check_set), each a test of
  // the chapter's; within the CPU reference's limits and the topic's own, or the variant is refused.
  std::vector<Shape> checks = {};

  Tolerance tolerance_or(Tolerance topic_default) const { return tolerance.value_or(topic_default); }
  // Its arithmetic is fp32 alone, on the CUDA cores, whose FMA rate the lab measures: only then is
  // its FLOP rate a share of that peak (%peak_fp32). On the tensor cores ("bf16", "3xtf32", or a
  // mix such as "fp32+3xtf32-attention") the FMA rate is no ceiling: a bf16 GPT-2 step ran at 5.8x it.
  bool fp32_fma() const { return precision == "fp32"; }
  bool writes_output(std::string_view name) const;
};

// The tag of a topic's second Problem constructor, Problem(shape, lab::Borrowed{}): the sizes from
// the shape, no inputs drawn, no outputs allocated. The caller points the inputs and outputs at
// memory it owns (DeviceBuffer::borrow) before each run; the Python bridge runs variants this way
// on PyTorch tensors. Buffers a topic keeps for itself (a flag the kernels set) it still allocates.
struct Borrowed {};

// One shape's device state, made by the topic: inputs filled from an Rng, outputs allocated, and
// the reference. It holds nothing of any variant's: a variant's scratch is its own (Instance).
class Problem {
 public:
  virtual ~Problem() = default;
  virtual void poison(cudaStream_t stream) = 0;  // NaN into every output element
  virtual Verdict verify() = 0;                  // reference in double against the outputs
  // Extra counters for the timing table, given the measured GPU seconds per iteration: overlap
  // efficiency, microseconds per kernel, samples per second... Called once per timed shape,
  // after timing; it may run more work of its own (never inside the timed region).
  virtual std::vector<std::pair<std::string, double>> counters(double /*seconds*/, cudaStream_t) { return {}; }

  // What the variant this problem was made for declares (its tolerance, precision, outputs).
  const Declared& declared() const { return *declared_; }
  Tolerance tolerance_or(Tolerance topic_default) const { return declared_->tolerance_or(topic_default); }

 private:
  template <class T>
  friend TopicInfo topic_info();
  static const Declared kNothingDeclared;
  const Declared* declared_ = &kNothingDeclared;
};

// A variant's state for one problem: made by the variant's prepare step (untimed, once a shape,
// before the first run; its device memory counts in peak_MiB), then run as often as the harness
// times it. Its scratch buffers, handles, converted inputs and captured graphs live here.
class Instance {
 public:
  virtual ~Instance() = default;
  virtual void run(Problem& p, cudaStream_t stream) = 0;
  // The variant's own counters (bytes it moved, its compile time...), after timing.
  virtual std::vector<std::pair<std::string, double>> counters(const Problem&, double /*seconds*/) { return {}; }
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
  // Makes the shape's problem for a variant (whose declarations its verify reads).
  std::function<std::unique_ptr<Problem>(const Shape&, Rng&, const Declared&)> make;
  // Topic-specific limits on a shape; returns "" when the shape is acceptable.
  std::function<std::string(const Shape&)> validate;
  // Whether a timed shape can be checked against the reference at all (beyond the cost limits).
  std::function<bool(const Shape&)> verifiable;
  // What the CPU reference itself costs at a shape, which the cost limits bound (kVerifyBytesLimit,
  // kVerifyFlopsLimit): the topic's optional reference_work(shape), else work(shape). A reference
  // that does more than the kernels' work says so: the MLP training check (ch01's
  // performance_basics) trains once in double and 16 times more in Monte Carlo arithmetic.
  std::function<Work(const Shape&)> reference_work;
  // Whether its check judges a variant by the variant's declared tolerance (Problem::tolerance_or):
  // the topic's `static constexpr bool reads_declared_tolerance = true`. A variant that declares a
  // tolerance for a topic whose check does not read it is refused (Registry::add): its own bound
  // would be printed and never applied.
  bool reads_tolerance = false;
  std::string folder() const;  // "ch01_basics"
};

struct Variant {
  std::string program;      // the file stem and program name, e.g. "optimized_coalescing"
  Role role = Role::baseline;
  int step = 0;             // order among a topic's optimized variants (intermediate steps first)
  std::string description;  // the one thing it changes
  const TopicInfo* topic = nullptr;
  Declared declared;
  // "" when it can run the shape on the device, otherwise why not (architecture, head size,
  // memory): a row N/A (reason) in compare, a skipped test, never a wrong result.
  std::function<std::string(const Shape&, const DeviceFacts&)> supports;
  // The untimed prepare step: the variant's state for this problem.
  std::function<std::unique_ptr<Instance>(Problem&, cudaStream_t)> prepare;
};

// Chapter number -> folder name ("ch01_basics"); "" for an unknown chapter.
std::string chapter_folder(int chapter);

class Registry {
 public:
  static Registry& global();  // what LAB_VARIANT registers into
  // Adds a topic once; later calls with the same name return the first.
  const TopicInfo& add_topic(TopicInfo t);
  // Adds a variant. Registration runs before main (LAB_VARIANT's static initializer), where a
  // throw would abort the program with no exit status of its own, so a variant refused (its
  // program name taken, its role and step another variant's, no prepare step, a tolerance its
  // topic's check does not read) is set aside with the reason, and the lookups below throw Error
  // (exit status 2) with every reason, from main.
  const Variant& add(Variant v);
  std::vector<const Variant*> variants() const;  // in topic, role, step order
  const Variant* find(std::string_view program) const;
  std::vector<const Variant*> of_topic(std::string_view topic) const;

 private:
  void throw_if_refused() const;
  const Variant* registered(std::string_view program) const;
  std::vector<std::unique_ptr<TopicInfo>> topics_;
  std::vector<std::unique_ptr<Variant>> variants_;
  std::vector<std::unique_ptr<Variant>> refused_;  // kept so that their registrations point somewhere
  std::vector<std::string> problems_;
};

// "path/to/optimized_coalescing.cu" -> "optimized_coalescing".
std::string program_name_from_path(std::string_view path);

// The name of a program's storage twin (suffix "_bf16" or "_fp16"; "" for the program itself): the
// suffix appended (optimized_layernorm -> optimized_layernorm_fp16), or, for a program named for
// bf16 (optimized_gelu_bf16, optimized_gelu_bf16_in_registers: "_bf16" ending the name or followed
// by '_'), the suffix in place of each such "_bf16" (optimized_gelu_fp16, optimized_gelu_fp16_in_registers).
// cmake/Lab.cmake and python/setup.py name the twins' programs the same way.
std::string storage_twin_name(std::string program, std::string_view suffix);

// The topic's description for the registry, from its static members:
//   name, chapter, dims(), sweep(), checks(), work(shape), Problem(shape, rng), optional validate(shape),
//   verifiable(shape), reference_work(shape), switches() and reads_declared_tolerance.
template <class T>
TopicInfo topic_info() {
  TopicInfo t;
  t.name = T::name;
  t.chapter = T::chapter;
  t.dims = T::dims();
  if constexpr (requires { T::switches(); }) t.switches = T::switches();
  if constexpr (requires { T::reads_declared_tolerance; }) t.reads_tolerance = T::reads_declared_tolerance;
  t.sweep = T::sweep();
  t.checks = T::checks();
  t.work = [](const Shape& s) { return T::work(s); };
  t.make = [](const Shape& s, Rng& r, const Declared& d) -> std::unique_ptr<Problem> {
    auto p = std::make_unique<typename T::Problem>(s, r);
    p->declared_ = &d;
    return p;
  };
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
  if constexpr (requires(const Shape& s) { { T::reference_work(s) } -> std::convertible_to<Work>; }) {
    t.reference_work = [](const Shape& s) { return Work(T::reference_work(s)); };
  } else {
    t.reference_work = t.work;
  }
  return t;
}

// Whether the topic's CPU reference can check a shape: its cost (reference_work) within
// kVerifyBytesLimit and kVerifyFlopsLimit, and the topic's own verifiable(). The check shapes are
// verified whatever this says; timed shapes, the fuzz's shapes and a variant's own check shapes
// only where it says yes.
bool reference_can_verify(const TopicInfo& t, const Shape& s);

// The variant class protocol (register_variant_class below), as concepts. The required members
// make VariantClass; each optional member is looked up by its name, and a class that names one
// must give it the protocol's signature: a `supports` that forgot the DeviceFacts, a `declared`
// that is not static or a `counters` without the seconds is a compile error, not a member the
// registry silently never calls. (A name misspelt outright, `suports`, is a member the protocol
// does not know: C++ cannot list a class's members, so that one the compiler cannot catch.)
namespace protocol {
template <class V>
using ProblemOf = typename V::Topic::Problem;
using Counters = std::vector<std::pair<std::string, double>>;

template <class V>
concept Runs = requires(V& v, ProblemOf<V>& p, cudaStream_t s) { v.run(p, s); };
template <class V>
concept Prepares = std::is_constructible_v<V, ProblemOf<V>&, cudaStream_t> || std::is_constructible_v<V, ProblemOf<V>&> ||
                   std::is_default_constructible_v<V>;
template <class V>
concept NamesDeclared = requires { &V::declared; };
template <class V>
concept Declares = requires { { V::declared() } -> std::convertible_to<Declared>; };
template <class V>
concept NamesSupports = requires { &V::supports; };
template <class V>
concept Supports = requires(const Shape& s, const DeviceFacts& d) { { V::supports(s, d) } -> std::convertible_to<std::string>; };
template <class V>
concept NamesCounters = requires { &V::counters; };
template <class V>
concept Counts = requires(V& v, const ProblemOf<V>& p, double seconds) { { v.counters(p, seconds) } -> std::convertible_to<Counters>; };
}  // namespace protocol

template <class V>
concept VariantClass = requires { typename V::Topic; typename protocol::ProblemOf<V>; } && protocol::Runs<V> &&
                       protocol::Prepares<V> && (!protocol::NamesDeclared<V> || protocol::Declares<V>) &&
                       (!protocol::NamesSupports<V> || protocol::Supports<V>) &&
                       (!protocol::NamesCounters<V> || protocol::Counts<V>);

// Each clause of VariantClass as its own assertion, so that the compiler names the one that failed.
template <class V>
constexpr bool check_variant_class() {
  static_assert(requires { typename V::Topic; }, "a variant class declares `using Topic = <its topic>;`");
  static_assert(protocol::Runs<V>, "a variant class has `void run(Topic::Problem&, cudaStream_t)`");
  static_assert(protocol::Prepares<V>, "a variant class is constructible from (Topic::Problem&, cudaStream_t), "
                                       "(Topic::Problem&) or nothing: its prepare step");
  static_assert(!protocol::NamesDeclared<V> || protocol::Declares<V>,
                "a variant class's `declared` is `static lab::Declared declared()`");
  static_assert(!protocol::NamesSupports<V> || protocol::Supports<V>,
                "a variant class's `supports` is `static std::string supports(const lab::Shape&, const lab::DeviceFacts&)`");
  static_assert(!protocol::NamesCounters<V> || protocol::Counts<V>,
                "a variant class's `counters` is `std::vector<std::pair<std::string, double>> "
                "counters(const Topic::Problem&, double seconds)`");
  return VariantClass<V>;
}

namespace detail {

// A variant written as one run function: no state of its own.
template <class T>
class FunctionInstance final : public Instance {
 public:
  using Fn = void (*)(typename T::Problem&, cudaStream_t);
  explicit FunctionInstance(Fn fn) : fn_(fn) {}
  void run(Problem& p, cudaStream_t s) override { fn_(static_cast<typename T::Problem&>(p), s); }

 private:
  Fn fn_;
};

// A variant written as a class V (its members are its state; see LAB_VARIANT_CLASS).
template <class V>
class ClassInstance final : public Instance {
  using P = typename V::Topic::Problem;

 public:
  ClassInstance(P& p, cudaStream_t s) : v_(make(p, s)) {}
  void run(Problem& p, cudaStream_t s) override { v_.run(static_cast<P&>(p), s); }
  std::vector<std::pair<std::string, double>> counters(const Problem& p, double seconds) override {
    if constexpr (protocol::NamesCounters<V>)
      return v_.counters(static_cast<const P&>(p), seconds);
    else
      return {};
  }

 private:
  static V make(P& p, cudaStream_t s) {
    if constexpr (std::is_constructible_v<V, P&, cudaStream_t>)
      return V(p, s);
    else if constexpr (std::is_constructible_v<V, P&>)
      return V(p);
    else
      return V();
  }
  V v_;
};

// The fields every registration fills the same way.
template <class T>
Variant variant_record(Registry& reg, std::string program, Role role, int step, std::string description) {
  Variant v;
  v.program = std::move(program);
  v.role = role;
  v.step = step;
  v.description = std::move(description);
  v.topic = &reg.add_topic(topic_info<T>());
  return v;
}

}  // namespace detail

template <class T>
const Variant& register_variant(Registry& reg, std::string program, Role role, int step, std::string description,
                                void (*fn)(typename T::Problem&, cudaStream_t), Declared declared = {}) {
  Variant v = detail::variant_record<T>(reg, std::move(program), role, step, std::move(description));
  v.declared = std::move(declared);
  v.supports = [](const Shape&, const DeviceFacts&) { return std::string(); };
  v.prepare = [fn](Problem&, cudaStream_t) -> std::unique_ptr<Instance> {
    return std::make_unique<detail::FunctionInstance<T>>(fn);
  };
  return reg.add(std::move(v));
}

// A variant class V declares, beside `using Topic = ...;` and `void run(Topic::Problem&, cudaStream_t)`:
//   a constructor from (const Topic::Problem&, cudaStream_t), (const Topic::Problem&) or nothing:
//     its prepare step, untimed (allocate scratch, convert inputs); it reads the inputs and writes
//     nothing of the problem's (a constructor that captures a CUDA graph of the run takes a
//     Topic::Problem&, since the graph records the outputs' addresses, and runs nothing);
//   optionally static Declared declared(): its tolerance, precision, outputs;
//   optionally static std::string supports(const Shape&, const DeviceFacts&): "" or why not;
//   optionally counters(const Topic::Problem&, double seconds): its own counters.
template <class V>
const Variant& register_variant_class(Registry& reg, std::string program, Role role, int step,
                                      std::string description) {
  static_assert(check_variant_class<V>());
  using T = typename V::Topic;
  // Two files whose classes share a name outside an anonymous namespace are one class to the
  // linker (one definition): the second registration would reuse the first file's class.
  static const Registry* registered_in = nullptr;
  if (registered_in == &reg)
    throw Error("variant class of '" + program + "' registered twice: a class of the same name in another file "
                "is the same class to the linker; define variant classes in an anonymous namespace");
  registered_in = &reg;
  Variant v = detail::variant_record<T>(reg, std::move(program), role, step, std::move(description));
  if constexpr (protocol::NamesDeclared<V>) v.declared = V::declared();
  v.supports = [](const Shape& s, const DeviceFacts& d) {
    if constexpr (protocol::NamesSupports<V>)
      return std::string(V::supports(s, d));
    else
      return std::string();
  };
  v.prepare = [](Problem& p, cudaStream_t s) -> std::unique_ptr<Instance> {
    return std::make_unique<detail::ClassInstance<V>>(static_cast<typename T::Problem&>(p), s);
  };
  return reg.add(std::move(v));
}


}  // namespace lab

// LAB_STEP: a ladder step's number. The build gives it to each numbered variant file of a ladder
// folder (`03_optimized_x.cu`: its place among the folder's optimized files; cmake/Lab.cmake), so
// that the file names are the one list of a ladder's order:
//   LAB_VARIANT_STEP(Attention, LAB_STEP, "fused (flash) fp32: ...") { ... }
// Anywhere else the name below is what the compiler reports as undeclared.
#ifndef LAB_STEP
#define LAB_STEP lab_step_is_defined_only_for_a_numbered_file_in_a_ladder_folder
#endif

// A storage twin's program name ends in its storage (common/lab/storage.hpp: a variant file compiled
// once more with LAB_STORAGE_BF16 is the program <name>_bf16, with LAB_STORAGE_FP16 <name>_fp16).
#if defined(LAB_STORAGE_BF16)
#define LAB_STORAGE_SUFFIX "_bf16"
#elif defined(LAB_STORAGE_FP16)
#define LAB_STORAGE_SUFFIX "_fp16"
#else
#define LAB_STORAGE_SUFFIX ""
#endif
#define LAB_DETAIL_PROGRAM_NAME ::lab::storage_twin_name(::lab::program_name_from_path(__FILE__), LAB_STORAGE_SUFFIX)

#define LAB_DETAIL_VARIANT(Topic, role, step, description, ...)                                              \
  static void lab_variant_run(Topic::Problem& p, cudaStream_t stream);                                        \
  [[maybe_unused]] static const ::lab::Variant* lab_variant_registration = &::lab::register_variant<Topic>(   \
      ::lab::Registry::global(), LAB_DETAIL_PROGRAM_NAME, ::lab::Role::role, step, description,               \
      &lab_variant_run, ::lab::Declared{__VA_ARGS__});                                                          \
  static void lab_variant_run([[maybe_unused]] Topic::Problem& p, [[maybe_unused]] cudaStream_t stream)

// Registers this file's variant of Topic and opens its run function, whose parameters are
// `p` (Topic::Problem&: inputs, outputs, shape) and `stream` (the stream to launch on). A variant
// with no state of its own is this one function; what it declares (lab::Declared) may follow the
// description, as designated initializers or a Declared value:
//   LAB_VARIANT(Transpose, optimized, "shared-memory tile with padding") { kernel<<<g, b, 0, stream>>>(...); }
//   LAB_VARIANT_STEP(Gelu, 1, "tanh form", .tolerance = lab::Tolerance::per_element(...)) { ... }
// role: baseline, optimized or library. One variant per file; the program takes the file's name.
// A variant with state (scratch, handles, graphs) is a class: LAB_VARIANT_CLASS below.
#define LAB_VARIANT(Topic, role, description, ...) \
  LAB_DETAIL_VARIANT(Topic, role, ::lab::kFinalStep, description __VA_OPT__(, ) __VA_ARGS__)

// An intermediate optimized step (1, 2, ...), listed before the final optimized variant.
#define LAB_VARIANT_STEP(Topic, step, description, ...) \
  LAB_DETAIL_VARIANT(Topic, optimized, step, description __VA_OPT__(, ) __VA_ARGS__)

#define LAB_DETAIL_VARIANT_CLASS(Class, role, step, description)                                                  \
  [[maybe_unused]] static const ::lab::Variant* lab_variant_registration = &::lab::register_variant_class<Class>( \
      ::lab::Registry::global(), LAB_DETAIL_PROGRAM_NAME, ::lab::Role::role, step, description)

// Registers a variant written as a class, for a variant with state or declarations (see
// register_variant_class): its members are its workspace, made by its constructor before timing.
// Define the class in an anonymous namespace: the chapter's test binary links every variant file.
//   struct Eager { using Topic = Attention; lab::DeviceBuffer<float> scores; ...
//                  explicit Eager(const Attention::Problem& p); void run(Attention::Problem& p, cudaStream_t s); };
//   LAB_VARIANT_CLASS(Eager, baseline, "one kernel per operation");
#define LAB_VARIANT_CLASS(Class, role, description) LAB_DETAIL_VARIANT_CLASS(Class, role, ::lab::kFinalStep, description)
#define LAB_VARIANT_CLASS_STEP(Class, step, description) LAB_DETAIL_VARIANT_CLASS(Class, optimized, step, description)
