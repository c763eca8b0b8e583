#include "lab/variant_tests.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "lab/check.hpp"

namespace lab::testing {

namespace {

struct Entry {
  std::string suite, topic;
  VariantTestBody body;
};

std::vector<Entry>& entries() {  // constructed at its first use, whichever file's initializer that is
  static std::vector<Entry> e;
  return e;
}

class VariantTest : public ::testing::Test {
 public:
  VariantTest(VariantTestBody body, const Variant* v) : body_(std::move(body)), v_(v) {}
  void TestBody() override { body_(*v_); }

 private:
  VariantTestBody body_;  // a copy: the test owns what it runs, whatever becomes of entries()
  const Variant* v_;
};

}  // namespace

PerVariant::PerVariant(std::string suite, std::string topic, VariantTestBody body) {
  entries().push_back({std::move(suite), std::move(topic), std::move(body)});
}

void register_per_variant_tests(const std::vector<const Variant*>& all) {
  for (const Entry& e : entries()) {
    const bool any = std::any_of(all.begin(), all.end(), [&](const Variant* v) { return v->topic->name == e.topic; });
    if (!any) throw Error("test suite " + e.suite + ": no variant of topic '" + e.topic + "' in this binary");
    for (const Variant* v : all)
      if (v->topic->name == e.topic)
        ::testing::RegisterTest(e.suite.c_str(), v->program.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                [body = e.body, v]() -> ::testing::Test* { return new VariantTest(body, v); });
  }
}

}  // namespace lab::testing
