// A program whose two variants claim the same place in their topic's ladder: what a learner's new
// variant file does when it leaves out LAB_VARIANT_STEP. Registration runs before main, so the
// registry sets the second aside and the shared main reports it (exit status 2, the reason named)
// instead of the program aborting in a static initializer. The ctest lab.refused_registration runs it.
#include "fake_topic.hpp"
#include "lab/harness.hpp"

namespace {
const lab::Variant& first = lab::register_variant<FakeTopic>(lab::Registry::global(), "optimized_fake",
                                                             lab::Role::optimized, lab::kFinalStep, "a", &fake_run);
const lab::Variant& second = lab::register_variant<FakeTopic>(
    lab::Registry::global(), "optimized_fake_copy", lab::Role::optimized, lab::kFinalStep, "b", &fake_run);
}  // namespace

int main(int argc, char** argv) { return lab::run_main(argc, argv); }
