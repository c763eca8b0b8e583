// The model's reference: forward, backward and the AdamW step, written once over a scalar type T
// (gpt2_model.hpp). T = double is the reference value; T = float runs the same formulas in fp32
// (the tests' stand-in for a GPU kernel, in another order of addition than any GPU kernel's); T =
// Perturbed is Monte Carlo arithmetic (Parker 1997; Verificarlo): double precision in which the
// result of every operation is multiplied by (1 + delta), delta uniform in [-k u, k u] with u =
// 2^-24, fp32's unit roundoff, and k = 1 for + - * (a correct rounding), 2 for a division, 4 for
// exp, log, erf, tanh, sqrt (the GPU's 2-ulp approximations: __expf, erff, rsqrtf). A handful of
// such runs measure how much fp32 rounding moves each output: its conditioning, through the whole
// model, measured instead of guessed. What the fused kernels compute differently is perturbed
// explicitly: the online softmax's rescales (4u a 64-key tile), and the attention backward's row
// sums, taken as rowsum(dP o P) in even runs and rowsum(dO o O) (the fused backward's) in odd ones.
// expected() makes those runs; how a kernel's outputs are judged against them is gpt2_judge.cpp.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "gpt2/gpt2_model.hpp"
#include "gpt2/reference_arithmetic.hpp"
#include "lab/rng.hpp"
#include "lab/verify.hpp"

namespace gpt2 {

namespace {

using namespace arith;

// ---- The layers -------------------------------------------------------------------------------

template <class T>
struct LnCache {
  std::vector<T> xhat, rstd;
};

// y = (x - mean) rstd w + b, row by row.
template <class T>
void layernorm(const T* x, const T* w, const T* b, std::size_t rows, int d, T* y, LnCache<T>& cache) {
  cache.xhat.assign(rows * d, cst<T>(0));
  cache.rstd.assign(rows, cst<T>(0));
  std::vector<T> xc(d);
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    const T mean = sum_(xr, 1, d) * cst<T>(1.0 / d);
    for (int j = 0; j < d; ++j) xc[j] = xr[j] - mean;
    T var = dot_(xc.data(), 1, xc.data(), 1, d) * cst<T>(1.0 / d);
    const T rstd = cst<T>(1) / sqrt_(var + cst<T>(kLayerNormEps));
    cache.rstd[r] = rstd;
    for (int j = 0; j < d; ++j) {
      const T xh = xc[j] * rstd;
      cache.xhat[r * d + j] = xh;
      y[r * d + j] = xh * w[j] + b[j];
    }
  }
}

// dx (written), dw and db (written: the column sums over the rows).
template <class T>
void layernorm_backward(const T* dy, const T* w, const LnCache<T>& cache, std::size_t rows, int d, T* dx, T* dw,
                        T* db) {
  std::vector<T> g(d), gx(d);
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xh = cache.xhat.data() + r * d;
    for (int j = 0; j < d; ++j) g[j] = dy[r * d + j] * w[j];
    const T mean_g = sum_(g.data(), 1, d) * cst<T>(1.0 / d);
    const T mean_gx = dot_(g.data(), 1, xh, 1, d) * cst<T>(1.0 / d);
    for (int j = 0; j < d; ++j)
      dx[r * d + j] = cache.rstd[r] * (centred_product(dy[r * d + j], w[j], g[j], mean_g) - xh[j] * mean_gx);
  }
  for (int j = 0; j < d; ++j) {
    dw[j] = dot_(dy + j, d, cache.xhat.data() + j, d, rows);
    db[j] = sum_(dy + j, d, rows);
  }
}

// Y (M x N) = X (M x K) W^T + b, W as nn.Linear holds it (N x K); b may be null.
template <class T>
void linear(const T* X, const T* W, const T* b, std::size_t M, int N, int K, T* Y) {
  const Operand<T> x(X, M * K, mc_operand_error), w(W, std::size_t(N) * K, mc_operand_error);
  for (std::size_t i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const T s = product_dot_(x.data() + i * K, 1, w.data() + std::size_t(j) * K, 1, K);
      Y[i * N + j] = b ? s + b[j] : s;
    }
}

