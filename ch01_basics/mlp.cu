// The MLP both goodput loops train: its kernels, its step, its data and its CPU reference. The
// lesson is in baseline_performance_basics.cu and optimized_performance_basics.cu, which differ
// only in how they feed and drive this step.
#include <algorithm>
#include <cmath>
#include <limits>

#include "performance_basics.cuh"

namespace mlp {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// hidden <- max(hidden + b1, 0), row by row.
__global__ void bias_relu(float* hidden, const float* b1, int batch) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < std::size_t(batch) * kHidden) hidden[i] = fmaxf(hidden[i] + b1[i % kHidden], 0.f);
}

// One block: softmax of (logits + b2) per row, the mean cross-entropy into *loss, and
// dlogits = (softmax - onehot) / batch. A fixed reduction order keeps it deterministic.
__global__ void softmax_cross_entropy(const float* logits, const float* b2, const int* labels, float* dlogits,
                                      float* loss, int batch) {
  __shared__ float partial[kThreads];
  float sum = 0.f;
  for (int r = threadIdx.x; r < batch; r += blockDim.x) {
    float z[kClasses];
    float m = -INFINITY;
    for (int j = 0; j < kClasses; ++j) {
      z[j] = logits[r * kClasses + j] + b2[j];
      m = fmaxf(m, z[j]);
    }
    float e = 0.f;
    for (int j = 0; j < kClasses; ++j) e += expf(z[j] - m);
    const int y = labels[r];
    sum += (logf(e) + m) - z[y];
    for (int j = 0; j < kClasses; ++j)
      dlogits[r * kClasses + j] = (expf(z[j] - m) / e - (j == y ? 1.f : 0.f)) / static_cast<float>(batch);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) partial[threadIdx.x] += partial[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0] / static_cast<float>(batch);
}

// out[c] = sum over rows of m[r][c], one thread per column (coalesced across the warp).
__global__ void column_sums(const float* m, int rows, int cols, float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.f;
  for (int r = 0; r < rows; ++r) s += m[std::size_t(r) * cols + c];
  out[c] = s;
}

__global__ void relu_backward(float* dhidden, const float* hidden, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n && hidden[i] <= 0.f) dhidden[i] = 0.f;
}

__global__ void sgd(float* params, const float* grads, std::size_t n, float lr) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) params[i] -= lr * grads[i];
}

// Row-major C (m x n) = op(A) op(B) through column-major cuBLAS: C^T = op(B)^T op(A)^T, so B goes
// first. lda, ldb, ldc are the row-major leading dimensions (columns of the stored matrices).
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc) {
  const float one = 1.f, zero = 0.f;
  LAB_CHECK(cublasSgemm(h, tb, ta, n, m, k, &one, b, ldb, a, lda, &zero, c, ldc));
}

void forward_gemm1(cublasHandle_t h, const float* params, Workspace& ws, const float* x, int batch) {
  gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, batch, kHidden, kIn, x, kIn, params + kW1, kHidden, ws.hidden.data(), kHidden);
}
void forward_gemm2(cublasHandle_t h, const float* params, Workspace& ws, int batch) {
  gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, batch, kClasses, kHidden, ws.hidden.data(), kHidden, params + kW2, kClasses,
       ws.logits.data(), kClasses);
}
void backward_gemms(cublasHandle_t h, const float* params, Workspace& ws, const float* x, int batch, bool relu_mask,
                    cudaStream_t s) {
  float* g = ws.grads.data();
  // dW2 = hidden^T dlogits; dhidden = dlogits W2^T (masked by the ReLU); dW1 = x^T dhidden.
  gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, kHidden, kClasses, batch, ws.hidden.data(), kHidden, ws.dlogits.data(), kClasses,
       g + kW2, kClasses);
  gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, batch, kHidden, kClasses, ws.dlogits.data(), kClasses, params + kW2, kClasses,
       ws.dhidden.data(), kHidden);
  if (relu_mask) {
    relu_backward<<<blocks_for(std::size_t(batch) * kHidden), kThreads, 0, s>>>(ws.dhidden.data(), ws.hidden.data(),
                                                                                std::size_t(batch) * kHidden);
    LAB_CHECK_LAUNCH();
  }
  gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, kIn, kHidden, batch, x, kIn, ws.dhidden.data(), kHidden, g + kW1, kHidden);
}

cudaStream_t stream_of(cublasHandle_t h) {
  cudaStream_t s = nullptr;
  LAB_CHECK(cublasGetStream(h, &s));
  return s;
}

}  // namespace

