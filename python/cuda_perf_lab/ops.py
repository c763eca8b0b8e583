"""The operators' autograd formulas and fake (meta) implementations, and their front ends.

The forward operators save what their backward operators read, as PyTorch's own do: LayerNorm
its rows' mean and 1/std, cross-entropy its rows' log-sum-exp, attention O and its log-sum-exp
(the backward recomputes P tile by tile from them). The backward operators are not themselves
differentiable (no double backward).
"""
import math

import torch
import torch.nn.functional as F

ops = torch.ops.cuda_perf_lab
LIB = "cuda_perf_lab::"

# ---- fake implementations: shapes and dtypes only, for torch.compile and FakeTensor; every output
# dense, as the operators write them (a strided input is copied to a dense one first) ----


@torch.library.register_fake(LIB + "layernorm_forward")
def _(x, weight, bias, variant):
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    return x.new_empty(x.shape), x.new_empty(rows, dtype=torch.float32), x.new_empty(rows, dtype=torch.float32)


@torch.library.register_fake(LIB + "layernorm_backward")
def _(grad_y, x, weight, mean, rstd, variant):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)


for _name in ("gelu", "swish"):
    torch.library.register_fake(LIB + _name + "_forward")(lambda x, variant: x.new_empty(x.shape))
    torch.library.register_fake(LIB + _name + "_backward")(lambda grad_y, x, variant: x.new_empty(x.shape))


@torch.library.register_fake(LIB + "cross_entropy_forward")
def _(logits, labels, ignore_index, variant):
    rows = math.prod(logits.shape[:-1])
    f32 = torch.float32  # the loss, lse and count, on 16-bit logits too
    return logits.new_empty((), dtype=f32), logits.new_empty(rows, dtype=f32), logits.new_empty((), dtype=f32)


@torch.library.register_fake(LIB + "cross_entropy_backward")
def _(grad_loss, logits, labels, lse, count, ignore_index, variant):
    return logits.new_empty(logits.shape)


@torch.library.register_fake(LIB + "weighted_sum_forward")
def _(x, w, variant):
    return x.new_empty(x.shape[:-1])


@torch.library.register_fake(LIB + "weighted_sum_backward")
def _(grad_y, x, w, variant):
    return x.new_empty(x.shape), w.new_empty(w.shape)


def _attention_output(q):
    """An attention output as the operators write it: float32 dense for float32 q; for bf16 and
    fp16, q's dtype in scaled_dot_product_attention's layout, the (B, H, T, D) transpose of a dense
    (B, T, H, D)."""
    if q.dtype not in (torch.bfloat16, torch.float16):
        return q.new_empty(q.shape)
    b, h, t, d = q.shape
    return q.new_empty((b, t, h, d)).transpose(1, 2)


@torch.library.register_fake(LIB + "attention_forward")
def _(q, k, v, causal, precision, scale=None):
    return _attention_output(q), q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.register_fake(LIB + "attention_backward")
def _(grad_o, q, k, v, o, lse, causal, precision, scale=None):
    return tuple(_attention_output(q) for _ in range(3))


@torch.library.register_fake(LIB + "adamw_")
def _(param, grad, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay):
    return None  # in place: no outputs


@torch.library.register_fake(LIB + "adamw_list_")
def _(param, grads, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay):
    return None  # in place: no outputs


# ---- autograd ----


def _in(t, dtype):
    """t in dtype: t itself where it has it already. Not t.to(dtype), which returns t as an alias
    there: with it, _CrossEntropyRows under torch.compile gave reduction="none" a zero gradient on
    float32 logits (test_cross_entropy_compiles_with_ignored_rows failed on the H200; with t itself,
    the code float32 ran before the 16-bit twins, it passes)."""
    return t if t.dtype == dtype else t.to(dtype)


def _twin_of(t):
    """The suffix of the storage twins that run on t's dtype: "_bf16", "_fp16", or "" for float32."""
    return {torch.bfloat16: "_bf16", torch.float16: "_fp16"}.get(t.dtype, "")


def _backward_of(variant, topic, shape, twin=""):
    """The backward variant that goes with a forward variant: its program name + "_backward" when
    the extension has it (optimized_layernorm -> optimized_layernorm_backward), else the topic's
    optimized backward (optimized_gelu_tanh: the lab has no tanh-form backward; the erf form's
    derivative is within the approximation's own 5e-4 of it). Where that variant declares the
    shape N/A (the optimized LayerNorm backward's TMA pipeline takes rows of a multiple of 4 floats
    up to 8192, its one-pass step rows up to 16384, the forward 32768), the topic's other optimized
    backward variants in name order, then its baseline backward, which runs every shape.
    twin: "_bf16" or "_fp16" for 16-bit tensors, where the backward runs storage twins (_twin_of):
    the names are looked for with it, in the twins' topic (layernorm_backward_bf16, which has no twin
    of the TMA pipeline: its one-pass step runs), and returned without it (the bridge appends it)."""
    from . import _C

    backward = topic + "_backward"
    have = [v[:len(v) - len(twin)] for v in _C.variants(backward + twin) if v.endswith(twin)]
    name = variant + "_backward"
    if name not in have:
        name = "optimized_" + backward
    others = sorted(v for v in have if v.startswith("optimized_") and v != name)
    for candidate in [name] + others:
        if _C.supports(candidate + twin, list(shape)) == "":
            return candidate
    return "baseline_" + backward


