// Random shapes for the fuzz sweep: drawn near a topic's check shapes (its awkward sizes, moved a
// little: odd, prime, off a tile), with degenerate extents (one row, one column, one class) on
// purpose, and only shapes the topic accepts (validate) and the CPU reference can afford. The
// chapter fuzz binaries run every variant on such shapes under fresh seeds.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lab/registry.hpp"

namespace lab {

// How one draw moves a check shape: each extent, with probability 1/2, becomes 1 (a quarter of the
// moves), the nearest prime above a nearby value, or a value within +-max(3, extent/8) of it; a
// switch is drawn 0 or 1. Shapes the topic refuses, or whose reference work is over the check
// limits, are drawn again.
std::vector<Shape> fuzz_shapes(const TopicInfo& t, std::uint64_t seed, int count);

// The same draws, keeping only the shapes `accept` takes as well: a variant's own (lab::unsupported
// empty), so that a variant written for a few of its topic's shapes (the wgmma attention forward,
// head size 128 alone) is fuzzed at `count` shapes it runs, not at the few of `count` topic shapes
// that happen to fit it. Returns fewer than `count`, none at all where `accept` takes nothing (a variant
// for another architecture), when 1000 x count draws did not find them; a topic that refuses all
// but fewer than `count` of those draws is an error, as above. Where `accept` takes every shape the
// shapes are fuzz_shapes(t, seed, count)'s.
std::vector<Shape> fuzz_shapes(const TopicInfo& t, std::uint64_t seed, int count,
                               const std::function<bool(const Shape&)>& accept);

// The smallest prime >= n (n >= 2), or n itself when n < 2.
std::int64_t next_prime(std::int64_t n);

}  // namespace lab
