// What the parts of lab::jit share (not part of its interface): the few helpers that tracing,
// generating and loading all use.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "lab/jit.hpp"

namespace lab::jit::detail {

inline double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A float as a C++ literal that reads back to the same bits ("0x1.8p+0f"), or an expression for
// the values that have no literal.
inline std::string literal(float v) {
  if (std::isnan(v)) return "__int_as_float(0x7fffffff)";
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", double(v));
  return buf;
}

inline const char* symbol(Op op) {
  switch (op) {
    case Op::add: return "+";
    case Op::sub: return "-";
    case Op::mul: return "*";
    case Op::div: return "/";
    default: return "?";
  }
}

// prefix followed by a number ("t12"); built by appending (GCC 12 warns, wrongly, on "t" + string).
inline std::string numbered(const char* prefix, long long k) {
  std::string s = prefix;
  s += std::to_string(k);
  return s;
}

// Each distinct node in evaluation order (arguments first), visited once.
inline void topological(const Node* n, std::vector<const Node*>& order, std::unordered_map<const Node*, int>& seen) {
  if (seen.count(n)) return;
  for (const Expr& a : n->args) topological(&a.node(), order, seen);
  seen[n] = static_cast<int>(order.size());
  order.push_back(n);
}

}  // namespace lab::jit::detail
