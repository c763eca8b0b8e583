// The lab's own kernels: random fills, the architecture probe, and the FMA-bound kernel behind the
// measured FP32 peak; the cuBLAS GEMM rates behind a training step's MFU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "lab/check.hpp"
#include "lab/device.hpp"
#include "lab/launch.hpp"
#include "lab/memory.hpp"
#include "lab/rng.hpp"
#include "lab/stats.hpp"
#include "lab/timing.hpp"

namespace lab {

namespace {

constexpr int kFillThreads = 256;

int fill_blocks(std::size_t n) {
  // Grid-stride loops: enough blocks to fill any GPU, capped so tiny fills stay one wave.
  const std::size_t want = (n + kFillThreads - 1) / kFillThreads;
  return static_cast<int>(std::clamp<std::size_t>(want, 1, 65536));
}

// fp32 numbers, stored as T: for bf16 and fp16, the same numbers rounded to nearest.
template <class T>
__global__ void fill_uniform_kernel(T* p, std::size_t n, std::uint64_t key, float lo, float hi) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = T(rng_detail::uniform01_to(rng_detail::bits(key, i), lo, hi));
}

__global__ void fill_normal_kernel(float* p, std::size_t n, std::uint64_t key, float mean, float stddev) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<float>(mean + stddev * rng_detail::normal_from(rng_detail::bits(key, i)));
}

__global__ void fill_int_kernel(std::int32_t* p, std::size_t n, std::uint64_t key, std::int32_t lo, std::int32_t hi) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = rng_detail::int_in(rng_detail::bits(key, i), lo, hi);
}

__global__ void probe_kernel(int* out) { *out = 42; }

// Reads every 16 bytes of the buffer; the sum is stored only if it hits an impossible value, so
// the loads cannot be optimised away and nothing is written.
__global__ void read_flush_kernel(const int4* __restrict__ p, std::size_t n, int* sink) {
  int acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7F3A9C15) *sink = acc;
}

// One 16-byte load and store a thread.
__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

// Thread i loads word i of src (i < reads) and stores word i of dst (i < writes): the loaded word
// where there is one, else its index.
__global__ void move_kernel(const int4* __restrict__ src, std::size_t reads, int4* __restrict__ dst,
                            std::size_t writes, int* sink) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  int4 v = make_int4(int(i), 0, 0, 0);
  if (i < reads) v = src[i];
  if (i < writes)
    dst[i] = v;
  else if ((v.x ^ v.y ^ v.z ^ v.w) == 0x7F3A9C15)
    *sink = v.x;
}

// Eight independent FMA chains per thread keep every FP32 pipe busy; the result is stored only if
// it hits an impossible value, so the compiler must compute it but memory traffic is nil.
constexpr int kFmaChains = 8;
__global__ void fma_peak_kernel(float* out, int iters, float a, float b) {
  float x[kFmaChains];
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) x[j] = threadIdx.x * 1e-3f + j;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < kFmaChains; ++j) x[j] = fmaf(x[j], a, b);
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) s += x[j];
  if (s == -1.2345f) out[0] = s;
}

}  // namespace

void device_fill_uniform(float* p, std::size_t n, std::uint64_t key, float lo, float hi, cudaStream_t s) {
  if (!n) return;
  fill_uniform_kernel<<<fill_blocks(n), kFillThreads, 0, s>>>(p, n, key, lo, hi);
  LAB_CHECK_LAUNCH();
}

void device_fill_uniform(__nv_bfloat16* p, std::size_t n, std::uint64_t key, float lo, float hi, cudaStream_t s) {
  if (!n) return;
  fill_uniform_kernel<<<fill_blocks(n), kFillThreads, 0, s>>>(p, n, key, lo, hi);
  LAB_CHECK_LAUNCH();
}

void device_fill_uniform(__half* p, std::size_t n, std::uint64_t key, float lo, float hi, cudaStream_t s) {
  if (!n) return;
  fill_uniform_kernel<<<fill_blocks(n), kFillThreads, 0, s>>>(p, n, key, lo, hi);
  LAB_CHECK_LAUNCH();
}

void device_fill_normal(float* p, std::size_t n, std::uint64_t key, float mean, float stddev, cudaStream_t s) {
  if (!n) return;
  fill_normal_kernel<<<fill_blocks(n), kFillThreads, 0, s>>>(p, n, key, mean, stddev);
  LAB_CHECK_LAUNCH();
}

void device_fill_int(std::int32_t* p, std::size_t n, std::uint64_t key, std::int32_t lo, std::int32_t hi,
                     cudaStream_t s) {
  if (!n) return;
  if (hi <= lo) throw Error("device_fill_int: empty range");
  fill_int_kernel<<<fill_blocks(n), kFillThreads, 0, s>>>(p, n, key, lo, hi);
  LAB_CHECK_LAUNCH();
}

void read_through(const void* p, std::size_t bytes, int* sink, int sms, cudaStream_t s) {
  read_flush_kernel<<<sms * 8, 256, 0, s>>>(static_cast<const int4*>(p), bytes / sizeof(int4), sink);
  LAB_CHECK_LAUNCH();
}