// dX = dY W (written), dW = dY^T X and db = column sums of dY (written; db may be null).
template <class T>
void linear_backward(const T* dY, const T* X, const T* W, std::size_t M, int N, int K, T* dX, T* dW, T* db) {
  const Operand<T> dy(dY, M * N, mc_operand_error), x(X, M * K, mc_operand_error),
      w(W, std::size_t(N) * K, mc_operand_error);
  for (std::size_t i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) dX[i * K + k] = product_dot_(dy.data() + i * N, 1, w.data() + k, K, N);
  for (int j = 0; j < N; ++j)
    for (int k = 0; k < K; ++k) dW[std::size_t(j) * K + k] = product_dot_(dy.data() + j, N, x.data() + k, K, M);
  if (db)
    for (int j = 0; j < N; ++j) db[j] = sum_(dY + j, N, M);
}

template <class T>
T gelu(T x, ModelOptions::Gelu kind) {
  if (kind == ModelOptions::Gelu::erf) return cst<T>(0.5) * x * (cst<T>(1) + erf_(x * cst<T>(0.7071067811865476)));
  const T a = cst<T>(0.7978845608028654) * (x + cst<T>(0.044715) * x * x * x);
  return cst<T>(0.5) * x * (cst<T>(1) + tanh_(a));
}
template <class T>
T gelu_grad(T x, ModelOptions::Gelu kind) {
  if (kind == ModelOptions::Gelu::erf)
    return cst<T>(0.5) * (cst<T>(1) + erf_(x * cst<T>(0.7071067811865476))) +
           x * exp_(cst<T>(-0.5) * x * x) * cst<T>(0.3989422804014327);
  const T a = cst<T>(0.7978845608028654) * (x + cst<T>(0.044715) * x * x * x), t = tanh_(a);
  return cst<T>(0.5) * (cst<T>(1) + t) +
         cst<T>(0.5) * x * (cst<T>(1) - t * t) * cst<T>(0.7978845608028654) *
             (cst<T>(1) + cst<T>(3 * 0.044715) * x * x);
}

// ---- The model --------------------------------------------------------------------------------

template <class T>
struct Block {
  std::vector<T> x_in, ln1, qkv, probs, att, x_mid, ln2, fc, act;
  LnCache<T> n1, n2;
};

template <class T>
class Model {
 public:
  Model(const Config& c, std::span<const float> params, const ModelOptions& o)
      : c_(c), o_(o), off_(offsets(c)), P_(params.begin(), params.end()) {
    B_ = c.batch, T_ = c.context, d_ = c.d, h_ = c.heads, hd_ = c.head_dim(), V_ = c.vocab;
    BT_ = c.tokens();
  }

