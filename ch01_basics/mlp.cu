// The MLP both goodput loops train: its kernels and its step (its data, its CPU reference and its
// check are mlp_reference.cpp's). The lesson is in baseline_performance_basics.cu and
// optimized_performance_basics.cu, which differ only in how they feed and drive this step.
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

PerformanceBasics::Problem::Problem(const lab::Shape& s, lab::Rng& rng)
    : batch(static_cast<int>(s[0])), samples(static_cast<int>(s[1])), steps(samples / batch),
      data(std::size_t(samples) * mlp::kIn), labels(samples), params0(mlp::kParams),
      params(mlp::kParams), losses(steps) {
  mlp::Data d = mlp::make_data(samples, rng);
  data = std::move(d.x);
  labels = std::move(d.labels);
  params0 = std::move(d.params0);
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
  // The weights and losses after `steps` steps against the CPU's double training, each within
  // what fp32's rounding moved it in Monte Carlo runs of that training (mlp_reference.cpp).
  const mlp::Expected e = mlp::expected({samples, data, labels, params0}, batch, steps);
  const auto got_losses = losses.download();
  lab::Verdict v = mlp::judge(e, params.download(), got_losses);
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