void train_step(cublasHandle_t h, float* params, Workspace& ws, const float* x, const int* labels, int batch,
                float* loss, cudaStream_t s) {
  float* g = ws.grads.data();
  forward_gemm1(h, params, ws, x, batch);
  bias_relu<<<blocks_for(std::size_t(batch) * kHidden), kThreads, 0, s>>>(ws.hidden.data(), params + kB1, batch);
  LAB_CHECK_LAUNCH();
  forward_gemm2(h, params, ws, batch);
  softmax_cross_entropy<<<1, kThreads, 0, s>>>(ws.logits.data(), params + kB2, labels, ws.dlogits.data(), loss, batch);
  LAB_CHECK_LAUNCH();
  backward_gemms(h, params, ws, x, batch, true, s);
  column_sums<<<blocks_for(kClasses), kThreads, 0, s>>>(ws.dlogits.data(), batch, kClasses, g + kB2);
  LAB_CHECK_LAUNCH();
  column_sums<<<blocks_for(kHidden), kThreads, 0, s>>>(ws.dhidden.data(), batch, kHidden, g + kB1);
  LAB_CHECK_LAUNCH();
  sgd<<<blocks_for(kParams), kThreads, 0, s>>>(params, g, kParams, kLearningRate);
  LAB_CHECK_LAUNCH();
}

void train_step_gemms(cublasHandle_t h, float* params, Workspace& ws, const float* x, int batch) {
  forward_gemm1(h, params, ws, x, batch);
  forward_gemm2(h, params, ws, batch);
  backward_gemms(h, params, ws, x, batch, false, stream_of(h));
}

}  // namespace mlp