  T forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets) {
    tokens_ = tokens, targets_ = targets;
    std::vector<T> x(BT_ * d_);
    for (std::size_t i = 0; i < BT_; ++i) {
      const std::size_t t = i % T_;
      for (int j = 0; j < d_; ++j)
        x[i * d_ + j] = p(off_.wte + std::size_t(tokens[i]) * d_ + j) + p(off_.wpe + t * d_ + j);
    }
    blocks_.assign(c_.layers, {});
    for (int l = 0; l < c_.layers; ++l) x = block_forward(l, std::move(x));
    x_final_ = std::move(x);
    lnf_.assign(BT_ * d_, cst<T>(0));
    layernorm(x_final_.data(), &P_[off_.lnf_w], &P_[off_.lnf_b], BT_, d_, lnf_.data(), nf_);
    std::vector<T> logits(BT_ * V_);
    {
      const Fp32Products head(o_.head_in_fp32);
      linear<T>(lnf_.data(), &P_[off_.head], nullptr, BT_, V_, d_, logits.data());
    }
    if (o_.logits_in_bf16)
      for (T& z : logits) keep_in_bf16(z);
    // Cross-entropy, mean over the positions; probs kept for the backward.
    probs_.assign(BT_ * V_, cst<T>(0));
    std::vector<T> losses(BT_), e(V_);
    for (std::size_t i = 0; i < BT_; ++i) {
      const T* z = logits.data() + i * V_;
      T m = z[0];
      for (int j = 1; j < V_; ++j) m = max_(m, z[j]);
      for (int j = 0; j < V_; ++j) e[j] = exp_(z[j] - m);
      const T s = sum_(e.data(), 1, V_);
      for (int j = 0; j < V_; ++j) probs_[i * V_ + j] = e[j] / s;
      losses[i] = m + log_(s) - z[targets[i]];
    }
    return sum_(losses.data(), 1, BT_) * cst<T>(1.0 / double(BT_));
  }

  // Every parameter's gradient, flat, after forward().
  std::vector<T> backward() {
    std::vector<T> G(P_.size(), cst<T>(0));
    std::vector<T> dlogits(BT_ * V_);
    const T inv = cst<T>(1.0 / double(BT_));
    for (std::size_t i = 0; i < BT_; ++i)
      for (int j = 0; j < V_; ++j) {
        const T pj = probs_[i * V_ + j];
        dlogits[i * V_ + j] = (j == targets_[i] ? pj - cst<T>(1) : pj) * inv;
      }
    std::vector<T> dlnf(BT_ * d_), dx(BT_ * d_);
    {
      const Fp32Products head(o_.head_in_fp32);
      linear_backward<T>(dlogits.data(), lnf_.data(), &P_[off_.head], BT_, V_, d_, dlnf.data(), &G[off_.head],
                         nullptr);
    }
    keep_ln_grad(dlnf);
    layernorm_backward<T>(dlnf.data(), &P_[off_.lnf_w], nf_, BT_, d_, dx.data(), &G[off_.lnf_w], &G[off_.lnf_b]);
    for (int l = c_.layers - 1; l >= 0; --l) dx = block_backward(l, std::move(dx), G);
    // The embeddings: each row of wte gathers the positions that hold its token, each row of wpe
    // the batch's positions t.
    std::vector<std::vector<std::size_t>> where(V_);
    for (std::size_t i = 0; i < BT_; ++i) where[tokens_[i]].push_back(i);
    std::vector<T> terms;
    for (int v = 0; v < V_; ++v)
      for (int j = 0; j < d_ && !where[v].empty(); ++j) {
        terms.clear();
        for (std::size_t i : where[v]) terms.push_back(dx[i * d_ + j]);
        G[off_.wte + std::size_t(v) * d_ + j] = sum_(terms.data(), 1, terms.size());
      }
    for (int t = 0; t < T_; ++t)
      for (int j = 0; j < d_; ++j) G[off_.wpe + std::size_t(t) * d_ + j] = sum_(&dx[std::size_t(t) * d_ + j], T_ * d_, B_);
    return G;
  }

 private:
  T p(std::size_t i) const { return P_[i]; }

  // A LayerNorm's output gradient, as the product before its backward wrote it: kept in bf16 where
  // the model says (ModelOptions::ln_grad_in_bf16).
  void keep_ln_grad(std::vector<T>& g) const {
    if (o_.ln_grad_in_bf16)
      for (T& x : g) keep_in_bf16(x);
  }

  // The n biases from P_[at], or (ModelOptions::epilogue_bias_in_bf16) their copy kept in bf16.
  const T* epilogue_bias(std::size_t at, std::size_t n, std::vector<T>& copy) const {
    if (!o_.epilogue_bias_in_bf16) return &P_[at];
    copy.assign(P_.begin() + std::ptrdiff_t(at), P_.begin() + std::ptrdiff_t(at + n));
    for (T& x : copy) keep_in_bf16(x);
    return copy.data();
  }

  std::vector<T> block_forward(int l, std::vector<T> x) {
    Block<T>& b = blocks_[l];
    const BlockOffsets& o = off_.blocks[l];
    b.x_in = std::move(x);
    b.ln1.assign(BT_ * d_, cst<T>(0));
    layernorm(b.x_in.data(), &P_[o.ln1_w], &P_[o.ln1_b], BT_, d_, b.ln1.data(), b.n1);
    b.qkv.assign(BT_ * 3 * d_, cst<T>(0));
    std::vector<T> bias;  // a bias in bf16, where the model keeps it so (epilogue_bias)
    linear<T>(b.ln1.data(), &P_[o.qkv_w], epilogue_bias(o.qkv_b, 3 * d_, bias), BT_, 3 * d_, d_, b.qkv.data());
    attention(b);
    std::vector<T> proj(BT_ * d_);
    linear<T>(b.att.data(), &P_[o.proj_w], &P_[o.proj_b], BT_, d_, d_, proj.data());
    b.x_mid.assign(BT_ * d_, cst<T>(0));
    for (std::size_t i = 0; i < BT_ * d_; ++i) b.x_mid[i] = b.x_in[i] + proj[i];
    b.ln2.assign(BT_ * d_, cst<T>(0));
    layernorm(b.x_mid.data(), &P_[o.ln2_w], &P_[o.ln2_b], BT_, d_, b.ln2.data(), b.n2);
    b.fc.assign(BT_ * 4 * d_, cst<T>(0));
    linear<T>(b.ln2.data(), &P_[o.fc_w], epilogue_bias(o.fc_b, 4 * d_, bias), BT_, 4 * d_, d_, b.fc.data());
    if (o_.planted_fc_odd_scale != 1)  // a planted mistake (the tests of the check's sensitivity)
      for (std::size_t i = 1; i < b.fc.size(); i += 2) b.fc[i] = b.fc[i] * cst<T>(o_.planted_fc_odd_scale);
    if (o_.hidden_in_bf16)
      for (T& h : b.fc) keep_in_bf16(h);
    b.act.resize(b.fc.size());
    for (std::size_t i = 0; i < b.fc.size(); ++i) b.act[i] = gelu(b.fc[i], o_.gelu);
    std::vector<T> out(BT_ * d_);
    linear<T>(b.act.data(), &P_[o.fc2_w], &P_[o.fc2_b], BT_, d_, 4 * d_, out.data());
    for (std::size_t i = 0; i < BT_ * d_; ++i) out[i] = b.x_mid[i] + out[i];
    return out;
  }

  // Causal attention of every (batch, head): probs (B h T T, zero above the diagonal) and att
  // (BT x d, the heads side by side).
  void attention(Block<T>& b) {
    const std::size_t ld = 3 * std::size_t(d_);
    const T scale = cst<T>(1.0 / std::sqrt(double(hd_)));
    const double tiles = std::ceil(T_ / 64.0);  // the fused kernels' key tiles: one rescale each
    b.probs.assign(std::size_t(B_) * h_ * T_ * T_, cst<T>(0));
    b.att.assign(BT_ * d_, cst<T>(0));
    std::vector<T> s(T_);
    const Operand<T> qkv(b.qkv.data(), b.qkv.size(), mc_attention_operand_error);
    for (int bb = 0; bb < B_; ++bb)
      for (int hh = 0; hh < h_; ++hh) {
        const T* base = qkv.data() + std::size_t(bb) * T_ * ld + std::size_t(hh) * hd_;
        T* P = b.probs.data() + (std::size_t(bb) * h_ + hh) * T_ * T_;
        for (int i = 0; i < T_; ++i) {
          for (int j = 0; j <= i; ++j) s[j] = attention_dot_(base + i * ld, 1, base + j * ld + d_, 1, hd_) * scale;
          T m = s[0];
          for (int j = 1; j <= i; ++j) m = max_(m, s[j]);
          for (int j = 0; j <= i; ++j) s[j] = exp_(s[j] - m);
          const T l = sum_(s.data(), 1, i + 1);
          for (int j = 0; j <= i; ++j) {
            T pij = s[j] / l;
            widen(pij, 4 * tiles);
            P[std::size_t(i) * T_ + j] = pij;
          }
          T* out = b.att.data() + (std::size_t(bb) * T_ + i) * d_ + std::size_t(hh) * hd_;
          const Operand<T> p(P + std::size_t(i) * T_, std::size_t(i) + 1, mc_attention_operand_error);
          for (int c = 0; c < hd_; ++c) out[c] = attention_dot_(p.data(), 1, base + 2 * d_ + c, ld, i + 1);
        }
      }
  }

  // d of the block's input from d of its output; the block's parameter gradients into G.
  std::vector<T> block_backward(int l, std::vector<T> dout, std::vector<T>& G) {
    Block<T>& b = blocks_[l];
    const BlockOffsets& o = off_.blocks[l];
    // MLP: out = x_mid + fc2(gelu(fc(ln2(x_mid)))).
    std::vector<T> dact(BT_ * 4 * d_), dln2(BT_ * d_), dx(BT_ * d_);
    linear_backward<T>(dout.data(), b.act.data(), &P_[o.fc2_w], BT_, d_, 4 * d_, dact.data(), &G[o.fc2_w],
                       &G[o.fc2_b]);
    if (o_.mlp_grad_in_bf16)
      for (T& g : dact) keep_in_bf16(g);
    for (std::size_t i = 0; i < dact.size(); ++i) dact[i] = dact[i] * gelu_grad(b.fc[i], o_.gelu);
    linear_backward<T>(dact.data(), b.ln2.data(), &P_[o.fc_w], BT_, 4 * d_, d_, dln2.data(), &G[o.fc_w], &G[o.fc_b]);
    keep_ln_grad(dln2);
    layernorm_backward<T>(dln2.data(), &P_[o.ln2_w], b.n2, BT_, d_, dx.data(), &G[o.ln2_w], &G[o.ln2_b]);
    for (std::size_t i = 0; i < dx.size(); ++i) dout[i] = dout[i] + dx[i];  // d x_mid
    // Attention: x_mid = x_in + proj(attention(qkv(ln1(x_in)))).
    std::vector<T> datt(BT_ * d_), dqkv(BT_ * 3 * d_), dln1(BT_ * d_);
    linear_backward<T>(dout.data(), b.att.data(), &P_[o.proj_w], BT_, d_, d_, datt.data(), &G[o.proj_w],
                       &G[o.proj_b]);
    attention_backward(b, datt, dqkv);
    linear_backward<T>(dqkv.data(), b.ln1.data(), &P_[o.qkv_w], BT_, 3 * d_, d_, dln1.data(), &G[o.qkv_w],
                       &G[o.qkv_b]);
    keep_ln_grad(dln1);
    layernorm_backward<T>(dln1.data(), &P_[o.ln1_w], b.n1, BT_, d_, dx.data(), &G[o.ln1_w], &G[o.ln1_b]);
    for (std::size_t i = 0; i < dx.size(); ++i) dout[i] = dout[i] + dx[i];  // d x_in
    return dout;
  }

  void attention_backward(const Block<T>& b, const std::vector<T>& datt, std::vector<T>& dqkv) {
    const std::size_t ld = 3 * std::size_t(d_);
    const T scale = cst<T>(1.0 / std::sqrt(double(hd_)));
    std::vector<T> ds(std::size_t(T_) * T_), dp(T_);
    const double k = mc_attention_operand_error;
    const Operand<T> qkv(b.qkv.data(), b.qkv.size(), k), probs(b.probs.data(), b.probs.size(), k),
        datt_(datt.data(), datt.size(), k);
    for (int bb = 0; bb < B_; ++bb)
      for (int hh = 0; hh < h_; ++hh) {
        const std::size_t col = std::size_t(hh) * hd_;
        const std::size_t head = (std::size_t(bb) * h_ + hh) * T_ * T_;
        // The products' operands (rounded, Operand), and P and dO as they are for delta's sums.
        const T* base = qkv.data() + std::size_t(bb) * T_ * ld + col;
        const T* P = b.probs.data() + head;
        const T* rP = probs.data() + head;
        const T* dO = datt.data() + std::size_t(bb) * T_ * d_ + col;
        const T* rdO = datt_.data() + std::size_t(bb) * T_ * d_ + col;
        const T* O = b.att.data() + std::size_t(bb) * T_ * d_ + col;
        T* dbase = dqkv.data() + std::size_t(bb) * T_ * ld + col;
        std::fill(ds.begin(), ds.end(), cst<T>(0));
        for (int i = 0; i < T_; ++i) {
          for (int j = 0; j <= i; ++j)
            dp[j] = attention_dot_(rdO + std::size_t(i) * d_, 1, base + j * ld + 2 * d_, 1, hd_);
          // delta_i = rowsum(dP o P), or rowsum(dO o O) as the fused backward computes it: equal
          // in exact arithmetic, with different roundings (the Monte Carlo runs take both).
          const T delta = second_form(T{}) ? dot_(dO + std::size_t(i) * d_, 1, O + std::size_t(i) * d_, 1, hd_)
                                           : dot_(dp.data(), 1, P + std::size_t(i) * T_, 1, i + 1);
          for (int j = 0; j <= i; ++j) ds[std::size_t(i) * T_ + j] = P[std::size_t(i) * T_ + j] * (dp[j] - delta);
        }
        const Operand<T> rds(ds.data(), ds.size(), k);
        const T* dS = rds.data();
        for (int i = 0; i < T_; ++i)
          for (int c = 0; c < hd_; ++c) {
            // dQ_i = scale sum_j dS_ij K_j; dK_i = scale sum_{r >= i} dS_ri Q_r; dV_i = sum_{r >= i} P_ri dO_r.
            dbase[i * ld + c] = attention_dot_(dS + std::size_t(i) * T_, 1, base + d_ + c, ld, i + 1) * scale;
            dbase[i * ld + d_ + c] =
                attention_dot_(dS + std::size_t(i) * T_ + i, T_, base + std::size_t(i) * ld + c, ld, T_ - i) * scale;
            dbase[i * ld + 2 * d_ + c] =
                attention_dot_(rP + std::size_t(i) * T_ + i, T_, rdO + std::size_t(i) * d_ + c, d_, T_ - i);
          }
      }
  }

  const Config& c_;
  const ModelOptions& o_;
  Offsets off_;
  std::vector<T> P_;
  int B_, T_, d_, h_, hd_, V_;
  std::size_t BT_;
  std::span<const std::int32_t> tokens_, targets_;
  std::vector<Block<T>> blocks_;
  std::vector<T> x_final_, lnf_, probs_;
  LnCache<T> nf_;
};

