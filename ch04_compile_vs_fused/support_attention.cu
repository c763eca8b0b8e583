// What the attention variants share: the double-precision reference, the inputs, the eager
// forward (the baseline, and the state the backward problems start from), the cuBLAS products and
// the row sums of dO o O.
#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "attention.cuh"

namespace attn {

HeadReference reference_head(const float* q, const float* k, const float* v, const float* dout, int seq, int d,
                             bool causal, Precision prec) {
  constexpr double u = lab::fp32::kUnitRoundoff;
  using lab::fp32::sum_error;
  const double scale = 1.0 / std::sqrt(double(d));
  const std::size_t n = std::size_t(seq) * d;
  const double e_qk = sum_error(d + 2.0) + prec.term;                    // of each score, on scale sum |q k|
  const double e_exp_sum = sum_error(seq + 512.0);                       // the sum of exp, with rescales
  const double e_pv = prec.stored + prec.term + sum_error(seq + 1.0);    // a sum over keys of P x
  HeadReference r;
  r.o.assign(n, 0.0);
  r.o_slack.assign(n, 0.0);
  r.lse.assign(std::size_t(seq), 0.0);
  r.lse_slack.assign(std::size_t(seq), 0.0);
  std::vector<double> p(std::size_t(seq) * seq, 0.0);  // P, row by row
  std::vector<double> rho(std::size_t(seq), 0.0);      // P's relative error, per row
  for (int i = 0; i < seq; ++i) {
    const int last = causal ? i : seq - 1;
    double* pi = &p[std::size_t(i) * seq];
    double m = -std::numeric_limits<double>::infinity(), lo = std::numeric_limits<double>::infinity(), e_s = 0;
    for (int j = 0; j <= last; ++j) {
      double s = 0, mag = 0;
      for (int c = 0; c < d; ++c) {
        const double t = double(q[std::size_t(i) * d + c]) * double(k[std::size_t(j) * d + c]);
        s += t, mag += std::fabs(t);
      }
      pi[j] = s * scale;
      e_s = std::max(e_s, e_qk * scale * mag);
      m = std::max(m, pi[j]);
      lo = std::min(lo, pi[j]);
    }
    double l = 0;
    for (int j = 0; j <= last; ++j) l += std::exp(pi[j] - m);
    r.lse[std::size_t(i)] = m + std::log(l);
    const double range = m - lo;
    const double e_exp = e_exp_sum + 8 * range * u + 3 * (std::fabs(m) + range) * u + 8 * u;
    rho[std::size_t(i)] = 2 * e_s + e_exp + 4 * u;
    r.lse_slack[std::size_t(i)] = e_s + e_exp + 0x1p-21 + 6 * u * std::log(l) + 2 * u * std::fabs(r.lse[std::size_t(i)]);
    const double e_o = rho[std::size_t(i)] + e_pv;
    for (int j = 0; j <= last; ++j) {
      pi[j] = std::exp(pi[j] - m) / l;
      for (int c = 0; c < d; ++c) {
        const double vj = double(v[std::size_t(j) * d + c]);
        r.o[std::size_t(i) * d + c] += pi[j] * vj;
        r.o_slack[std::size_t(i) * d + c] += e_o * pi[j] * std::fabs(vj);
      }
    }
  }
  if (!dout) return r;
  r.dq.assign(n, 0.0);
  r.dk.assign(n, 0.0);
  r.dv.assign(n, 0.0);
  r.dq_slack.assign(n, 0.0);
  r.dk_slack.assign(n, 0.0);
  r.dv_slack.assign(n, 0.0);
  const double e_dp = sum_error(d + 1.0) + prec.term;  // of dP_ij, on sum_c |dO_ic V_jc|
  const double e_ds_sum = sum_error(seq + 1.0);        // of dQ and dK's sums over keys or queries
  std::vector<double> grad(static_cast<std::size_t>(seq));    // dS of row i, scaled
  std::vector<double> grad_e(static_cast<std::size_t>(seq));  // its slack, with the stored rounding
  for (int i = 0; i < seq; ++i) {
    const int last = causal ? i : seq - 1;
    const double* pi = &p[std::size_t(i) * seq];
    const float* doi = dout + std::size_t(i) * d;
    const double rho_i = rho[std::size_t(i)];
    double delta = 0;  // sum_j P dP = sum_c dO O
    for (int c = 0; c < d; ++c) delta += double(doi[c]) * r.o[std::size_t(i) * d + c];
    // M_i = sum_j P_ij sum_c |dO_ic V_jc|: bounds both forms of delta's terms.
    std::vector<double> dp_mag(std::size_t(last) + 1), dp_minus(std::size_t(last) + 1);
    double big_m = 0;
    for (int j = 0; j <= last; ++j) {
      double dp = 0, mag = 0;
      for (int c = 0; c < d; ++c) {
        const double t = double(doi[c]) * double(v[std::size_t(j) * d + c]);
        dp += t, mag += std::fabs(t);
        r.dv[std::size_t(j) * d + c] += pi[j] * double(doi[c]);
        r.dv_slack[std::size_t(j) * d + c] += (rho_i + e_pv) * pi[j] * std::fabs(double(doi[c]));
      }
      dp_minus[std::size_t(j)] = dp - delta;
      grad[std::size_t(j)] = pi[j] * (dp - delta) * scale;
      dp_mag[std::size_t(j)] = mag;
      big_m += pi[j] * mag;
    }
    const double e_delta = (3 * sum_error(seq + d + 2.0) + 2 * rho_i + 3 * prec.term + prec.stored) * big_m;
    for (int j = 0; j <= last; ++j) {
      grad_e[std::size_t(j)] = scale * (pi[j] * (e_dp * dp_mag[std::size_t(j)] + e_delta) +
                                        rho_i * pi[j] * std::fabs(dp_minus[std::size_t(j)])) +
                               (3 * u + prec.stored + prec.term) * std::fabs(grad[std::size_t(j)]);
    }
    for (int j = 0; j <= last; ++j)
      for (int c = 0; c < d; ++c) {
        const double g = grad[std::size_t(j)], ge = grad_e[std::size_t(j)];
        const double kj = double(k[std::size_t(j) * d + c]), qi = double(q[std::size_t(i) * d + c]);
        r.dq[std::size_t(i) * d + c] += g * kj;
        r.dk[std::size_t(j) * d + c] += g * qi;
        r.dq_slack[std::size_t(i) * d + c] += (ge + e_ds_sum * std::fabs(g)) * std::fabs(kj);
        r.dk_slack[std::size_t(j) * d + c] += (ge + e_ds_sum * std::fabs(g)) * std::fabs(qi);
      }
  }
  return r;
}

Inputs::Inputs(const lab::Shape& s, lab::Rng& rng) : dims(s), q(dims.elements()), k(dims.elements()), v(dims.elements()) {
  rng.uniform(q, -1.f, 1.f);
  rng.uniform(k, -1.f, 1.f);
  rng.uniform(v, -1.f, 1.f);
}

std::optional<Precision> precision_named(const std::string& name) {
  if (name == "fp32" || name == "3xtf32") return Precision::fp32();
  if (name == "bf16") return Precision::bf16();
  return std::nullopt;
}

Bf16Inputs::Bf16Inputs(const Inputs& in, cudaStream_t stream, const float* dout_f32)
    : q(in.dims.elements()), k(in.dims.elements()), v(in.dims.elements()) {
  to_bf16(in.q.data(), q.data(), in.dims.elements(), stream);
  to_bf16(in.k.data(), k.data(), in.dims.elements(), stream);
  to_bf16(in.v.data(), v.data(), in.dims.elements(), stream);
  if (dout_f32) {
    dout = lab::DeviceBuffer<__nv_bfloat16>(in.dims.elements());
    to_bf16(dout_f32, dout.data(), in.dims.elements(), stream);
  }
}

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t work) {
  return static_cast<unsigned>(std::min<std::size_t>((work + kThreads - 1) / kThreads, std::size_t{1} << 20));
}