void copy_through(void* dst, const void* src, std::size_t bytes, cudaStream_t s) {
  const std::size_t n = bytes / sizeof(int4);
  if (!n) return;
  copy_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(static_cast<const int4*>(src),
                                                                      static_cast<int4*>(dst), n);
  LAB_CHECK_LAUNCH();
}

void move_through(void* dst, std::size_t written, const void* src, std::size_t read, int* sink, cudaStream_t s) {
  const std::size_t reads = read / sizeof(int4), writes = written / sizeof(int4), n = std::max(reads, writes);
  if (!n) return;
  if (reads == writes) return copy_through(dst, src, read, s);
  move_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(static_cast<const int4*>(src), reads,
                                                                      static_cast<int4*>(dst), writes, sink);
  LAB_CHECK_LAUNCH();
}

namespace detail {
// Launches a one-thread kernel: fails with cudaErrorNoKernelImageForDevice when this binary holds
// no code for the device's architecture.
cudaError_t probe_device_code() {
  int* d = nullptr;
  cudaError_t r = cudaMalloc(&d, sizeof(int));
  if (r != cudaSuccess) return r;
  probe_kernel<<<1, 1>>>(d);
  r = cudaGetLastError();
  if (r == cudaSuccess) r = cudaDeviceSynchronize();
  int h = 0;
  if (r == cudaSuccess) r = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (r == cudaSuccess && h != 42) r = cudaErrorUnknown;
  return r;
}
}  // namespace detail

double measure_copy_bandwidth_gbs(std::size_t bytes) {
  DeviceBuffer<std::uint8_t> a(bytes, false), b(bytes, false);
  LAB_CHECK(cudaMemset(a.data(), 1, bytes));
  Stream s;
  Event e0, e1;
  std::vector<double> ms;
  for (int i = 0; i < 13; ++i) {
    e0.record(s);
    LAB_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, s));
    e1.record(s);
    e1.sync();
    if (i >= 3) ms.push_back(e1.elapsed_ms_since(e0));  // three warm-up copies
  }
  return 2.0 * static_cast<double>(bytes) / (stats::median(ms) * 1e-3) / 1e9;
}

double measure_fp32_tflops(const DeviceFacts& dev) {
  DeviceBuffer<float> out(1, false);
  Stream s;
  Event e0, e1;
  const int threads = 256, blocks = dev.sms * 8, iters = 1 << 16;
  std::vector<double> ms;
  for (int i = 0; i < 8; ++i) {
    e0.record(s);
    fma_peak_kernel<<<blocks, threads, 0, s>>>(out.data(), iters, 0.9999999f, 1e-7f);
    LAB_CHECK_LAUNCH();
    e1.record(s);
    e1.sync();
    if (i >= 2) ms.push_back(e1.elapsed_ms_since(e0));
  }
  const double flops = 2.0 * kFmaChains * static_cast<double>(iters) * threads * blocks;
  return flops / (stats::median(ms) * 1e-3) / 1e12;
}

namespace {

// An n x n x n product's rate in TFLOP/s: the median of 6 timed calls of gemm() after 2.
template <class Gemm>
double gemm_tflops(int n, Stream& s, Gemm&& gemm) {
  Event e0, e1;
  std::vector<double> ms;
  for (int i = 0; i < 8; ++i) {
    e0.record(s);
    gemm();
    e1.record(s);
    e1.sync();
    if (i >= 2) ms.push_back(e1.elapsed_ms_since(e0));
  }
  return 2.0 * double(n) * double(n) * double(n) / (stats::median(ms) * 1e-3) / 1e12;
}

__global__ void to_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y, std::size_t n) {
  for (std::size_t i : grid_stride(n)) y[i] = __float2bfloat16(x[i]);
}

}  // namespace

double measure_sgemm_tflops(int n) {
  if (n < 1) throw UsageError("measure_sgemm_tflops: n must be positive");
  const std::size_t nn = std::size_t(n) * n;
  DeviceBuffer<float> a(nn), b(nn), c(nn);
  Stream s;
  Rng(11).uniform(a, -1.f, 1.f, s);
  Rng(12).uniform(b, -1.f, 1.f, s);
  CublasHandle h(s);
  LAB_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // FP32 on the CUDA cores, no TF32
  const float one = 1.f, zero = 0.f;
  return gemm_tflops(n, s, [&] {
    LAB_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, b.data(), n, &zero, c.data(), n));
  });
}

double measure_bf16_gemm_tflops(int n) {
  if (n < 1) throw UsageError("measure_bf16_gemm_tflops: n must be positive");
  const std::size_t nn = std::size_t(n) * n;
  DeviceBuffer<float> c(nn);  // the fp32 draws first, then the product
  DeviceBuffer<__nv_bfloat16> a(nn), b(nn);
  Stream s;
  for (auto [buf, seed] : {std::pair{&a, 11}, std::pair{&b, 12}}) {
    Rng(seed).uniform(c, -1.f, 1.f, s);
    to_bf16_kernel<<<1024, 256, 0, s>>>(c.data(), buf->data(), nn);
    LAB_CHECK(cudaGetLastError());
  }
  CublasHandle h(s);
  const float one = 1.f, zero = 0.f;
  return gemm_tflops(n, s, [&] {
    LAB_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16BF, n, b.data(), CUDA_R_16BF,
                           n, &zero, c.data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
}

}  // namespace lab