// torch.optim.AdamW's single-tensor step for one element, in its order of operations: the
// parameter, moments and gradient in, the parameter and moments after the step out.
template <class T>
struct AdamWStep {
  T decay, b1, b2, one_b1, one_b2, step_size, inv_sqrt_bc2, eps, wd;
  bool decoupled;
  AdamWStep(const AdamW& hp, int step, bool decoupled_weight_decay)
      : decay(cst<T>(1 - hp.lr * hp.weight_decay)), b1(cst<T>(hp.beta1)), b2(cst<T>(hp.beta2)),
        one_b1(cst<T>(1 - hp.beta1)), one_b2(cst<T>(1 - hp.beta2)),
        step_size(cst<T>(hp.lr / (1 - std::pow(hp.beta1, step)))),
        inv_sqrt_bc2(cst<T>(1 / std::sqrt(1 - std::pow(hp.beta2, step)))), eps(cst<T>(hp.eps)),
        wd(cst<T>(hp.weight_decay)), decoupled(decoupled_weight_decay) {}
  void operator()(T p, T g, T m0, T v0, T& p_out, T& m_out, T& v_out) const {
    if (decoupled)
      p = p * decay;
    else
      g = g + wd * p;
    m_out = b1 * m0 + one_b1 * g, v_out = b2 * v0 + one_b2 * g * g;
    p_out = p - step_size * (m_out / (sqrt_(v_out) * inv_sqrt_bc2 + eps));
  }
};

}  // namespace

