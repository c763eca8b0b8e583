// The problem behind the goodput lesson: train a small MLP classifier (128 -> 256 ReLU -> 10,
// softmax cross-entropy, plain SGD) for one pass over a synthetic dataset. The arithmetic is the
// same in both loops: cuBLAS GEMMs and a handful of small kernels per step. What differs is
// everything around it, and at small batches that is most of the time: the share of wall time
// the GPU spends in useful kernels is the loop's goodput.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "lab/lab.hpp"
#include "mlp_reference.hpp"

namespace mlp {
// FLOPs of one sample's forward (2 per multiply-add) and backward (twice the forward) GEMMs.
constexpr double kGemmFlopsPerSample = 6.0 * (double(kIn) * kHidden + double(kHidden) * kClasses);

// Device scratch for one step of batch b: activations and gradients.
struct Workspace {
  lab::DeviceBuffer<float> hidden, logits, dlogits, dhidden, grads;
  explicit Workspace(int b)
      : hidden(std::size_t(b) * kHidden), logits(std::size_t(b) * kClasses), dlogits(std::size_t(b) * kClasses),
        dhidden(std::size_t(b) * kHidden), grads(kParams) {}
};

// One SGD step on a batch already on the device: forward, loss (written to *loss), backward,
// update of params. Everything is enqueued on the handle's stream; nothing synchronizes.
void train_step(cublasHandle_t h, float* params, Workspace& ws, const float* x, const int* labels, int batch,
                float* loss, cudaStream_t s);
// Only the step's GEMMs (to time them alone).
void train_step_gemms(cublasHandle_t h, float* params, Workspace& ws, const float* x, int batch);

// A cuBLAS handle in true fp32 (no TF32) with a fixed workspace, so that its calls can be captured
// into a CUDA graph.
struct Blas {
  lab::CublasHandle handle;
  lab::DeviceBuffer<std::uint8_t> workspace{std::size_t{32} << 20};
  Blas();
};
}  // namespace mlp

struct PerformanceBasics {
  static constexpr const char* name = "performance_basics";
  static constexpr int chapter = 1;
  static std::vector<std::string> dims() { return {"batch", "samples"}; }
  // One pass over 8192 samples at batch 32 ... 512.
  static std::vector<lab::Shape> sweep() { return {{32, 8192}, {64, 8192}, {128, 8192}, {256, 8192}, {512, 8192}}; }
  // Odd batches, one sample, one run long enough to see the loss fall (64 steps), and the sweep's
  // largest batch over two steps (the timed shapes themselves are over the reference's limits,
  // below).
  static std::vector<lab::Shape> checks() { return {{1, 1}, {7, 21}, {33, 99}, {100, 300}, {32, 2048}, {512, 1024}}; }
  // The dataset crosses the bus once; the FLOPs are the GEMMs' (the small kernels add little).
  static lab::Work work(const lab::Shape& s) {
    return {.bytes = double(s[1]) * (mlp::kIn + 1) * 4.0, .flops = double(s[1]) * mlp::kGemmFlopsPerSample};
  }
  // The check trains on the CPU 1 + kMonteCarloRuns times (mlp::expected: in double, then in Monte
  // Carlo arithmetic), so its reference costs that many times the training's FLOPs, and the CPU
  // reference's limits (lab::kVerifyFlopsLimit, 4 GFLOP) bound that: about 1100 samples. The
  // sweep's 8192 samples are over it (29.5 GFLOP; verifying them took most of a plain run's 50 to
  // 65 s of checking on the GPU machine's 16 cores); the check shapes are verified whatever their
  // cost.
  static lab::Work reference_work(const lab::Shape& s) {
    lab::Work w = work(s);
    w.flops *= 1 + mlp::kMonteCarloRuns;
    return w;
  }
  // fp32 and double training drift apart chaotically as steps accumulate (both loops' weights
  // were bit-identical to each other and 5e-4 from double, in relative L2, after 256 steps on an
  // H100), so the comparison with double is made after at most 64 steps, as "after k steps" asks.
  static bool verifiable(const lab::Shape& s) { return s[1] / s[0] <= 64; }
  static std::string validate(const lab::Shape& s) {
    if (s[0] > 1024) return "batch at most 1024";
    if (s[1] % s[0] != 0) return "samples must be a multiple of batch";
    if (s[1] > (1 << 22)) return "at most 4194304 samples";
    return "";
  }

  struct Problem : lab::Problem {
    int batch, samples, steps;
    std::vector<float> data;       // the dataset, samples x In, made once (a data loader's source)
    std::vector<int> labels;
    std::vector<float> params0;    // the initial weights
    lab::DeviceBuffer<float> params;        // trained in place
    lab::DeviceBuffer<float> losses;        // one per step
    double useful_s = -1, gemm_s = -1;  // measured once for the counters

    Problem(const lab::Shape& s, lab::Rng& rng);
    void poison(cudaStream_t s) override;
    lab::Verdict verify() override;
    std::vector<std::pair<std::string, double>> counters(double seconds, cudaStream_t s) override;
  };
};
