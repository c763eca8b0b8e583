// The MLP both goodput loops train (128 -> 256 ReLU -> 10, softmax cross-entropy, plain SGD): its
// sizes, its data, its training written once over a scalar type, and the check of a trained
// model. Host code: mlp.cu runs the training on the GPU; this file's train() runs it on the CPU
// in double (the reference), in float (an fp32 stand-in for the GPU, for the tests) and in Monte
// Carlo arithmetic (lab/monte_carlo.hpp), whose runs measure how far fp32's rounding moves each
// trained weight and each loss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "lab/monte_carlo.hpp"
#include "lab/rng.hpp"
#include "lab/verify.hpp"

namespace mlp {

constexpr int kIn = 128, kHidden = 256, kClasses = 10;
constexpr float kLearningRate = 0.05f;
// Parameters live in one buffer, [W1 (In x Hidden) | b1 | W2 (Hidden x Classes) | b2], row-major,
// so one SGD kernel updates them all; gradients share the layout.
constexpr std::size_t kW1 = 0, kB1 = kW1 + std::size_t(kIn) * kHidden, kW2 = kB1 + kHidden,
                      kB2 = kW2 + std::size_t(kHidden) * kClasses, kParams = kB2 + kClasses;

// The dataset and the initial weights: inputs from a normal distribution, labels from a fixed
// random linear "teacher" (learnable), weights uniform in +-1/sqrt(fan-in), biases in +-0.01.
struct Data {
  int samples = 0;
  std::vector<float> x;       // samples x kIn
  std::vector<int> labels;    // samples
  std::vector<float> params0; // kParams
};
Data make_data(int samples, lab::Rng& rng);

// One pass of SGD over data, `batch` samples a step, `steps` steps: the trained parameters and
// each step's mean loss. T = double (the reference), float (an fp32 stand-in) or
// lab::mc::Perturbed (a Monte Carlo run: seed its stream first).
// A pre-activation within fp32's rounding of zero may take the ReLU either way; `kink` says which:
// as its computed value says, by a code of the decision and `run` (half of 16 runs each way; the
// Monte Carlo runs'), or against its value (a stand-in for a GPU that rounded the other way at
// every such decision, for the tests).
enum class Kink { as_computed, both_ways, other_way };
template <class T>
struct Trained {
  std::vector<T> params, losses;
  std::size_t kink_decisions = 0;  // pre-activations within rounding of zero (see train())
};
template <class T>
Trained<T> train(const Data& data, int batch, int steps, Kink kink = Kink::as_computed, int run = 0);

// What a trained model is held to: the reference in double, and how far fp32 rounding moves each
// output, measured by `runs` Monte Carlo runs of the same training: sigma, each element's RMS
// deviation from the reference over the runs, and each tensor's (W1, b1, W2, b2, the losses)
// largest L2 deviation among them. 16 runs: the element test's k at a false alarm of 1e-12 is
// then 19.9 (lab::mc::element_factor).
inline constexpr int kMonteCarloRuns = 16;
inline constexpr double kElementFalseAlarm = 1e-12;
// A tensor whose error has kL2MinDof degrees of freedom (lab::mc::l2_dof) or more also passes only
// with its L2 error within kL2Factor times the largest of the runs' (the room a kernel's other
// order of summation, blocked or pairwise rather than sequential, may need): a kernel whose errors
// are twice the runs' passes that with probability 1 - 7e-17 at 32 degrees of freedom.
inline constexpr double kL2Factor = 4;
inline constexpr double kL2MinDof = 32;

struct Tensor {
  const char* name;
  std::size_t offset, size;
};
// W1, b1, W2, b2 in the parameter buffer.
std::vector<Tensor> tensors();

struct Expected {
  int runs = 0;
  std::vector<double> params, losses;              // the reference
  std::vector<double> params_sigma, losses_sigma;  // the runs' RMS deviation, element by element
  std::vector<double> params_l2;                   // each tensor's largest run L2 deviation
  double losses_l2 = 0;
  std::size_t kink_decisions = 0;  // the reference's decisions within rounding of the kink
  bool kinks_both_ways = true;     // the runs took them both ways (Kink::both_ways)
};
// The runs go side by side on the machine's threads (lab::mc::reference_threads); the result is
// the same, bit for bit, whatever their number.
// `kink`: the runs' decisions at the kink (both ways; as_computed only to show, in a test, what
// the check would be without that).
Expected expected(const Data& data, int batch, int steps, int runs = kMonteCarloRuns, std::uint64_t seed = 1,
                  Kink kink = Kink::both_ways);

// Every weight and every loss within k sigma of the reference; each tensor with the degrees of
// freedom for it within kL2Factor times the runs' largest L2 error. The note says how near the
// worst element and the worst L2 came to their bounds.
lab::Verdict judge(const Expected& e, std::span<const float> params, std::span<const float> losses);

}  // namespace mlp
