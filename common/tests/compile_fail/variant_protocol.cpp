// A variant class whose `supports` forgot the device: registering it must not compile, and the
// error must say which member is wrong (cmake/expect_compile.cmake builds this file twice: with
// LAB_BROKEN, where it must fail, and without, where the same file must compile).
#include "../fake_topic.hpp"
#include "lab/registry.hpp"

namespace {
struct Variant {
  using Topic = FakeTopic;
  void run(FakeTopic::Problem&, cudaStream_t) {}
#ifdef LAB_BROKEN
  static std::string supports(const lab::Shape&) { return ""; }
#else
  static std::string supports(const lab::Shape&, const lab::DeviceFacts&) { return ""; }
#endif
};
}  // namespace

void register_it(lab::Registry& reg) {
  lab::register_variant_class<Variant>(reg, "optimized_x", lab::Role::optimized, lab::kFinalStep, "x");
}