def _ln_setup(ctx, inputs, output):
    x, weight, _bias, variant = inputs
    _y, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.variant = variant


def _ln_backward(ctx, grad_y, _grad_mean, _grad_rstd):
    x, weight, mean, rstd = ctx.saved_tensors
    d = x.shape[-1]
    backward = _backward_of(ctx.variant, "layernorm", (x.numel() // d if d else 0, d), _twin_of(x))
    dx, dw, db = ops.layernorm_backward(grad_y.contiguous(), x, weight, mean, rstd, backward)
    return dx, dw, db, None


torch.library.register_autograd(LIB + "layernorm_forward", _ln_backward, setup_context=_ln_setup)


def _act_autograd(name):
    def setup(ctx, inputs, output):
        x, variant = inputs
        ctx.save_for_backward(x)
        ctx.variant = variant

    def backward(ctx, grad_y):
        (x,) = ctx.saved_tensors
        backward = _backward_of(ctx.variant, name, (x.numel(),))
        return getattr(ops, name + "_backward")(grad_y.contiguous(), x, backward), None

    torch.library.register_autograd(LIB + name + "_forward", backward, setup_context=setup)


_act_autograd("gelu")
_act_autograd("swish")


def _ce_setup(ctx, inputs, output):
    logits, labels, ignore_index, variant = inputs
    _loss, lse, count = output
    ctx.save_for_backward(logits, labels, lse, count)
    ctx.ignore_index, ctx.variant = ignore_index, variant


def _ce_backward(ctx, grad_loss, _grad_lse, _grad_count):
    logits, labels, lse, count = ctx.saved_tensors
    shape = (math.prod(logits.shape[:-1]), logits.shape[-1])
    backward = _backward_of(ctx.variant, "cross_entropy", shape, _twin_of(logits))
    dlogits = ops.cross_entropy_backward(grad_loss.contiguous(), logits, labels, lse, count, ctx.ignore_index, backward)
    return dlogits, None, None, None


torch.library.register_autograd(LIB + "cross_entropy_forward", _ce_backward, setup_context=_ce_setup)


def _ws_setup(ctx, inputs, output):
    x, w, variant = inputs
    ctx.save_for_backward(x, w)
    ctx.variant = variant


def _ws_backward(ctx, grad_y):
    x, w = ctx.saved_tensors
    d = x.shape[-1]
    backward = _backward_of(ctx.variant, "weighted_sum", (x.numel() // d if d else 0, d))
    dx, dw = ops.weighted_sum_backward(grad_y.contiguous(), x, w, backward)
    return dx, dw, None


torch.library.register_autograd(LIB + "weighted_sum_forward", _ws_backward, setup_context=_ws_setup)


def _attn_setup(ctx, inputs, output):
    q, k, v, causal, precision, *scale = inputs  # scale: given, or its default (None)
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.precision = causal, precision
    ctx.scale, ctx.inputs = (scale[0] if scale else None), len(inputs)


def _attn_backward(ctx, grad_o, _grad_lse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = ops.attention_backward(grad_o, q, k, v, o, lse, ctx.causal, ctx.precision, ctx.scale)
    return (dq, dk, dv) + (None,) * (ctx.inputs - 3)


torch.library.register_autograd(LIB + "attention_forward", _attn_backward, setup_context=_attn_setup)

# ---- front ends ----


def layer_norm(x, weight, bias, eps=1e-5, variant="optimized_layernorm"):
    """LayerNorm over the last dimension of x with scale `weight` and shift `bias` (each of that
    dimension's size), as torch.nn.functional.layer_norm(x, (D,), weight, bias, 1e-5). The lab's
    kernels use eps = 1e-5; another eps raises ValueError. The backward runs `variant`'s
    counterpart ("optimized_layernorm" -> "optimized_layernorm_backward"). x, weight and bias
    float32, bfloat16 or float16, all three the same, the result and the gradients in x's dtype: on
    bf16 and fp16 the forward and the backward run the variants' storage twins
    (optimized_layernorm_bf16, optimized_layernorm_backward_one_pass_bf16, and _fp16: fp32
    arithmetic, 16 bits in and out)."""
    if eps != 1e-5:
        raise ValueError("layer_norm: the lab's kernels use eps = 1e-5 (got %r)" % (eps,))
    return ops.layernorm_forward(x, weight, bias, variant)[0]


def gelu(x, variant="optimized_gelu"):
    """GELU in its erf form, as torch.nn.functional.gelu(x) (variant "optimized_gelu_tanh" is the
    tanh approximation, within 5e-4 of it). x float32, bfloat16 or float16, the result in x's
    dtype: on bf16 the program of the variant's name + "_bf16" runs (optimized_gelu_bf16: fp32
    arithmetic, bf16 in and out), on fp16 its fp16 twin, the name + "_fp16" (optimized_gelu_fp16)."""
    return ops.gelu_forward(x, variant)


def swish(x, variant="optimized_swish"):
    """Swish (SiLU), x * sigmoid(x), as torch.nn.functional.silu(x); x float32, bfloat16 or float16,
    as gelu."""
    return ops.swish_forward(x, variant)


class _CrossEntropyRows(torch.autograd.Function):
    """reduction="none" and label smoothing: the lab's forward kernel for each row's log-sum-exp,
    PyTorch's operations for the rest, forward (the label's logit, the rows' mean logit) and
    backward (softmax from the saved lse, the one-hot and the smoothing subtracted)."""

    @staticmethod
    def forward(ctx, logits, labels, ignore_index, reduction, label_smoothing, variant, out):
        _loss, lse, count = ops.cross_entropy_forward(logits, labels, ignore_index, variant)
        lse = lse.reshape(labels.shape)
        classes = logits.shape[-1]
        counted = labels != ignore_index
        in_range = (labels >= 0) & (labels < classes)
        safe = torch.where(in_range, labels, torch.zeros_like(labels)).long().unsqueeze(-1)
        nll = lse - logits.gather(-1, safe).squeeze(-1)
        if label_smoothing != 0:  # the rows' mean logit in fp32, without an fp32 copy of 16-bit logits
            nll = (1 - label_smoothing) * nll + label_smoothing * (lse - logits.mean(-1, dtype=torch.float32))
        row = nll
        row = torch.where(counted, torch.where(in_range, row, torch.full_like(row, math.nan)), torch.zeros_like(row))
        ctx.save_for_backward(logits, labels, lse, count)
        ctx.ignore_index, ctx.reduction, ctx.label_smoothing = ignore_index, reduction, label_smoothing
        if reduction == "none":
            return _in(row, out)
        return _in(row.sum() if reduction == "sum" else row.sum() / count, out)

    @staticmethod
    def backward(ctx, grad):
        logits, labels, lse, count = ctx.saved_tensors
        classes, eps = logits.shape[-1], ctx.label_smoothing
        if ctx.reduction == "mean":
            grad = grad / count
        counted = (labels != ctx.ignore_index).unsqueeze(-1)
        in_range = ((labels >= 0) & (labels < classes)).unsqueeze(-1)
        safe = torch.where(in_range, labels.unsqueeze(-1), torch.zeros_like(labels.unsqueeze(-1))).long()
        d = torch.exp(logits - lse.unsqueeze(-1)) - eps / classes
        d = d.scatter_add(-1, safe, torch.full_like(safe, -(1 - eps), dtype=d.dtype))
        d = torch.where(in_range, d, torch.full_like(d, math.nan))
        d = torch.where(counted, d * (grad.unsqueeze(-1) if ctx.reduction == "none" else grad), torch.zeros_like(d))
        return _in(d, logits.dtype), None, None, None, None, None, None


def cross_entropy(logits, labels, ignore_index=-100, reduction="mean", label_smoothing=0.0,
                  variant="optimized_cross_entropy"):
    """The cross-entropy of float32, bfloat16 or float16 logits (..., C) against int64 (or int32)
    labels (...), as torch.nn.functional.cross_entropy(logits.reshape(-1, C), labels.reshape(-1),
    ignore_index=..., reduction=..., label_smoothing=...) (reshaped back for reduction="none"): the
    classes are the last dimension, as a language model's logits (B, T, V) with labels (B, T), where PyTorch's own
    function puts them second for more than two dimensions. A row labelled ignore_index has no loss
    and no gradient; "mean" divides by the rows that count (NaN when none does, as PyTorch). Any
    other label outside [0, C) gives NaN in its row (the kernels do not fault, and a check for it
    would cost a synchronization; PyTorch stops the process with a device assertion).
    "mean" and "sum" without smoothing run the lab's kernels alone; reduction="none" and
    label_smoothing > 0 run the lab's forward for each row's log-sum-exp and PyTorch's operations
    for the rest. On bf16 (fp16) logits the programs of the variant's name + "_bf16" ("_fp16") run
    (the storage twins: fp32 arithmetic on the widened logits), the loss is rounded to the logits'
    dtype once, and the gradient is in that dtype, as PyTorch's. Under torch.autocast (on the
    logits' device) the loss stays float32, as autocast's cross_entropy returns it (autocast runs
    PyTorch's in float32, on an fp32 copy of the logits, which the lab does not need); the gradient
    is still in the logits' dtype, as autocast's cast back gives it."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError("cross_entropy: reduction must be 'mean', 'sum' or 'none' (got %r)" % (reduction,))
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError("cross_entropy: label_smoothing must be in [0, 1] (got %r)" % (label_smoothing,))
    out = torch.float32 if torch.is_autocast_enabled(logits.device.type) else logits.dtype
    if reduction == "none" or label_smoothing != 0.0:
        return _CrossEntropyRows.apply(logits, labels, ignore_index, reduction, float(label_smoothing), variant, out)
    loss, _lse, count = ops.cross_entropy_forward(logits, labels, ignore_index, variant)
    if reduction == "sum":
        loss = torch.where(count > 0, loss * count, torch.zeros_like(loss))  # the sum: 0 over no rows
    return _in(loss, out)  # fp32 on 16-bit logits, rounded once, as PyTorch's (not under autocast)


def weighted_sum(x, w, variant="optimized_weighted_sum"):
    """The weighted sum of x's last dimension, x @ w for x (..., D) and w (D,), as torch.matmul(x, w):
    one dot product a row (the lab's chapter 3 topic; "library_weighted_sum" runs cuBLAS's gemv).
    The backward runs `variant`'s counterpart: dx = dy w^T and dw = x^T dy in one pass over x."""
    return ops.weighted_sum_forward(x, w, variant)


# The head sizes the kernels take: the 16-bit ones (bf16, fp16) up to 256, the fp32 ones (fp32,
# 3xtf32) up to 128 (the chapter's fp32 kernels are written for up to 128). attention()
# pads another head size up to the largest to the next of them with zero columns (they add nothing
# to q k^T, and the output's and the gradients' padding is dropped): a copy of q, k and v, and the
# kernels' work at the padded width.
ATTENTION_HEAD_SIZES = (16, 32, 64, 128, 256)
ATTENTION_HEAD_SIZES_FP32 = (16, 32, 64, 128)


def attention(q, k, v, causal=False, precision=None, scale=None):
    """Fused attention softmax(scale q k^T) v over batch x heads x seq x d tensors, as
    torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    (scale: 1/sqrt(d) when None). Head sizes 1 to 256 in bf16 and fp16, 1 to 128 in float32: 16,
    32, 64, 128 and 256 as they are, another padded to the next of them (q, k and v copied with
    zero columns; the result a view of the padded one's first d columns). precision: "fp32" (the
    SIMT kernels; the default for float32 inputs), "3xtf32" (float32 on the tensor cores, fp32's
    accuracy), "bf16" (bf16 q, k, v; the default for them), "fp16" (float16 q, k, v; the default
    for them).
    float32 in, float32 out. bf16 in, bf16 out, laid out as SDPA's (the transpose of a dense
    (B, T, H, D) tensor, so o.transpose(1, 2).reshape(B, T, H * D) is free), and so are the
    gradients; on an sm_90 GPU at d = 64 and 128 (a build for sm_90a, setup.py's default there) the
    chapter's Hopper kernels run (the overlapped forward, the wgmma backward), elsewhere its
    mma.sync kernels (at d = 256 a warp owns 16 queries where it owns 32 below, and the backward
    computes the gradients' columns in two halves, its scores twice). cuda_perf_lab._C.hopper_attention(d)
    says "" when the Hopper kernels run, otherwise why not. float16 in, float16 out, as bf16's, on
    the same kernels with their instructions' type fp16."""
    if precision is None:
        precision = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(q.dtype, "fp32")
    widths = ATTENTION_HEAD_SIZES if precision in ("bf16", "fp16") else ATTENTION_HEAD_SIZES_FP32
    d = q.shape[-1] if q.dim() == 4 else 0
    if d > widths[-1]:
        raise ValueError("attention: head size %d; the %s kernels take head sizes 1 to %d (%s, another padded to "
                         "the next%s)" % (d, precision, widths[-1], ", ".join(map(str, widths)),
                                          "" if widths[-1] == 256 else "; bf16 and fp16 up to 256"))
    if d and d not in widths and k.shape == q.shape and v.shape == q.shape:
        width = next(w for w in widths if w >= d)
        pad = (0, width - d)
        scale = 1.0 / math.sqrt(d) if scale is None else scale
        o = ops.attention_forward(F.pad(q, pad), F.pad(k, pad), F.pad(v, pad), causal, precision, scale)[0]
        return o[..., :d]
    return ops.attention_forward(q, k, v, causal, precision, scale)[0]
