// Tests made once per variant of a topic: one GoogleTest test for each variant, so that CTest runs
// them side by side and one variant's can be run alone (--gtest_filter=Suite.program). A test file
// cannot make them itself: its static initializers may run before those of the variants'
// translation units (C++ leaves that order unspecified), so it names the suite, the topic and the
// body, and the chapter's test main (common/src/chapter_test_main.cpp) registers the tests once the
// registry is complete.
//
//   const lab::testing::PerVariant kSecondStep{"Gpt2SecondStep", Gpt2Step::name, [](const lab::Variant& v) {
//     ...  // GoogleTest's assertions, GTEST_SKIP() for a variant it does not apply to
//   }};
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lab/registry.hpp"

namespace lab::testing {

using VariantTestBody = std::function<void(const Variant&)>;

struct PerVariant {
  PerVariant(std::string suite, std::string topic, VariantTestBody body);
};

// Registers every PerVariant's body as the test `suite`.`program` for each variant of `all` in its
// topic. Throws lab::Error for a PerVariant whose topic has no variant in `all` (a misspelt topic
// would otherwise make no test and fail nothing).
void register_per_variant_tests(const std::vector<const Variant*>& all);

}  // namespace lab::testing
