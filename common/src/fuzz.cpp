#include "lab/fuzz.hpp"

#include <algorithm>

#include "lab/check.hpp"
#include "lab/harness.hpp"
#include "lab/rng.hpp"

namespace lab {

std::int64_t next_prime(std::int64_t n) {
  if (n < 2) return n;
  auto prime = [](std::int64_t v) {
    if (v < 2) return false;
    for (std::int64_t f = 2; f * f <= v; ++f)
      if (v % f == 0) return false;
    return true;
  };
  while (!prime(n)) ++n;
  return n;
}

namespace {

// A splitmix64 stream: uniform integers for the draws.
struct Draw {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::int64_t in(std::int64_t lo, std::int64_t hi) {  // [lo, hi]
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
};

bool is_switch(const TopicInfo& t, std::size_t i) {
  return std::find(t.switches.begin(), t.switches.end(), t.dims[i]) != t.switches.end();
}

}  // namespace

std::vector<Shape> fuzz_shapes(const TopicInfo& t, std::uint64_t seed, int count) {
  return fuzz_shapes(t, seed, count, [](const Shape&) { return true; });
}

std::vector<Shape> fuzz_shapes(const TopicInfo& t, std::uint64_t seed, int count,
                               const std::function<bool(const Shape&)>& accept) {
  if (t.checks.empty()) throw Error("fuzz_shapes(" + t.name + "): the topic has no check shapes to start from");
  Draw draw{seed};
  std::vector<Shape> out;
  int tries = 0, topic_accepted = 0;
  while (static_cast<int>(out.size()) < count) {
    if (++tries > 1000 * count) {
      if (topic_accepted >= count) break;  // the topic's shapes were there; `accept` took fewer
      throw Error("fuzz_shapes(" + t.name + "): fewer than " + std::to_string(count) +
                  " acceptable shapes in " + std::to_string(tries - 1) + " draws");
    }
    Shape s = t.checks[static_cast<std::size_t>(draw.in(0, static_cast<std::int64_t>(t.checks.size()) - 1))];
    for (std::size_t i = 0; i < s.rank(); ++i) {
      if (is_switch(t, i)) {
        s.dims[i] = draw.in(0, 1);
        continue;
      }
      if (draw.in(0, 1) == 0) continue;  // this extent stays
      const std::int64_t e = s.dims[i], reach = std::max<std::int64_t>(3, e / 8);
      switch (draw.in(0, 3)) {
        case 0: s.dims[i] = 1; break;
        case 1: s.dims[i] = next_prime(std::max<std::int64_t>(2, e + draw.in(-reach, reach))); break;
        default: s.dims[i] = std::max<std::int64_t>(1, e + draw.in(-reach, reach)); break;
      }
    }
    if (!t.validate(s).empty() || !reference_can_verify(t, s)) continue;
    ++topic_accepted;
    if (!accept(s)) continue;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace lab