namespace {

// The same training loop in double precision on the CPU, from the same initial weights and data.
// kink_slack: for every weight, how far fp32 may land from it because a ReLU decision at the kink
// went the other way (see below); the losses are not moved measurably by such a flip (the unit's
// value is within rounding of zero either way, and the weights' change is of the size below).
void reference_training(const std::vector<float>& data, const std::vector<int>& labels, const std::vector<float>& p0,
                        int batch, int steps, std::vector<double>& params, std::vector<double>& losses,
                        std::vector<double>& kink_slack) {
  using namespace mlp;
  constexpr double u = lab::fp32::kUnitRoundoff;
  params.assign(p0.begin(), p0.end());
  losses.assign(steps, 0.0);
  kink_slack.assign(kParams, 0.0);
  std::vector<double> h(std::size_t(batch) * kHidden), dl(std::size_t(batch) * kClasses), dh(h.size()), g(kParams);
  std::vector<double> sq(kHidden);
  std::vector<char> kink(h.size());  // this step's decisions fp32 may take either way
  for (int t = 0; t < steps; ++t) {
    const float* x = data.data() + std::size_t(t) * batch * kIn;
    const int* y = labels.data() + std::size_t(t) * batch;
    std::fill(g.begin(), g.end(), 0.0);
    double loss = 0;
    for (int r = 0; r < batch; ++r) {
      double* hr = &h[std::size_t(r) * kHidden];
      for (int c = 0; c < kHidden; ++c) hr[c] = params[kB1 + c], sq[c] = hr[c] * hr[c];
      for (int i = 0; i < kIn; ++i) {
        const double xi = x[std::size_t(r) * kIn + i];
        const double* w = &params[kW1 + std::size_t(i) * kHidden];
        for (int c = 0; c < kHidden; ++c) hr[c] += xi * w[c], sq[c] += xi * w[c] * xi * w[c];
      }
      // The pre-activation in fp32 errs by the rounding of its kIn + 1 terms' sum, a random walk
      // of that many steps of up to u times a partial sum (about the terms' L2 norm), and by the
      // weights' own fp32 drift after t steps, a walk of t such steps: within 6 sigma of both,
      // tau. Closer to zero than tau, fp32 may take the ReLU either way.
      for (int c = 0; c < kHidden; ++c) {
        const double tau = 6 * u * (std::sqrt(kIn + 1.0) + std::sqrt(double(t))) * std::sqrt(sq[c]);
        kink[std::size_t(r) * kHidden + c] = std::fabs(hr[c]) <= tau;
        hr[c] = std::max(hr[c], 0.0);
      }
      double z[kClasses];
      double m = -INFINITY;
      for (int j = 0; j < kClasses; ++j) {
        z[j] = params[kB2 + j];
        for (int c = 0; c < kHidden; ++c) z[j] += hr[c] * params[kW2 + std::size_t(c) * kClasses + j];
        m = std::max(m, z[j]);
      }
      double e = 0;
      for (int j = 0; j < kClasses; ++j) e += std::exp(z[j] - m);
      loss += std::log(e) + m - z[y[r]];
      for (int j = 0; j < kClasses; ++j)
        dl[std::size_t(r) * kClasses + j] = (std::exp(z[j] - m) / e - (j == y[r] ? 1.0 : 0.0)) / batch;
    }
    losses[t] = loss / batch;
    for (int r = 0; r < batch; ++r) {
      const double* hr = &h[std::size_t(r) * kHidden];
      const double* dlr = &dl[std::size_t(r) * kClasses];
      double* dhr = &dh[std::size_t(r) * kHidden];
      for (int c = 0; c < kHidden; ++c) {
        double acc = 0;
        for (int j = 0; j < kClasses; ++j) {
          g[kW2 + std::size_t(c) * kClasses + j] += hr[c] * dlr[j];
          acc += dlr[j] * params[kW2 + std::size_t(c) * kClasses + j];
        }
        dhr[c] = hr[c] > 0 ? acc : 0.0;
        // A decision at the kink taken the other way changes this step's gradient of the unit's
        // input weights by x acc (and of its bias by acc; of its output weights by h dl, h within
        // rounding of zero: nothing). lr times that moves the weights; carried to the end of the
        // run, twice it: a later step moves a weight perturbation by lr times the loss's
        // curvature, ||x||^2 W2^2 p (1 - p) / 4 or so, about 0.6% a step here, under 1.5 times
        // over the 64 steps a check may run. One flip in a 7-sample batch moved the weights by
        // 1.2e-4 of their norm (an H100, 3 steps, seed 39787903648199), beyond the 1e-4 the
        // check had allowed for all of fp32's rounding.
        if (kink[std::size_t(r) * kHidden + c]) {
          const double moved = 2 * kLearningRate * std::fabs(acc);
          for (int i = 0; i < kIn; ++i)
            kink_slack[kW1 + std::size_t(i) * kHidden + c] += moved * std::fabs(x[std::size_t(r) * kIn + i]);
          kink_slack[kB1 + c] += moved;
        }
      }
      for (int j = 0; j < kClasses; ++j) g[kB2 + j] += dlr[j];
      for (int c = 0; c < kHidden; ++c) g[kB1 + c] += dhr[c];
      for (int i = 0; i < kIn; ++i) {
        const double xi = x[std::size_t(r) * kIn + i];
        double* gw = &g[kW1 + std::size_t(i) * kHidden];
        for (int c = 0; c < kHidden; ++c) gw[c] += xi * dhr[c];
      }
    }
    for (std::size_t i = 0; i < kParams; ++i) params[i] -= kLearningRate * g[i];
  }
}

// fp32 training for k steps against double is chaotic at the ReLU's kink: a hidden unit whose
// pre-activation is within rounding of zero goes one way in fp32 and the other in double, and its
// weights then drift apart by far more than the rounding that caused it (seen on an H100: an
// element 36 times the typical error after 128 steps). So the check is global: the relative L2
// error of all weights within 1e-4 (about a thousand fp32 epsilons), no element off by more than
// 1% of the largest weight (which a wrong gradient, a missed update or an unwritten element would
// exceed), and the losses within 0.1% of the reference's. NaN never passes. Beyond that, each
// ReLU decision fp32 could take the other way is allowed for, weight by weight (kink_slack).
lab::Tolerance training_tolerance(const std::vector<double>& ref, double rel_l2, double share_of_max) {
  double m = 0;
  for (double v : ref) m = std::max(m, std::fabs(v));
  return {share_of_max * m, 0.0, rel_l2, "fp32 training"};
}

}  // namespace