template <class T>
Outputs<T> reference(const Config& c, Phase phase, std::span<const float> params, std::span<const std::int32_t> tokens,
                     std::span<const std::int32_t> targets, const OptimizerState& opt, const AdamW& hp,
                     const ModelOptions& options) {
  if (const std::string why = c.invalid(); !why.empty()) throw std::invalid_argument("gpt2::reference: " + why);
  const std::size_t n = param_count(c);
  if (params.size() != n) throw std::invalid_argument("gpt2::reference: params must hold param_count() floats");
  if (tokens.size() != c.tokens() || targets.size() != c.tokens())
    throw std::invalid_argument("gpt2::reference: tokens and targets must hold batch x context ids");
  for (std::size_t i = 0; i < c.tokens(); ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab || targets[i] < 0 || targets[i] >= c.vocab)
      throw std::invalid_argument("gpt2::reference: token ids must lie in [0, vocab)");
  Outputs<T> out;
  mc_operand_error = options.operand_error, mc_product_error = options.product_error;
  mc_sum_error = options.sum_error;
  mc_attention_operand_error = options.attention_operand_error;
  mc_attention_product_error = options.attention_product_error;
  mc_attention_sum_error = options.attention_sum_error;
  float_products = options.products;
  float_attention_bf16 = options.attention_in_bf16;
  float_sums_reversed = options.sums_reversed;
  float_contracted = options.contracted;
  Model<T> model(c, params, options);
  out.loss = model.forward(tokens, targets);
  if (phase == Phase::forward) return out;
  out.grads = model.backward();
  if (phase == Phase::forward_backward) return out;
  if (opt.m.size() != n || opt.v.size() != n || opt.step < 1)
    throw std::invalid_argument("gpt2::reference: the optimizer state needs m and v of param_count() and step >= 1");
  const AdamWStep<T> update(hp, opt.step, options.decoupled_weight_decay);
  out.params.resize(n), out.m.resize(n), out.v.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    update(T(params[i]), out.grads[i], T(opt.m[i]), T(opt.v[i]), out.params[i], out.m[i], out.v[i]);
  return out;
}