// Eager's `S * scale`: one element-wise kernel, 16-byte accesses, the last n % 4 elements one by one.
__global__ void scale_kernel(const float* __restrict__ in, float* __restrict__ out, std::size_t n, float scale) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x, quads = n / 4;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < quads; i += stride) {
    float4 x = reinterpret_cast<const float4*>(in)[i];
    x.x *= scale, x.y *= scale, x.z *= scale, x.w *= scale;
    reinterpret_cast<float4*>(out)[i] = x;
  }
  for (std::size_t i = 4 * quads + std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = in[i] * scale;
}

// Eager's `S.masked_fill_(mask, -inf)`: the entries above the diagonal of every seq x seq matrix.
__global__ void causal_mask_kernel(float* s, std::size_t n, int seq, float fill) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::size_t in_head = i % (std::size_t(seq) * seq);
    if (in_head % seq > in_head / seq) s[i] = fill;
  }
}

// (max, sum of exp(x - max)) pairs combined: the online softmax's step.
struct MaxSum {
  float m, l;
};
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.l * __expf(a.m - m) + b.l * __expf(b.m - m)};
}

// Eager's softmax: a block a row. Pass 1 keeps a running (max, sum) per thread over its strided
// elements (one read), then the block combines them; pass 2 reads the row again (from L2: a row
// is at most 256 KiB) and writes exp(x - max) / sum. Masked entries (-inf) give 0.
__global__ void softmax_kernel(const float* __restrict__ s, float* __restrict__ p, float* __restrict__ lse, int cols) {
  const std::size_t row = blockIdx.x;
  const float* in = s + row * cols;
  float* out = p + row * cols;
  MaxSum t{-INFINITY, 0.f};
  for (int j = threadIdx.x; j < cols; j += blockDim.x) t = combine(t, MaxSum{in[j], 1.f});
  for (int o = 16; o > 0; o /= 2) t = combine(t, MaxSum{__shfl_xor_sync(~0u, t.m, o), __shfl_xor_sync(~0u, t.l, o)});
  __shared__ MaxSum warps[kThreads / 32];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = t;
  __syncthreads();
  MaxSum all = warps[0];
  for (int w = 1; w < kThreads / 32; ++w) all = combine(all, warps[w]);
  const float inv = 1.f / all.l;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = __expf(in[j] - all.m) * inv;
  if (lse && threadIdx.x == 0) lse[row] = all.m + logf(all.l);
}