PerformanceBasics::Problem::Problem(const lab::Shape& s, lab::Rng& rng)
    : batch(static_cast<int>(s[0])), samples(static_cast<int>(s[1])), steps(samples / batch),
      data(std::size_t(samples) * mlp::kIn), labels(samples), params0(mlp::kParams),
      params(mlp::kParams), losses(steps) {
  using namespace mlp;
  // Inputs from a normal distribution, labels from a fixed random linear "teacher": learnable.
  rng.normal(std::span<float>(data));
  std::vector<float> teacher(std::size_t(kIn) * kClasses);
  rng.normal(std::span<float>(teacher));
  for (int r = 0; r < samples; ++r) {
    int best = 0;
    double best_v = -INFINITY;
    for (int j = 0; j < kClasses; ++j) {
      double v = 0;
      for (int i = 0; i < kIn; ++i) v += double(data[std::size_t(r) * kIn + i]) * teacher[std::size_t(i) * kClasses + j];
      if (v > best_v) best_v = v, best = j;
    }
    labels[r] = best;
  }
  const float s1 = 1.f / std::sqrt(float(kIn)), s2 = 1.f / std::sqrt(float(kHidden));
  rng.uniform(std::span<float>(params0.data() + kW1, std::size_t(kIn) * kHidden), -s1, s1);
  rng.uniform(std::span<float>(params0.data() + kB1, kHidden), -0.01f, 0.01f);
  rng.uniform(std::span<float>(params0.data() + kW2, std::size_t(kHidden) * kClasses), -s2, s2);
  rng.uniform(std::span<float>(params0.data() + kB2, kClasses), -0.01f, 0.01f);
  params.upload(params0);
}

mlp::Blas::Blas() {
  LAB_CHECK(cublasSetWorkspace(handle, workspace.data(), workspace.bytes()));
  LAB_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // true fp32: no TF32
}

void PerformanceBasics::Problem::poison(cudaStream_t s) {
  // Training is in place: start again from the initial weights; NaN into the losses.
  LAB_CHECK(cudaMemcpyAsync(params.data(), params0.data(), params0.size() * sizeof(float), cudaMemcpyHostToDevice, s));
  lab::poison(losses, s);
  LAB_CHECK(cudaStreamSynchronize(s));
}

lab::Verdict PerformanceBasics::Problem::verify() {
  std::vector<double> ref_params, ref_losses, kink_slack;
  reference_training(data, labels, params0, batch, steps, ref_params, ref_losses, kink_slack);
  const auto got = params.download();
  const auto got_losses = losses.download();
  lab::Verdict v =
      lab::compare(got, ref_params, training_tolerance(ref_params, 1e-4, 1e-2), "weights", {}, kink_slack);
  v.also(lab::compare(got_losses, ref_losses, {1e-3, 1e-3, 1e-4, "fp32 training"}, "losses"));
  // Learning, not only arithmetic: over a run long enough to tell, the loss falls.
  if (v.pass && steps >= 32) {
    double first = 0, last = 0;
    for (int i = 0; i < 8; ++i) first += got_losses[i], last += got_losses[steps - 1 - i];
    if (!(last < first)) {
      v.pass = false;
      v.reason = "the loss did not decrease over " + std::to_string(steps) + " steps (first 8 mean " +
                 std::to_string(first / 8) + ", last 8 mean " + std::to_string(last / 8) + ")";
    }
  }
  return v;
}

// Goodput: the time the step's kernels need on their own (replayed back to back from a graph, the
// data already on the device) over the time the loop took. Also the GEMMs' rate, timed alone.
std::vector<std::pair<std::string, double>> PerformanceBasics::Problem::counters(double seconds, cudaStream_t s) {
  if (useful_s < 0) {
    lab::DeviceBuffer<float> x(data.size());
    lab::DeviceBuffer<int> y(labels.size());
    x.upload(data);
    y.upload(labels);
    mlp::Blas blas;
    mlp::Workspace ws(batch);
    blas.handle.set_stream(s);
    auto time_graph = [&](auto&& step) {
      lab::GraphExec g;
      g.capture(s, [&] {
        for (int t = 0; t < steps; ++t) step(t);
      });
      lab::Event a, b;
      double best = 1e30;
      for (int i = 0; i < 4; ++i) best = std::min<double>(best, lab::time_once_ms([&] { g.launch(s); }, s, a, b) * 1e-3);
      return best;
    };
    useful_s = time_graph([&](int t) {
      mlp::train_step(blas.handle, params.data(), ws, x.data() + std::size_t(t) * batch * mlp::kIn,
                      y.data() + std::size_t(t) * batch, batch, losses.data() + t, s);
    });
    gemm_s = time_graph([&](int t) {
      mlp::train_step_gemms(blas.handle, params.data(), ws, x.data() + std::size_t(t) * batch * mlp::kIn, batch);
    });
  }
  return {{"samples/s", samples / seconds},
          {"ms/step", seconds * 1e3 / steps},
          {"goodput_%", 100.0 * useful_s / seconds},
          {"gemm_GFLOP/s", samples * mlp::kGemmFlopsPerSample / gemm_s / 1e9}};
}