template Outputs<double> reference<double>(const Config&, Phase, std::span<const float>,
                                           std::span<const std::int32_t>, std::span<const std::int32_t>,
                                           const OptimizerState&, const AdamW&, const ModelOptions&);
template Outputs<float> reference<float>(const Config&, Phase, std::span<const float>, std::span<const std::int32_t>,
                                         std::span<const std::int32_t>, const OptimizerState&, const AdamW&,
                                         const ModelOptions&);
// A hash of seed and run (lab/monte_carlo.hpp says why not consecutive starts).
std::uint64_t mc_stream_start(std::uint64_t seed, int run) { return lab::mc::stream_start(seed, run); }

namespace {

// The threads expected()'s runs share: the machine's (LAB_REFERENCE_THREADS, a positive integer,
// overrides), at most one a run, and no more runs at once than kConcurrentBytes of their memory
// (run_bytes) allows, so that a large verifiable shape runs its runs one at a time as before.
constexpr double kConcurrentBytes = 4.0 * (1u << 30);
// A run's memory, roughly: its outputs and the model's parameters and gradients (8 copies of the
// parameters), each block's kept activations (about 20 values a token and feature, and the
// attention's probabilities), the logits with their probabilities and gradient.
double run_bytes(const Config& c) {
  const double tokens = double(c.tokens()), d = c.d, T = c.context;
  const double values = 8.0 * double(param_count(c)) +
                        c.layers * (20 * tokens * d + 2.0 * c.batch * c.heads * T * T) + 4 * tokens * c.vocab;
  return sizeof(double) * values;
}

int reference_threads(const Config& c, int tasks, int asked) {
  const int threads = asked > 0 ? std::min(asked, tasks) : lab::mc::reference_threads(tasks);
  const int by_memory = int(std::max(1.0, std::floor(kConcurrentBytes / run_bytes(c))));
  return std::max(1, std::min(threads, by_memory));
}

}  // namespace