__global__ void to_bf16_kernel(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, std::size_t n) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = __float2bfloat16_rn(in[i]);
}

// out[m][c][r] = in[m][r][c] for r < rows, 0 for rows <= r < rows_padded: 32 x 32 tiles through
// shared memory, so that both the reads and the writes are coalesced.
__global__ void transpose_bf16_kernel(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out, int rows,
                                      int cols, int rows_padded) {
  __shared__ __nv_bfloat16 tile[32][34];
  const std::size_t m = blockIdx.z;
  const int r0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
  for (int y = threadIdx.y; y < 32; y += 8) {
    const int r = r0 + y, c = c0 + threadIdx.x;
    tile[y][threadIdx.x] = r < rows && c < cols ? in[(m * rows + r) * cols + c] : __float2bfloat16(0.f);
  }
  __syncthreads();
  for (int y = threadIdx.y; y < 32; y += 8) {
    const int c = c0 + y, r = r0 + threadIdx.x;
    if (c < cols && r < rows_padded) out[(m * cols + c) * rows_padded + r] = tile[threadIdx.x][y];
  }
}

__global__ void row_dot_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                               std::size_t rows, int d) {
  const std::size_t row = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float acc = 0;
  for (int c = lane; c < d; c += 32) acc += a[row * d + c] * b[row * d + c];
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(~0u, acc, o);
  if (lane == 0) out[row] = acc;
}

}  // namespace

void gemm_nt(cublasHandle_t blas, const Dims& a, float alpha, const float* A, const float* B, float* C) {
  // Row-major C = A B^T is column-major C^T = B A^T: cuBLAS sees A, B as d x seq (lda d).
  const float zero = 0.f;
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  LAB_CHECK(cublasSgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, a.seq, a.seq, a.d, &alpha, B, a.d, sd, A, a.d,
                                      sd, &zero, C, a.seq, ss, a.bh()));
}

void gemm_nn(cublasHandle_t blas, const Dims& a, float alpha, const float* P, const float* X, float* C) {
  // Row-major C = P X is column-major C^T (d x seq) = X^T P^T.
  const float zero = 0.f;
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  LAB_CHECK(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, a.d, a.seq, a.seq, &alpha, X, a.d, sd, P, a.seq,
                                      ss, &zero, C, a.d, sd, a.bh()));
}

void gemm_tn(cublasHandle_t blas, const Dims& a, float alpha, const float* P, const float* X, float* C) {
  // Row-major C = P^T X is column-major C^T = X^T P: P's buffer read column-major is P^T, so op T.
  const float zero = 0.f;
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  LAB_CHECK(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_T, a.d, a.seq, a.seq, &alpha, X, a.d, sd, P, a.seq,
                                      ss, &zero, C, a.d, sd, a.bh()));
}

void use_stream(cublasHandle_t blas, cudaStream_t stream) {
  LAB_CHECK(cublasSetStream(blas, stream));
  LAB_CHECK(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));
}

