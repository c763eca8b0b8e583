// lab::jit, part 1: tracing. An expression written in C++ (Expr, its operators and functions)
// is recorded as a graph of shared nodes; arity() counts its inputs, to_string() prints it, and
// evaluate() computes it in double, the reference the tests hold generated kernels to.
#include "lab/jit.hpp"

#include <algorithm>
#include <initializer_list>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "detail.hpp"
#include "lab/check.hpp"

namespace lab::jit {

using namespace detail;

namespace {

Expr make(Op op, std::vector<Expr> args) {
  auto n = std::make_shared<Node>();
  n->op = op;
  n->args = std::move(args);
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

}  // namespace

Expr::Expr(float constant) {
  auto n = std::make_shared<Node>();
  n->op = Op::constant;
  n->value = constant;
  node_ = std::move(n);
}

namespace {
// An input or column-vector leaf; `what` names it in the error for an index beyond `count`.
Expr leaf(Op op, int index, int count, const char* what) {
  if (index < 0 || index >= count)
    throw UsageError(std::string("lab::jit::Expr::") + (op == Op::input ? "input(" : "column(") +
                     std::to_string(index) + "): " + what + " are 0.." + std::to_string(count - 1));
  auto n = std::make_shared<Node>();
  n->op = op;
  n->index = index;
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}
}  // namespace

Expr Expr::input(int index) { return leaf(Op::input, index, kMaxInputs, "inputs"); }
Expr Expr::column(int index) { return leaf(Op::column, index, kMaxColumns, "column vectors"); }
Expr Expr::row() { return make(Op::row, {}); }
Expr Expr::col() { return make(Op::col, {}); }

Expr operator+(const Expr& a, const Expr& b) { return make(Op::add, {a, b}); }
Expr operator-(const Expr& a, const Expr& b) { return make(Op::sub, {a, b}); }
Expr operator*(const Expr& a, const Expr& b) { return make(Op::mul, {a, b}); }
Expr operator/(const Expr& a, const Expr& b) { return make(Op::div, {a, b}); }
Expr operator-(const Expr& a) { return make(Op::neg, {a}); }
Expr exp(const Expr& a) { return make(Op::exp, {a}); }
Expr log(const Expr& a) { return make(Op::log, {a}); }
Expr tanh(const Expr& a) { return make(Op::tanh, {a}); }
Expr erf(const Expr& a) { return make(Op::erf, {a}); }
Expr sigmoid(const Expr& a) { return make(Op::sigmoid, {a}); }
Expr sqrt(const Expr& a) { return make(Op::sqrt, {a}); }
Expr max(const Expr& a, const Expr& b) { return make(Op::max, {a, b}); }
Expr operator>(const Expr& a, const Expr& b) { return make(Op::greater, {a, b}); }
Expr select(const Expr& condition, const Expr& a, const Expr& b) { return make(Op::select, {condition, a, b}); }

Arity arity(const Expr& e) {
  std::vector<const Node*> order;
  std::unordered_map<const Node*, int> seen;
  topological(&e.node(), order, seen);
  Arity a;
  for (const Node* n : order) {
    if (n->op == Op::input) a.inputs = std::max(a.inputs, n->index + 1);
    if (n->op == Op::column) a.columns = std::max(a.columns, n->index + 1);
  }
  return a;
}

namespace {
// "name(a, b, ...)", built by appending (GCC 12 warns, wrongly, on "literal" + std::string&&).
std::string call(const char* name, std::initializer_list<std::string> args) {
  std::string s = name;
  s += '(';
  bool first = true;
  for (const std::string& a : args) {
    if (!first) s += ", ";
    s += a;
    first = false;
  }
  s += ')';
  return s;
}
// "(a op b)".
std::string infix(const std::string& a, const char* op, const std::string& b) {
  std::string s = "(";
  s += a;
  s += ' ';
  s += op;
  s += ' ';
  s += b;
  s += ')';
  return s;
}
}  // namespace

std::string to_string(const Expr& e) {
  const Node& n = e.node();
  auto arg = [&](int i) { return to_string(n.args[i]); };
  switch (n.op) {
    case Op::input: return numbered("in", n.index);
    case Op::column: return numbered("vec", n.index) + "[col]";
    case Op::row: return "row";
    case Op::col: return "col";
    case Op::constant: {
      std::ostringstream s;
      s << n.value;
      return s.str();
    }
    case Op::neg: {
      std::string s = "-";
      s += arg(0);
      return s;
    }
    case Op::exp: return call("exp", {arg(0)});
    case Op::log: return call("log", {arg(0)});
    case Op::tanh: return call("tanh", {arg(0)});
    case Op::erf: return call("erf", {arg(0)});
    case Op::sigmoid: return call("sigmoid", {arg(0)});
    case Op::sqrt: return call("sqrt", {arg(0)});
    case Op::max: return call("max", {arg(0), arg(1)});
    case Op::greater: return infix(arg(0), ">", arg(1));
    case Op::select: return call("select", {arg(0), arg(1), arg(2)});
    default: return infix(arg(0), symbol(n.op), arg(1));
  }
}

double evaluate(const Expr& e, const std::vector<double>& in, const std::vector<double>& vec, double row, double col) {
  const Node& n = e.node();
  auto arg = [&](int k) { return evaluate(n.args[static_cast<std::size_t>(k)], in, vec, row, col); };
  switch (n.op) {
    case Op::input: return in.at(static_cast<std::size_t>(n.index));
    case Op::column: return vec.at(static_cast<std::size_t>(n.index));
    case Op::row: return row;
    case Op::col: return col;
    case Op::greater: return arg(0) > arg(1) ? 1.0 : 0.0;
    case Op::select: return arg(0) != 0 ? arg(1) : arg(2);
    case Op::constant: return n.value;
    case Op::neg: return -arg(0);
    case Op::exp: return std::exp(arg(0));
    case Op::log: return std::log(arg(0));
    case Op::tanh: return std::tanh(arg(0));
    case Op::erf: return std::erf(arg(0));
    case Op::sigmoid: return 1.0 / (1.0 + std::exp(-arg(0)));
    case Op::sqrt: return std::sqrt(arg(0));
    case Op::add: return arg(0) + arg(1);
    case Op::sub: return arg(0) - arg(1);
    case Op::mul: return arg(0) * arg(1);
    case Op::div: return arg(0) / arg(1);
    case Op::max: return std::max(arg(0), arg(1));
  }
  return NAN;
}

}  // namespace lab::jit