Expected expected(const Config& c, Phase phase, std::span<const float> params, std::span<const std::int32_t> tokens,
                  std::span<const std::int32_t> targets, const OptimizerState& opt, const AdamW& hp,
                  const ModelOptions& options, int runs, std::uint64_t seed, int threads) {
  if (runs < 2) throw std::invalid_argument("gpt2::expected: at least two Monte Carlo runs");
  Expected e;
  e.runs = runs;
  const auto tensors = layout(c);
  // The same-precision stand-in, where the options have one (the bf16 variants').
  ModelOptions stand_in;
  e.same_precision = options.same_precision_stand_in(stand_in);
  // The runs, in this order: the reference (double), the stand-in (float), the `runs` Monte Carlo
  // runs, then kFreedomRuns runs of the stand-in's arithmetic. Each is independent of the others
  // (its perturbations come from its own stream, in its own thread's state: reference_arithmetic.hpp
  // keeps that state thread_local), so they run side by side, a wave of `threads` at a time, and
  // each wave's outputs are folded in below in this order: the sums are the same, bit for bit,
  // whatever the number of threads.
  const int mc_first = 2, freedom_first = mc_first + runs;
  const int tasks = freedom_first + (e.same_precision ? kFreedomRuns : 0);
  const int wave = reference_threads(c, tasks, threads);
  Outputs<float> o;  // the stand-in's
  std::vector<Outputs<Perturbed>> perturbed(static_cast<std::size_t>(wave));
  auto run = [&](int i, int first) {
    if (i == 0) {
      e.ref = reference<double>(c, phase, params, tokens, targets, opt, hp, options);
      return;
    }
    if (i == 1) {
      if (e.same_precision) o = reference<float>(c, phase, params, tokens, targets, opt, hp, stand_in);
      return;
    }
    // A Monte Carlo run r, or fp32's freedom around the stand-in (Expected::freedom_*): runs of the
    // stand-in's arithmetic, its bf16 roundings made to nearest, every fp32 operation perturbed;
    // their own streams (runs `runs` onward, so that they draw none of the other runs' noise).
    const bool freedom = i >= freedom_first;
    const int r = i - mc_first, parity = freedom ? i - freedom_first : r;
    mc_state = mc_stream_start(seed, r);
    mc_run_key = mc_stream_start(~seed, r);  // the operands' roundings: another stream's start
    mc_odd_run = parity % 2 == 1;
    struct Nearest {  // the flag set for the freedom runs only, whatever they throw
      explicit Nearest(bool on) { mc_roundings_to_nearest = on; }
      ~Nearest() { mc_roundings_to_nearest = false; }
    } nearest(freedom);
    perturbed[std::size_t(i - first)] =
        reference<Perturbed>(c, phase, params, tokens, targets, opt, hp, freedom ? stand_in : options);
  };
  auto spread = [&](const std::vector<double>& ref, const std::vector<Perturbed>& run, std::vector<double>& sigma,
                    std::vector<double>& l2) {
    if (ref.empty()) return;
    sigma.resize(ref.size());
    l2.resize(tensors.size());
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      double sq = 0;
      for (std::size_t i = tensors[t].offset; i < tensors[t].offset + tensors[t].size; ++i) {
        const double d = run[i].v - ref[i];
        sigma[i] += d * d / runs;
        sq += d * d;
      }
      l2[t] = std::max(l2[t], std::sqrt(sq));
    }
  };
  // Each tensor's L2 distance between a and b (double, float or Perturbed values), kept in l2 where
  // it is the largest yet (l2 starts at zero): the stand-in's from the reference, and the farthest
  // of the freedom runs from the stand-in.
  auto farthest = [&](const auto& a, const auto& b, std::vector<double>& l2) {
    auto value = [](auto x) {
      if constexpr (std::is_same_v<decltype(x), Perturbed>) return x.v;
      else return double(x);
    };
    if (a.empty()) return;
    l2.resize(tensors.size());
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      double sq = 0;
      for (std::size_t i = tensors[t].offset; i < tensors[t].offset + tensors[t].size; ++i)
        sq += (value(a[i]) - value(b[i])) * (value(a[i]) - value(b[i]));
      l2[t] = std::max(l2[t], std::sqrt(sq));
    }
  };
  double loss_sq = 0;
  for (int first = 0; first < tasks; first += wave) {
    const int last = std::min(tasks, first + wave);
    run_tasks(first, last, wave, [&](int i) { run(i, first); });
    for (int i = first; i < last; ++i) {
      if (i == 1 && e.same_precision) {  // the stand-in's distance from the reference, tensor by tensor
        farthest(e.ref.grads, o.grads, e.stand_in_grads_l2);
        farthest(e.ref.params, o.params, e.stand_in_params_l2);
        farthest(e.ref.m, o.m, e.stand_in_m_l2);
        farthest(e.ref.v, o.v, e.stand_in_v_l2);
      }
      if (i < mc_first) continue;
      Outputs<Perturbed> p = std::move(perturbed[std::size_t(i - first)]);
      if (i < freedom_first) {
        const double dl = p.loss.v - e.ref.loss;
        loss_sq += dl * dl / runs;
        e.loss_l2 = std::max(e.loss_l2, std::fabs(dl));
        spread(e.ref.grads, p.grads, e.sigma.grads, e.grads_l2);
        spread(e.ref.params, p.params, e.sigma.params, e.params_l2);
        spread(e.ref.m, p.m, e.sigma.m, e.m_l2);
        spread(e.ref.v, p.v, e.sigma.v, e.v_l2);
      } else {
        farthest(o.grads, p.grads, e.freedom_grads_l2);
        farthest(o.params, p.params, e.freedom_params_l2);
        farthest(o.m, p.m, e.freedom_m_l2);
        farthest(o.v, p.v, e.freedom_v_l2);
      }
    }
  }
  e.sigma.loss = std::sqrt(loss_sq);
  for (auto* v : {&e.sigma.grads, &e.sigma.params, &e.sigma.m, &e.sigma.v})
    for (double& x : *v) x = std::sqrt(x);
  if (phase == Phase::step) {
    // The optimizer's outputs bent over the gradient's allowed interval (Expected::curvature):
    // the update's second difference at a = k sigma_g, in double.
    const double k = element_k(runs);
    const AdamWStep<double> update(hp, opt.step, options.decoupled_weight_decay);
    const std::size_t n = e.ref.grads.size();
    e.curvature.params.resize(n), e.curvature.m.resize(n), e.curvature.v.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double g = e.ref.grads[i], a = k * e.sigma.grads[i];
      double p[3], m[3], v[3];
      for (int s = 0; s < 3; ++s) update(params[i], g + (s - 1) * a, opt.m[i], opt.v[i], p[s], m[s], v[s]);
      e.curvature.params[i] = std::fabs(p[0] + p[2] - 2 * p[1]) / 2;
      e.curvature.m[i] = std::fabs(m[0] + m[2] - 2 * m[1]) / 2;
      e.curvature.v[i] = std::fabs(v[0] + v[2] - 2 * v[1]) / 2;
    }
  }
  return e;
}

}  // namespace gpt2