const lab::jit::RowKernel& compiled_row_kernel(lab::jit::RowOp op, const Dims& a) {
  static std::mutex m;
  static std::map<std::tuple<lab::jit::RowOp, int, bool>, lab::jit::RowKernel> kernels;
  std::lock_guard lock(m);
  const auto key = std::tuple{op, a.d, a.causal};
  auto it = kernels.find(key);
  if (it == kernels.end()) {
    const lab::jit::Expr e = op == lab::jit::RowOp::softmax ? compiled_prologue(a.scale(), a.causal)
                                                            : compiled_epilogue(a.scale(), a.causal);
    it = kernels.emplace(key, lab::jit::RowKernel::build(op, e, lab::jit::Cache::global(), "attention")).first;
  }
  return it->second;
}

void eager_forward(cublasHandle_t blas, const Dims& a, const float* q, const float* k, const float* v, float* scores,
                   float* probs, float* o, float* lse, cudaStream_t stream) {
  use_stream(blas, stream);
  const std::size_t n = a.scores();
  gemm_nt(blas, a, 1.f, q, k, scores);            // S = Q K^T
  scale(scores, probs, n, a.scale(), stream);     // S * scale
  if (a.causal) causal_mask(probs, a, -INFINITY, stream);  // masked_fill(-inf)
  softmax_kernel<<<static_cast<unsigned>(a.rows()), kThreads, 0, stream>>>(probs, scores, lse, a.seq);  // P
  LAB_CHECK(cudaGetLastError());
  gemm_nn(blas, a, 1.f, scores, v, o);  // O = P V
}

void scale(const float* in, float* out, std::size_t n, float scale, cudaStream_t stream) {
  scale_kernel<<<blocks_for(n / 4 + 1), kThreads, 0, stream>>>(in, out, n, scale);
  LAB_CHECK(cudaGetLastError());
}

void causal_mask(float* s, const Dims& a, float fill, cudaStream_t stream) {
  causal_mask_kernel<<<blocks_for(a.scores()), kThreads, 0, stream>>>(s, a.scores(), a.seq, fill);
  LAB_CHECK(cudaGetLastError());
}

void to_bf16(const float* in, __nv_bfloat16* out, std::size_t n, cudaStream_t stream) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
  LAB_CHECK(cudaGetLastError());
}

void transpose_bf16(const __nv_bfloat16* in, __nv_bfloat16* out, int matrices, int rows, int cols, int rows_padded,
                    cudaStream_t stream) {
  const dim3 grid((rows_padded + 31) / 32, (cols + 31) / 32, matrices);
  transpose_bf16_kernel<<<grid, dim3(32, 8), 0, stream>>>(in, out, rows, cols, rows_padded);
  LAB_CHECK(cudaGetLastError());
}

void row_dot(const float* dout, const float* o, float* delta, std::size_t rows, int d, cudaStream_t stream) {
  row_dot_kernel<<<blocks_for(rows * 32), kThreads, 0, stream>>>(dout, o, delta, rows, d);
  LAB_CHECK(cudaGetLastError());
}

}  // namespace attn

namespace {

// Compares an output of every head with the reference member that `pick` chooses, and its slack.
template <class Pick>
lab::Verdict compare_heads(const attn::Dims& a, const std::vector<float>& got, Pick pick,
                           const std::vector<attn::HeadReference>& refs, lab::Tolerance tol, const char* what,
                           std::size_t per_head) {
  std::vector<double> ref, slack;
  ref.reserve(got.size());
  slack.reserve(got.size());
  for (const auto& r : refs) {
    const auto& [x, e] = pick(r);
    ref.insert(ref.end(), x.begin(), x.end());
    slack.insert(slack.end(), e.begin(), e.end());
  }
  std::vector<std::int64_t> dims{a.batch, a.heads, a.seq};
  if (per_head != std::size_t(a.seq)) dims.push_back(a.d);
  return lab::compare(got, ref, tol, what, dims, slack);
}

// Every head's reference; with dout (host copy of dO), the backward's too.
std::vector<attn::HeadReference> references(const attn::Inputs& in, const std::vector<float>* dout,
                                            attn::Precision prec) {
  const attn::Dims& a = in.dims;
  const auto hq = in.q.download(), hk = in.k.download(), hv = in.v.download();
  std::vector<attn::HeadReference> refs;
  const std::size_t head = std::size_t(a.seq) * a.d;
  for (int h = 0; h < a.bh(); ++h)
    refs.push_back(attn::reference_head(hq.data() + h * head, hk.data() + h * head, hv.data() + h * head,
                                        dout ? dout->data() + h * head : nullptr, a.seq, a.d, a.causal, prec));
  return refs;
}


// The precision the variant declares. Every precision is judged by fp32's tolerance plus the slack
// of its own arithmetic (attn::Precision).
attn::Precision precision_of(const lab::Problem& p) {
  const auto prec = attn::precision_named(p.declared().precision);
  if (!prec)
    throw lab::Error("attention: the variant declares precision '" + p.declared().precision +
                     "', which the reference does not model (fp32, 3xtf32 or bf16)");
  return *prec;
}

lab::Tolerance tolerance_for(attn::Precision prec) {
  lab::Tolerance t = lab::Tolerance::fp32();
  t.name = prec.name;
  return t;
}

using Pair = std::pair<const std::vector<double>&, const std::vector<double>&>;

}  // namespace

