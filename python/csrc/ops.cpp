// PyTorch's side of the bridge: the operators' schemas (namespace cuda_perf_lab), their CUDA
// implementations, and the input checks. The kernels read dense rows, so an input of other strides
// (a transposed view, a slice with a step, q, k, v of (B, T, H, D) transposed) is copied to a dense
// tensor (dense_input: checked first, then contiguous(), which returns a dense tensor as it is, and
// a fresh copy where a dense view is not 16-byte aligned); only adamw_, in place, requires dense
// tensors. The outputs are dense (the bf16 attention's in SDPA's layout, the transpose of a dense
// (B, T, H, D) tensor). Every check raises a Python
// exception that names the argument and what is wrong (ValueError, or TypeError for a dtype) before
// any of the lab's kernels is launched: a bad call never reaches one. The autograd formulas and the fake (meta) implementations are
// registered from Python (cuda_perf_lab/ops.py).
#include <climits>
#include <cstdint>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>
#include <torch/library.h>

#include "bridge.hpp"

namespace {

using at::Tensor;

void check_tensor(const Tensor& t, const char* name, at::ScalarType dtype, const Tensor* same_device = nullptr) {
  TORCH_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor (it is on ", t.device(), ")");
  TORCH_CHECK_TYPE(t.scalar_type() == dtype, name, " must be ", dtype, " (it is ", t.scalar_type(), ")");
  if (same_device)
    TORCH_CHECK_VALUE(t.device() == same_device->device(), name, " is on ", t.device(), ", the input on ",
                      same_device->device());
}

// A dense tensor whose data starts 16-byte aligned, as the kernels' vector loads (float4) and the
// TMA need: contiguous(), and a fresh copy where a dense view starts off that alignment (a flat
// tensor sliced at an odd element), which a vector load would fault on.
Tensor dense_aligned(const Tensor& t) {
  Tensor c = t.contiguous();
  return reinterpret_cast<std::uintptr_t>(c.data_ptr()) % 16 ? c.clone() : c;
}

// An input the kernels can read: checked as check_tensor does (before any copy, so a wrong tensor is
// never copied), then dense and aligned.
Tensor dense_input(const Tensor& t, const char* name, at::ScalarType dtype, const Tensor* same_device = nullptr) {
  check_tensor(t, name, dtype, same_device);
  return dense_aligned(t);
}

// Shapes are printed from plain vectors: a message printing an IntArrayRef crashed the process
// (PyTorch 2.11, this extension built as C++20) instead of raising.
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

void check_shape(const Tensor& t, const char* name, const std::vector<int64_t>& want) {
  const std::vector<int64_t> have = t.sizes().vec();
  if (have != want)
    TORCH_CHECK_VALUE(false, std::string(name) + " must have shape " + dims_text(want) + " (it has " +
                                 dims_text(have) + ")");
}

// Runs f, turning the lab's "not this variant or shape" into a ValueError.
template <class F>
void call(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

cudaStream_t stream_of(const Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

// A tensor's dtype as the bridge's storage type: float32, bfloat16 or float16, else a TypeError
// naming those it takes.
bridge::Storage storage_of(const Tensor& x, const char* name = "x") {
  TORCH_CHECK_VALUE(x.is_cuda(), name, " must be a CUDA tensor (it is on ", x.device(), ")");
  const at::ScalarType t = x.scalar_type();
  TORCH_CHECK_TYPE(t == at::kFloat || t == at::kBFloat16 || t == at::kHalf, name,
                   " must be Float, BFloat16 or Half (it is ", t, ")");
  return t == at::kBFloat16 ? bridge::Storage::bf16 : t == at::kHalf ? bridge::Storage::fp16 : bridge::Storage::f32;
}

// ---- LayerNorm over the last dimension; eps is the lab's 1e-5. x, weight and bias float32,
// bfloat16 or float16 (all three the same), y in x's dtype, mean and rstd float32, as PyTorch's
// native layer_norm; fp32 arithmetic in all ----

std::tuple<Tensor, Tensor, Tensor> layernorm_forward(const Tensor& x_arg, const Tensor& weight_arg,
                                                     const Tensor& bias_arg,
                                                     c10::string_view variant) {
  const bridge::Storage storage = storage_of(x_arg);
  const at::ScalarType dtype = x_arg.scalar_type();
  const Tensor x = dense_input(x_arg, "x", dtype);
  const Tensor weight = dense_input(weight_arg, "weight", dtype, &x);
  const Tensor bias = dense_input(bias_arg, "bias", dtype, &x);
  TORCH_CHECK_VALUE(x.dim() >= 1, "x must have at least one dimension");
  const int64_t dim = x.size(-1), rows = dim ? x.numel() / dim : 0;
  check_shape(weight, "weight", {dim});
  check_shape(bias, "bias", {dim});
  const c10::cuda::CUDAGuard guard(x.device());
  const auto f32 = x.options().dtype(at::kFloat);
  Tensor y = at::empty_like(x), mean = at::empty({rows}, f32), rstd = at::empty({rows}, f32);
  if (x.numel() == 0) return {y, mean, rstd};
  call([&] {
    bridge::layernorm_forward(std::string(variant), storage, rows, dim, x.data_ptr(), weight.data_ptr(),
                              bias.data_ptr(), y.data_ptr(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                              stream_of(x));
  });
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> layernorm_backward(const Tensor& grad_y_arg, const Tensor& x_arg,
                                                      const Tensor& weight_arg,
                                                      const Tensor& mean_arg, const Tensor& rstd_arg,
                                                      c10::string_view variant) {
  const bridge::Storage storage = storage_of(x_arg);
  const at::ScalarType dtype = x_arg.scalar_type();
  const Tensor x = dense_input(x_arg, "x", dtype);
  const Tensor grad_y = dense_input(grad_y_arg, "grad_y", dtype, &x);
  const Tensor weight = dense_input(weight_arg, "weight", dtype, &x);
  const Tensor mean = dense_input(mean_arg, "mean", at::kFloat, &x);
  const Tensor rstd = dense_input(rstd_arg, "rstd", at::kFloat, &x);
  TORCH_CHECK_VALUE(x.dim() >= 1, "x must have at least one dimension");
  const int64_t dim = x.size(-1), rows = dim ? x.numel() / dim : 0;
  check_shape(grad_y, "grad_y", x.sizes().vec());
  check_shape(weight, "weight", {dim});
  check_shape(mean, "mean", {rows});
  check_shape(rstd, "rstd", {rows});
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor dx = at::empty_like(x), dweight = at::empty({dim}, x.options()), dbias = at::empty({dim}, x.options());
  if (x.numel() == 0) return {dx, dweight.zero_(), dbias.zero_()};
  call([&] {
    bridge::layernorm_backward(std::string(variant), storage, rows, dim, x.data_ptr(), weight.data_ptr(),
                               grad_y.data_ptr(), mean.data_ptr<float>(), rstd.data_ptr<float>(), dx.data_ptr(),
                               dweight.data_ptr(), dbias.data_ptr(), stream_of(x));
  });
  return {dx, dweight, dbias};
}

// ---- GELU (erf form) and Swish, on float32, bfloat16 or float16 tensors (fp32 arithmetic; the
// output in the input's dtype, as PyTorch's) ----

Tensor activation_forward(const char* topic, const Tensor& x_arg, c10::string_view variant) {
  const bridge::Storage storage = storage_of(x_arg);
  const Tensor x = dense_input(x_arg, "x", x_arg.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  call([&] {
    bridge::activation_forward(topic, std::string(variant), storage, x.numel(), x.data_ptr(), y.data_ptr(),
                               stream_of(x));
  });
  return y;
}

Tensor activation_backward(const char* topic, const Tensor& grad_y_arg, const Tensor& x_arg, c10::string_view variant) {
  const bridge::Storage storage = storage_of(x_arg);
  const Tensor x = dense_input(x_arg, "x", x_arg.scalar_type());
  const Tensor grad_y = dense_input(grad_y_arg, "grad_y", x.scalar_type(), &x);
  check_shape(grad_y, "grad_y", x.sizes().vec());
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor dx = at::empty_like(x);
  if (x.numel() == 0) return dx;
  call([&] {
    bridge::activation_backward(topic, std::string(variant), storage, x.numel(), x.data_ptr(), grad_y.data_ptr(),
                                dx.data_ptr(), stream_of(x));
  });
  return dx;
}

Tensor gelu_forward(const Tensor& x, c10::string_view v) { return activation_forward("gelu", x, v); }
Tensor gelu_backward(const Tensor& g, const Tensor& x, c10::string_view v) {
  return activation_backward("gelu", g, x, v);
}
Tensor swish_forward(const Tensor& x, c10::string_view v) { return activation_forward("swish", x, v); }
Tensor swish_backward(const Tensor& g, const Tensor& x, c10::string_view v) {
  return activation_backward("swish", g, x, v);
}

// ---- Cross-entropy: logits (..., C) float32, bfloat16 or float16, labels (...) int32 or int64; the
// mean over the rows whose label is not ignore_index, as torch.nn.functional.cross_entropy(
// logits.reshape(-1, C), labels.reshape(-1), ignore_index=ignore_index). On 16-bit logits the
// storage twins run (fp32 arithmetic): the loss, lse and count are float32 in all (the front end
// rounds the loss to the logits' dtype, as PyTorch's), dlogits in the logits' dtype ----

// The logits as rows x classes (any leading dimensions; a single row of shape (C) with a label of
// shape ()), dense, and their storage.
struct CrossEntropyRows {
  Tensor logits;
  int64_t rows, classes;
  bridge::Storage storage;
};
CrossEntropyRows ce_rows(const Tensor& logits_arg) {
  const bridge::Storage storage = storage_of(logits_arg, "logits");
  const Tensor logits = dense_input(logits_arg, "logits", logits_arg.scalar_type());
  TORCH_CHECK_VALUE(logits.dim() >= 1, "logits must have a dimension of classes (they are a scalar)");
  const int64_t classes = logits.size(-1);
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < logits.dim(); ++i) rows *= logits.size(i);
  TORCH_CHECK_VALUE(classes > 0 || rows == 0,
                    "logits must have at least one class (they have shape " + dims_text(logits.sizes().vec()) + ")");
  return {logits.reshape({rows, classes}), rows, classes, storage};
}

// The labels as int32 of shape logits.shape[:-1] (int64 values past int32's range stay out of range
// after the clamp: their rows give NaN, as any bad label).
Tensor int32_labels(const Tensor& labels, const Tensor& logits, int64_t rows) {
  TORCH_CHECK_VALUE(labels.is_cuda(), "labels must be a CUDA tensor (it is on ", labels.device(), ")");
  TORCH_CHECK_VALUE(labels.device() == logits.device(), "labels are on ", labels.device(), ", the logits on ",
                    logits.device());
  TORCH_CHECK_TYPE(labels.scalar_type() == at::kInt || labels.scalar_type() == at::kLong,
                   "labels must be int32 or int64 (they are ", labels.scalar_type(), ")");
  check_shape(labels, "labels", std::vector<int64_t>(logits.sizes().begin(), logits.sizes().end() - 1));
  const Tensor flat = labels.reshape({rows});
  return labels.scalar_type() == at::kInt ? flat.contiguous()
                                           : flat.clamp(INT32_MIN, INT32_MAX).to(at::kInt).contiguous();
}

int32_t ignore_index_of(int64_t ignore_index) {
  // One string, as dims_text's: an int64 formatted by the check's own message builder crashed the
  // process (PyTorch 2.11, this extension built as C++20) instead of raising.
  if (ignore_index < INT32_MIN || ignore_index > INT32_MAX)
    TORCH_CHECK_VALUE(false, "ignore_index must fit in int32 (it is " + std::to_string(ignore_index) + ")");
  return static_cast<int32_t>(ignore_index);
}

// loss (the mean; NaN when no row counts), lse (a row each, for the backward) and count (the rows
// counted, a float as PyTorch's total_weight, for the backward).
std::tuple<Tensor, Tensor, Tensor> cross_entropy_forward(const Tensor& logits_arg, const Tensor& labels_arg,
                                                         int64_t ignore_index, c10::string_view variant) {
  const int32_t ignore = ignore_index_of(ignore_index);
  const CrossEntropyRows in = ce_rows(logits_arg);
  const c10::cuda::CUDAGuard guard(in.logits.device());
  const Tensor l32 = int32_labels(labels_arg, logits_arg, in.rows);
  const auto f32 = in.logits.options().dtype(at::kFloat);
  Tensor loss = at::empty({}, f32), count = at::empty({}, f32), lse = at::empty({in.rows}, f32);
  if (in.rows == 0) return {loss.fill_(NAN), lse, count.zero_()};  // the mean over no rows, as PyTorch's
  call([&] {
    bridge::cross_entropy_forward(std::string(variant), in.storage, in.rows, in.classes, in.logits.data_ptr(),
                                  l32.data_ptr<int32_t>(), ignore, loss.data_ptr<float>(), count.data_ptr<float>(),
                                  lse.data_ptr<float>(), stream_of(in.logits));
  });
  return {loss, lse, count};
}

Tensor cross_entropy_backward(const Tensor& grad_loss_arg, const Tensor& logits_arg, const Tensor& labels_arg,
                              const Tensor& lse_arg, const Tensor& count_arg, int64_t ignore_index,
                              c10::string_view variant) {
  const int32_t ignore = ignore_index_of(ignore_index);
  const CrossEntropyRows in = ce_rows(logits_arg);
  const Tensor grad_loss = dense_input(grad_loss_arg, "grad_loss", at::kFloat, &in.logits);
  TORCH_CHECK_VALUE(grad_loss.numel() == 1,
                    "grad_loss must hold one value (it has shape " + dims_text(grad_loss.sizes().vec()) + ")");
  const Tensor count = dense_input(count_arg, "count", at::kFloat, &in.logits);
  TORCH_CHECK_VALUE(count.numel() == 1, "count must hold one value (it has shape " + dims_text(count.sizes().vec()) + ")");
  const Tensor lse = dense_input(lse_arg, "lse", at::kFloat, &in.logits);
  check_shape(lse, "lse", {in.rows});
  const c10::cuda::CUDAGuard guard(in.logits.device());
  const Tensor l32 = int32_labels(labels_arg, logits_arg, in.rows);
  Tensor dlogits = at::empty(logits_arg.sizes(), in.logits.options());
  if (in.rows == 0) return dlogits;
  call([&] {
    bridge::cross_entropy_backward(std::string(variant), in.storage, in.rows, in.classes, in.logits.data_ptr(),
                                   l32.data_ptr<int32_t>(), ignore, lse.data_ptr<float>(), grad_loss.data_ptr<float>(),
                                   count.data_ptr<float>(), dlogits.data_ptr(), stream_of(in.logits));
  });
  return dlogits;
}

// ---- The weighted sum over the last dimension: y = x @ w ----

Tensor weighted_sum_forward(const Tensor& x_arg, const Tensor& w_arg, c10::string_view variant) {
  const Tensor x = dense_input(x_arg, "x", at::kFloat);
  const Tensor w = dense_input(w_arg, "w", at::kFloat, &x);
  TORCH_CHECK_VALUE(x.dim() >= 1, "x must have at least one dimension");
  const int64_t dim = x.size(-1);
  check_shape(w, "w", {dim});
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor y = at::empty(std::vector<int64_t>(x.sizes().begin(), x.sizes().end() - 1), x.options());
  const int64_t rows = y.numel();  // the leading dimensions' product (1 for a vector x)
  if (y.numel() == 0) return y;
  if (dim == 0) return y.zero_();  // an empty sum
  call([&] {
    bridge::weighted_sum_forward(std::string(variant), rows, dim, x.data_ptr<float>(), w.data_ptr<float>(),
                                 y.data_ptr<float>(), stream_of(x));
  });
  return y;
}

std::tuple<Tensor, Tensor> weighted_sum_backward(const Tensor& grad_y_arg, const Tensor& x_arg, const Tensor& w_arg,
                                                 c10::string_view variant) {
  const Tensor x = dense_input(x_arg, "x", at::kFloat);
  const Tensor w = dense_input(w_arg, "w", at::kFloat, &x);
  const Tensor grad_y = dense_input(grad_y_arg, "grad_y", at::kFloat, &x);
  TORCH_CHECK_VALUE(x.dim() >= 1, "x must have at least one dimension");
  const int64_t dim = x.size(-1);
  check_shape(w, "w", {dim});
  check_shape(grad_y, "grad_y", std::vector<int64_t>(x.sizes().begin(), x.sizes().end() - 1));
  const int64_t rows = grad_y.numel();
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor dx = at::empty_like(x), dw = at::empty({dim}, x.options());
  if (x.numel() == 0) return {dx, dw.zero_()};  // no rows (dw an empty sum) or no columns
  call([&] {
    bridge::weighted_sum_backward(std::string(variant), rows, dim, x.data_ptr<float>(), w.data_ptr<float>(),
                                  grad_y.data_ptr<float>(), dx.data_ptr<float>(), dw.data_ptr<float>(),
                                  stream_of(x));
  });
  return {dx, dw};
}

// ---- Fused attention: [batch][heads][seq][d], scale 1/sqrt(d) unless given (SDPA's scale) ----

// The scores' scale: the caller's (finite; SDPA takes any), or 1/sqrt(d).
float attention_scale(const std::optional<double>& scale, int d) {
  if (!scale) return 1.0f / std::sqrt(float(d));
  if (!std::isfinite(*scale))  // one string: a number formatted by the check's message builder crashed
    TORCH_CHECK_VALUE(false, "scale must be finite (it is " + std::to_string(*scale) + ")");
  return float(*scale);
}

at::ScalarType attention_dtype(c10::string_view precision) {
  if (precision == "fp32" || precision == "3xtf32") return at::kFloat;
  if (precision == "fp16") return at::kHalf;
  TORCH_CHECK_VALUE(precision == "bf16", "precision must be 'fp32', '3xtf32', 'bf16' or 'fp16' (it is '", precision,
                    "')");
  return at::kBFloat16;
}

// Whether q is a 16-bit tensor (bf16 or fp16: the tensor-core kernels, outputs in q's dtype in
// SDPA's layout), and which.
bool sixteen_bits(const Tensor& q) { return q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf; }
bridge::Storage storage16(const Tensor& q) {
  return q.scalar_type() == at::kHalf ? bridge::Storage::fp16 : bridge::Storage::bf16;
}

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, c10::string_view precision) {
  const at::ScalarType dtype = attention_dtype(precision);
  check_tensor(q, "q", dtype);
  check_tensor(k, "k", dtype, &q);
  check_tensor(v, "v", dtype, &q);
  if (q.dim() != 4)  // one string: a number formatted by the check's own message builder crashed (see ignore_index_of)
    TORCH_CHECK_VALUE(false, "q must be batch x heads x seq x head_dim (it has " + std::to_string(q.dim()) +
                                 " dimensions)");
  check_shape(k, "k", q.sizes().vec());
  check_shape(v, "v", q.sizes().vec());
  const std::string why = bridge::attention_validate(q.size(0), q.size(1), q.size(2), q.size(3), dtype != at::kFloat);
  TORCH_CHECK_VALUE(why.empty(), "attention " + dims_text(q.sizes().vec()) + ": " + why);
}

// A 16-bit output as scaled_dot_product_attention lays its out: (batch, heads, seq, d), the transpose
// of a dense (batch, seq, heads, d) tensor, so that the caller's o.transpose(1, 2).reshape(B, T, C)
// costs no copy.
Tensor sdpa_layout(const Tensor& q) {
  return at::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.options()).transpose(1, 2);
}

bridge::BhtStrides bht(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// Whether the 16-bit operators run the Hopper kernels for head size d on q's device (bf16 or fp16).
bool hopper(const Tensor& q) {
  const c10::cuda::CUDAGuard guard(q.device());
  return bridge::hopper_attention_supports(q.size(3)).empty();
}

// The length of the rows q, k and v lie in where the Hopper kernels can read them as they are (the
// bridge's qkv_ld), else 0 (they read dense copies): each the (batch, heads, seq, d) transpose of a
// (batch, seq, heads, d) layout, as a GPT-2 block makes q, k and v (views of one (B, T, 3H, D) buffer,
// or (B, T, H, D) tensors transposed). That is: d dense (stride(3) 1), the heads side by side
// (stride(1) d), each token's row stride(2) elements, the same for all three, a multiple of 8 (16
// bytes, the TMA's strides), the batches one after another (stride(0) seq stride(2)), and each
// tensor on a 16-byte boundary. A dimension of one says nothing of its stride and is not asked.
std::size_t hopper_rows_ld(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), d = q.size(3), ld = q.stride(2);
  if (seq == 1 || ld <= 0 || ld % 8 != 0) return 0;
  for (const Tensor* t : {&q, &k, &v}) {
    if (t->stride(3) != 1 || t->stride(2) != ld) return 0;
    if (heads > 1 && t->stride(1) != d) return 0;
    if (batch > 1 && t->stride(0) != seq * ld) return 0;
    if (reinterpret_cast<std::uintptr_t>(t->data_ptr()) % 16 != 0) return 0;
  }
  return std::size_t(ld);
}

// q, k and v as the kernels read them: as they lie where the Hopper kernels take their (B, T, H, D)
// rows (ld, hopper_rows_ld's row length), else dense copies (ld 0). The forward and the backward
// both; check_qkv first.
struct QkvOperands {
  Tensor q, k, v;
  std::size_t ld;
  QkvOperands(const Tensor& q_arg, const Tensor& k_arg, const Tensor& v_arg)
      : ld(q_arg.numel() && sixteen_bits(q_arg) && hopper(q_arg) ? hopper_rows_ld(q_arg, k_arg, v_arg) : 0) {
    q = ld ? q_arg : dense_aligned(q_arg), k = ld ? k_arg : dense_aligned(k_arg), v = ld ? v_arg : dense_aligned(v_arg);
  }
};

std::tuple<Tensor, Tensor> attention_forward(const Tensor& q_arg, const Tensor& k_arg, const Tensor& v_arg, bool causal,
                                             c10::string_view precision, std::optional<double> scale_arg) {
  check_qkv(q_arg, k_arg, v_arg, precision);
  const QkvOperands in(q_arg, k_arg, v_arg);
  const Tensor &q = in.q, &k = in.k, &v = in.v;
  const std::size_t qkv_ld = in.ld;
  const c10::cuda::CUDAGuard guard(q.device());
  const auto f32 = q.options().dtype(at::kFloat);
  const int batch = int(q.size(0)), heads = int(q.size(1)), seq = int(q.size(2)), d = int(q.size(3));
  const float scale = attention_scale(scale_arg, d);
  Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, f32);
  if (q.numel() == 0) return {sixteen_bits(q) ? sdpa_layout(q) : at::empty(q.sizes(), f32), lse};
  if (!sixteen_bits(q)) {
    Tensor o = at::empty(q.sizes(), f32);
    call([&] {
      bridge::attention_forward(std::string(precision), batch, heads, seq, d, causal, q.data_ptr(), k.data_ptr(),
                                v.data_ptr(), o.data_ptr<float>(), lse.data_ptr<float>(), scale, stream_of(q));
    });
    return {o, lse};
  }
  // bf16 and fp16: O in q's dtype, as SDPA's; the Hopper forward writes it so, the mma.sync forward
  // in fp32 (converted).
  Tensor o = sdpa_layout(q);
  if (hopper(q)) {
    call([&] {
      bridge::hopper_attention_forward(storage16(q), batch, heads, seq, d, causal, q.data_ptr(), k.data_ptr(),
                                       v.data_ptr(), qkv_ld, o.data_ptr(), lse.data_ptr<float>(), scale,
                                       stream_of(q));
    });
    return {o, lse};
  }
  Tensor o32 = at::empty(q.sizes(), f32);
  call([&] {
    bridge::attention_forward(std::string(precision), batch, heads, seq, d, causal, q.data_ptr(), k.data_ptr(),
                              v.data_ptr(), o32.data_ptr<float>(), lse.data_ptr<float>(), scale, stream_of(q));
  });
  call([&] {
    bridge::attention_rows_to16(storage16(q), batch, heads, seq, d, o32.data_ptr<float>(), o.data_ptr(), bht(o),
                                stream_of(q));
  });
  return {o, lse};
}

std::tuple<Tensor, Tensor, Tensor> attention_backward(const Tensor& grad_o_arg, const Tensor& q_arg,
                                                      const Tensor& k_arg, const Tensor& v_arg, const Tensor& o_arg,
                                                      const Tensor& lse_arg, bool causal,
                                                      c10::string_view precision,
                                                      std::optional<double> scale_arg) {
  check_qkv(q_arg, k_arg, v_arg, precision);
  const at::ScalarType dtype = q_arg.scalar_type();
  const QkvOperands in(q_arg, k_arg, v_arg);
  const Tensor &q = in.q, &k = in.k, &v = in.v;
  const std::size_t qkv_ld = in.ld;
  check_tensor(o_arg, "o", dtype, &q);
  check_shape(o_arg, "o", q.sizes().vec());
  const Tensor grad_o = dense_input(grad_o_arg, "grad_o", dtype, &q);
  const Tensor lse = dense_input(lse_arg, "lse", at::kFloat, &q);
  check_shape(grad_o, "grad_o", q.sizes().vec());
  check_shape(lse, "lse", {q.size(0), q.size(1), q.size(2)});
  const c10::cuda::CUDAGuard guard(q.device());
  const auto f32 = q.options().dtype(at::kFloat);
  const int batch = int(q.size(0)), heads = int(q.size(1)), seq = int(q.size(2)), d = int(q.size(3));
  const float scale = attention_scale(scale_arg, d);
  Tensor delta = at::empty({q.size(0), q.size(1), q.size(2)}, f32);
  if (q.numel() == 0) {
    auto empty = [&] { return sixteen_bits(q) ? sdpa_layout(q) : at::empty(q.sizes(), f32); };
    return {empty(), empty(), empty()};
  }
  if (!sixteen_bits(q)) {
    const Tensor o = dense_aligned(o_arg);
    Tensor dq = at::empty(q.sizes(), f32), dk = at::empty(q.sizes(), f32), dv = at::empty(q.sizes(), f32);
    call([&] {
      bridge::attention_backward(std::string(precision), batch, heads, seq, d, causal, q.data_ptr<float>(),
                                 k.data_ptr<float>(), v.data_ptr<float>(), grad_o.data_ptr<float>(),
                                 o.data_ptr<float>(), lse.data_ptr<float>(), delta.data_ptr<float>(),
                                 dq.data_ptr<float>(), dk.data_ptr<float>(), dv.data_ptr<float>(), scale,
                                 stream_of(q));
    });
    return {dq, dk, dv};
  }
  // bf16 and fp16: the gradients in q's dtype, in SDPA's layout (sdpa_layout). delta from dO and O as they lie
  // (O as the forward wrote it, or as the caller passes it: the last dimension dense); dQ summed
  // in fp32, then rounded.
  Tensor dq = sdpa_layout(q), dk = sdpa_layout(q), dv = sdpa_layout(q);
  const bool o_readable = o_arg.stride(3) == 1 && o_arg.stride(0) % 8 == 0 && o_arg.stride(1) % 8 == 0 &&
                          o_arg.stride(2) % 8 == 0 && reinterpret_cast<std::uintptr_t>(o_arg.data_ptr()) % 16 == 0;
  const Tensor o = o_readable ? o_arg : dense_aligned(o_arg);  // read 16 bytes at a time
  const Tensor dout = dense_aligned(grad_o);
  Tensor dq32 = at::empty(q.sizes(), f32);
  call([&] {
    bridge::attention_delta16(storage16(q), batch, heads, seq, d, dout.data_ptr(), bht(dout), o.data_ptr(), bht(o),
                              delta.data_ptr<float>(), stream_of(q));
  });
  if (hopper(q)) {
    Tensor db = at::empty({2 * q.size(1) * q.size(3)}, f32);  // the kernel's column sums, unused
    // The persistent blocks' counter (step 11's kernel, d = 128), a call's own: zero, and zero again after
    // the kernel. The other kernels take none (no memset a call).
    const bool counts = bridge::hopper_attention_backward_counts(int(batch), int(heads), int(seq), int(d));
    Tensor counter = counts ? at::zeros({2}, q.options().dtype(at::kInt)) : Tensor();
    call([&] {
      bridge::hopper_attention_backward(storage16(q), batch, heads, seq, d, causal, q.data_ptr(), k.data_ptr(),
                                        v.data_ptr(), qkv_ld, dout.data_ptr(), lse.data_ptr<float>(),
                                        delta.data_ptr<float>(),
                                        dq32.data_ptr<float>(), dk.data_ptr(), dv.data_ptr(), db.data_ptr<float>(),
                                        counts ? reinterpret_cast<unsigned*>(counter.data_ptr<int>()) : nullptr, scale,
                                        stream_of(q));
    });
    call([&] {
      bridge::attention_rows_to16(storage16(q), batch, heads, seq, d, dq32.data_ptr<float>(), dq.data_ptr(), bht(dq),
                                  stream_of(q));
    });
    return {dq, dk, dv};
  }
  Tensor dk32 = at::empty(q.sizes(), f32), dv32 = at::empty(q.sizes(), f32);
  call([&] {
    bridge::attention_backward16(storage16(q), batch, heads, seq, d, causal, q.data_ptr(), k.data_ptr(),
                                 v.data_ptr(), dout.data_ptr(), lse.data_ptr<float>(), delta.data_ptr<float>(),
                                 dq32.data_ptr<float>(), dk32.data_ptr<float>(), dv32.data_ptr<float>(), scale,
                                 stream_of(q));
  });
  call([&] {
    for (auto [from, to] : {std::pair{&dq32, &dq}, {&dk32, &dk}, {&dv32, &dv}})
      bridge::attention_rows_to16(storage16(q), batch, heads, seq, d, from->data_ptr<float>(), to->data_ptr(),
                                  bht(*to), stream_of(q));
  });
  return {dq, dk, dv};
}

// ---- AdamW over flat float32 tensors, in place ----

void adamw_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, int64_t step,
            double lr, double beta1, double beta2, double eps, double weight_decay) {
  check_tensor(param, "param", at::kFloat);
  check_tensor(grad, "grad", at::kFloat, &param);
  check_tensor(exp_avg, "exp_avg", at::kFloat, &param);
  check_tensor(exp_avg_sq, "exp_avg_sq", at::kFloat, &param);
  check_shape(grad, "grad", param.sizes().vec());
  check_shape(exp_avg, "exp_avg", param.sizes().vec());
  check_shape(exp_avg_sq, "exp_avg_sq", param.sizes().vec());
  for (const auto& [t, name] : {std::pair{&param, "param"}, {&grad, "grad"}, {&exp_avg, "exp_avg"},
                                {&exp_avg_sq, "exp_avg_sq"}})
    TORCH_CHECK_VALUE(t->is_contiguous(), name, " must be contiguous (adamw_ updates it in place)");
  const std::string why = bridge::adamw_validate(step, lr, beta1, beta2, eps, weight_decay);
  TORCH_CHECK_VALUE(why.empty(), "adamw_: " + why);
  const c10::cuda::CUDAGuard guard(param.device());
  call([&] {
    bridge::adamw_step(param.data_ptr<float>(), grad.data_ptr<float>(), exp_avg.data_ptr<float>(),
                       exp_avg_sq.data_ptr<float>(), param.numel(), step, lr, beta1, beta2, eps, weight_decay,
                       stream_of(param));
  });
}

// The same step, each parameter's gradient a tensor of its own (grads[t], any shape, t's elements in
// order): param, exp_avg and exp_avg_sq flat, tensor t at the sizes before it each rounded up to 4.
void adamw_list_(const Tensor& param, at::TensorList grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay) {
  check_tensor(param, "param", at::kFloat);
  check_tensor(exp_avg, "exp_avg", at::kFloat, &param);
  check_tensor(exp_avg_sq, "exp_avg_sq", at::kFloat, &param);
  check_shape(exp_avg, "exp_avg", param.sizes().vec());
  check_shape(exp_avg_sq, "exp_avg_sq", param.sizes().vec());
  for (const auto& [t, name] : {std::pair{&param, "param"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"}})
    TORCH_CHECK_VALUE(t->is_contiguous(), name, " must be contiguous (adamw_list_ updates it in place)");
  std::vector<const float*> g;
  std::vector<std::int64_t> sizes;
  for (std::size_t t = 0; t < grads.size(); ++t) {
    const std::string name = "grads[" + std::to_string(t) + "]";
    check_tensor(grads[t], name.c_str(), at::kFloat, &param);
    TORCH_CHECK_VALUE(grads[t].is_contiguous(), name, " must be contiguous");
    g.push_back(grads[t].data_ptr<float>());
    sizes.push_back(grads[t].numel());
  }
  std::string why = bridge::adamw_validate(step, lr, beta1, beta2, eps, weight_decay);
  if (why.empty())
    why = bridge::adamw_list_validate(param.data_ptr<float>(), exp_avg.data_ptr<float>(), exp_avg_sq.data_ptr<float>(),
                                      param.numel(), g, sizes);
  TORCH_CHECK_VALUE(why.empty(), "adamw_list_: " + why);
  const c10::cuda::CUDAGuard guard(param.device());
  call([&] {
    bridge::adamw_list_step(param.data_ptr<float>(), exp_avg.data_ptr<float>(), exp_avg_sq.data_ptr<float>(),
                            param.numel(), g, sizes, step, lr, beta1, beta2, eps, weight_decay, stream_of(param));
  });
}

}  // namespace

TORCH_LIBRARY(cuda_perf_lab, m) {
  m.def("layernorm_forward(Tensor x, Tensor weight, Tensor bias, str variant) -> (Tensor, Tensor, Tensor)");
  m.def("layernorm_backward(Tensor grad_y, Tensor x, Tensor weight, Tensor mean, Tensor rstd, str variant)"
        " -> (Tensor, Tensor, Tensor)");
  m.def("gelu_forward(Tensor x, str variant) -> Tensor");
  m.def("gelu_backward(Tensor grad_y, Tensor x, str variant) -> Tensor");
  m.def("swish_forward(Tensor x, str variant) -> Tensor");
  m.def("swish_backward(Tensor grad_y, Tensor x, str variant) -> Tensor");
  m.def("cross_entropy_forward(Tensor logits, Tensor labels, int ignore_index, str variant) -> (Tensor, Tensor, Tensor)");
  m.def("cross_entropy_backward(Tensor grad_loss, Tensor logits, Tensor labels, Tensor lse, Tensor count,"
        " int ignore_index, str variant) -> Tensor");
  m.def("weighted_sum_forward(Tensor x, Tensor w, str variant) -> Tensor");
  m.def("weighted_sum_backward(Tensor grad_y, Tensor x, Tensor w, str variant) -> (Tensor, Tensor)");
  m.def("attention_forward(Tensor q, Tensor k, Tensor v, bool causal, str precision, float? scale=None)"
        " -> (Tensor, Tensor)");
  m.def("attention_backward(Tensor grad_o, Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, bool causal,"
        " str precision, float? scale=None) -> (Tensor, Tensor, Tensor)");
  m.def("adamw_(Tensor(a!) param, Tensor grad, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, int step, float lr,"
        " float beta1, float beta2, float eps, float weight_decay) -> ()");
  m.def("adamw_list_(Tensor(a!) param, Tensor[] grads, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, int step,"
        " float lr, float beta1, float beta2, float eps, float weight_decay) -> ()");
}

// The same functions for CPU tensors, so that a CPU tensor gets the checks' message ("must be a
// CUDA tensor") rather than the dispatcher's.
#define LAB_IMPLS(m)                                      \
  m.impl("layernorm_forward", &layernorm_forward);        \
  m.impl("layernorm_backward", &layernorm_backward);      \
  m.impl("gelu_forward", &gelu_forward);                  \
  m.impl("gelu_backward", &gelu_backward);                \
  m.impl("swish_forward", &swish_forward);                \
  m.impl("swish_backward", &swish_backward);              \
  m.impl("cross_entropy_forward", &cross_entropy_forward); \
  m.impl("cross_entropy_backward", &cross_entropy_backward); \
  m.impl("weighted_sum_forward", &weighted_sum_forward);  \
  m.impl("weighted_sum_backward", &weighted_sum_backward); \
  m.impl("attention_forward", &attention_forward);        \
  m.impl("attention_backward", &attention_backward);      \
  m.impl("adamw_", &adamw_);                              \
  m.impl("adamw_list_", &adamw_list_)

TORCH_LIBRARY_IMPL(cuda_perf_lab, CUDA, m) { LAB_IMPLS(m); }
TORCH_LIBRARY_IMPL(cuda_perf_lab, CPU, m) { LAB_IMPLS(m); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "cuda-perf-lab's kernels as PyTorch operators (torch.ops.cuda_perf_lab)";
  m.def("variants", &bridge::variants_of, "The variants of a chapter 3 topic compiled into the extension");
  m.def("clear_cache", &bridge::clear_cache, "Frees every variant state prepared for a shape");
  m.def("cached_states", &bridge::cached_states, "How many variant states are prepared");
  m.def("supports", &bridge::supports, "'' when a variant runs a shape on the current device, else why not");
  m.def("hopper_attention", &bridge::hopper_attention_supports,
        "'' when the bf16 attention runs the Hopper kernels (sm_90a) at head size d on the current device, else why "
        "not");
  m.def("hopper_attention_forward_blocks", &bridge::hopper_attention_forward_blocks,
        "How the 16-bit Hopper forward runs (batch, heads, seq, d, causal): 'grid', 'persistent N' (N blocks), or ''");
  m.def("hopper_attention_backward_kernel", &bridge::hopper_attention_backward_kernel,
        "Which of chapter 4's backward steps the 16-bit Hopper backward runs (batch, heads, seq, d): 'step 11, 2 "
        "consumers' (d = 128), 'step 12, 2 consumers' (d = 64), or ''");
}