lab::Verdict Attention::Problem::verify() {
  const attn::Precision prec = precision_of(*this);
  const auto refs = references(*this, nullptr, prec);
  const lab::Tolerance tol = tolerance_for(prec);
  lab::Verdict v = compare_heads(dims, o.download(), [](const auto& r) { return Pair(r.o, r.o_slack); }, refs, tol, "O",
                                 std::size_t(dims.seq) * dims.d);
  if (declared().writes_output("lse"))
    v.also(compare_heads(dims, lse.download(), [](const auto& r) { return Pair(r.lse, r.lse_slack); }, refs, tol,
                         "lse", std::size_t(dims.seq)));
  return v;
}

AttentionBackward::Problem::Problem(const lab::Shape& s, lab::Rng& rng)
    : attn::Inputs(s, rng), dout(dims.elements()), dq(dims.elements()), dk(dims.elements()), dv(dims.elements()) {
  rng.uniform(dout, -1.f, 1.f);
}

namespace attn {

SavedProbs::SavedProbs(cublasHandle_t blas, const Inputs& in, cudaStream_t stream) : probs(in.dims.scores()) {
  lab::DeviceBuffer<float> scratch(in.dims.scores()), out(in.dims.elements());
  eager_forward(blas, in.dims, in.q.data(), in.k.data(), in.v.data(), probs.data(), scratch.data(), out.data(), nullptr,
                stream);
  LAB_CHECK(cudaStreamSynchronize(stream));
}

SavedOutput::SavedOutput(const Inputs& in, cudaStream_t stream)
    : o(in.dims.elements()), lse(in.dims.rows()), delta(in.dims.rows()) {
  const Dims& dims = in.dims;
  {
    lab::CublasHandle blas;
    // Heads a group at a time, so the scratch stays near 256 MiB (at least one head).
    const std::size_t per_head = std::size_t(dims.seq) * dims.seq;
    const int group = static_cast<int>(std::clamp<std::size_t>((std::size_t(64) << 20) / per_head, 1, dims.bh()));
    lab::DeviceBuffer<float> s1(per_head * group), s2(per_head * group);
    const std::size_t head = std::size_t(dims.seq) * dims.d;
    for (int h = 0; h < dims.bh(); h += group) {
      Dims part = dims;
      part.batch = std::min(group, dims.bh() - h), part.heads = 1;
      eager_forward(blas, part, in.q.data() + h * head, in.k.data() + h * head, in.v.data() + h * head, s1.data(),
                    s2.data(), o.data() + h * head, lse.data() + std::size_t(h) * dims.seq, stream);
    }
    LAB_CHECK(cudaStreamSynchronize(stream));
  }
  lab::reset_device_memory_peak();
}

void SavedOutput::prologue(const Dims& a, const float* dout, float* dq, cudaStream_t stream) {
  row_dot(dout, o.data(), delta.data(), a.rows(), a.d, stream);
  LAB_CHECK(cudaMemsetAsync(dq, 0, a.elements() * sizeof(float), stream));
}

}  // namespace attn

lab::Verdict AttentionBackward::Problem::verify() {
  const auto hdout = dout.download();
  const attn::Precision prec = precision_of(*this);
  const auto refs = references(*this, &hdout, prec);
  const lab::Tolerance tol = tolerance_for(prec);
  const std::size_t per_head = std::size_t(dims.seq) * dims.d;
  // With one key, P = 1 whatever the scores: dQ and dK are identically zero, checked so.
  lab::Verdict v = compare_heads(dims, dv.download(), [](const auto& r) { return Pair(r.dv, r.dv_slack); }, refs, tol,
                                 "dV", per_head);
  v.also(compare_heads(dims, dq.download(), [](const auto& r) { return Pair(r.dq, r.dq_slack); }, refs, tol, "dQ",
                       per_head));
  return v.also(compare_heads(dims, dk.download(), [](const auto& r) { return Pair(r.dk, r.dk_slack); }, refs, tol,
                              "dK", per_head));
}
