#!/usr/bin/env python3
"""The seeded property cases of test_property.py: every operator of the package against PyTorch
over shapes, leading dimensions, strides, dtypes and arguments drawn at random from one seed, and
the bad inputs each operator must refuse (or answer as PyTorch does).

Run as a child process by test_property.py, so that a case that faults the GPU (a misaligned
vector load, an out-of-bounds read that kills the CUDA context) fails one test with the case named,
rather than ending the whole run:

    python3 python/tests/property_cases.py --op layer_norm --cases 350 --seed 0

Before each case it prints the case ("case 17: layer_norm x (3, 0, 40) offset ..."), flushed, so
that a crash leaves the case that caused it as the last line. Each case's outputs and gradients
are held to PyTorch's float64 result as test_ops.py's assert_close holds them: the L2 distance at
most 4 times the largest of: PyTorch's own at the same precision (float32 with TF32 off, or bf16),
2^-21 of the norm, and, where a result is a difference of larger terms and PyTorch's order of
operations may land nearer than its own bound, the error of a same-precision implementation on
the same inputs: LayerNorm's dx by its textbook formula in float32; the weighted sum's y and dw by
a float32 sum taken a term at a time; the cross-entropy's loss and dlogits by chapter 3's
statement of its kernels' arithmetic (losses.cuh); attention's dQ and dK by the rounding the
inputs' precision leaves in dP - delta (test_ops.attention_cancel). PyTorch gets copies of the
inputs; the lab the views themselves. NaN must stand where PyTorch's float64 result has NaN, and
only there.
A mismatch prints "MISMATCH case ..." and the run goes on; the exit status is 1 when any case
mismatched, 0 otherwise.
"""
import argparse
import math
import os
import random
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_ops import ATTENTION_EPS, FLOOR, attention_cancel, sequential_sum_error  # noqa: E402

import cuda_perf_lab as lab  # noqa: E402

DEV = "cuda"
U = 2.0 ** -24  # fp32's unit roundoff


def sum_error(n):
    """lab::fp32::sum_error (common/src/verify.cpp): the relative error of a float32 sum of n terms,
    against the sum of their magnitudes (the smaller of the worst case and the probabilistic bound,
    lambda = 10)."""
    n = max(float(n), 1.0)
    worst = n * U / (1 - n * U) if n * U < 1 else math.inf
    return min(worst, math.expm1(10 * math.sqrt(n) * U + n * U * U / (1 - U)))
OPS = ("layer_norm", "gelu", "swish", "cross_entropy", "weighted_sum", "attention", "bad_inputs")


class Case:
    """One case's random choices, drawn from its own seed, and its description."""

    def __init__(self, op, seed):
        self.rng = random.Random("%s/%d" % (op, seed))
        self.gen = torch.Generator(device=DEV).manual_seed(self.rng.randrange(2 ** 62))
        self.words = []
        self.upstream = None

    def note(self, *words):
        self.words.extend(str(w) for w in words)

    def size(self, big=2000, zero=0.04):
        """A dimension's size: 0 now and then, mostly small and odd, now and then large."""
        r = self.rng.random()
        if r < zero:
            return 0
        if r < 0.7:
            return self.rng.randint(1, 40)
        return self.rng.randint(41, big)

    def lead(self, max_elements, last):
        """Leading dimensions (none to three) whose product times `last` stays under max_elements."""
        dims = []
        for _ in range(self.rng.choice((0, 1, 1, 2, 2, 3))):
            dims.append(self.size())
        while dims and math.prod(dims) * max(last, 1) > max_elements:
            dims[dims.index(max(dims))] //= 2
        return tuple(dims)

    def uniform(self, shape, lo, hi, dtype=torch.float32):
        t = torch.rand(shape, generator=self.gen, device=DEV, dtype=torch.float64) * (hi - lo) + lo
        return t.to(dtype)

    def layout(self, t, allow=("dense", "transposed", "step", "offset")):
        """The same values as a view of other strides: the last two dimensions transposed in
        memory, every other element of a wider tensor, or a dense tensor 4 bytes off its
        allocation's alignment."""
        kind = self.rng.choice(allow)
        if kind == "transposed" and t.dim() < 2:
            kind = "dense"
        self.note(kind)
        if kind == "transposed":
            return t.transpose(-1, -2).contiguous().transpose(-1, -2)
        if kind == "step":
            wide = torch.zeros(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype, device=DEV)
            wide[..., ::2] = t
            return wide[..., ::2]
        if kind == "offset":
            flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=DEV)
            view = flat[1:].view(t.shape)
            view.copy_(t)
            return view
        return t

    def __str__(self):
        return " ".join(self.words)


def distance(name, got, ref64, low, cancel=0.0):
    """'' when got is within 4 x max(PyTorch's own error, the floor, cancel) of ref64 and NaN stands
    exactly where ref64's does; otherwise what is wrong."""
    if tuple(got.shape) != tuple(ref64.shape):
        return "%s: shape %s, PyTorch's %s" % (name, tuple(got.shape), tuple(ref64.shape))
    ref, g, lo = ref64.double(), got.detach().double(), low.detach().double()
    nan = ref.isnan()
    if not torch.equal(g.isnan(), nan):
        return "%s: NaN at %d elements, PyTorch's float64 at %d" % (name, g.isnan().sum().item(), nan.sum().item())
    ref, g, lo = (t.masked_fill(nan, 0) for t in (ref, g, lo.masked_fill(lo.isnan(), 0)))
    err = (g - ref).norm().item()
    allowed = 4 * max((lo - ref).norm().item(), FLOOR * ref.norm().item(), cancel)
    if not math.isfinite(err) or err > allowed:
        return "%s: L2 error %.3g above %.3g" % (name, err, allowed)
    return ""


def _grads(out, leaves, g):
    """out's gradients with respect to the floating leaves against upstream g (zeros where unused)."""
    floats = [t for t in leaves if t.is_floating_point()]
    if not out.requires_grad:
        return [torch.zeros_like(t) for t in floats]
    grads = torch.autograd.grad(out, floats, g.to(out.dtype), allow_unused=True)
    return [torch.zeros_like(t) if d is None else d for t, d in zip(floats, grads)]


def run_both(f_lab, f_torch, inputs, upstream_of):
    """The lab's function, and PyTorch's in float64 and at the inputs' own precision, on the same
    inputs, with the same upstream gradient: [(name, lab's, float64's, low precision's)] for the
    output and each floating input's gradient."""
    def leaves(dtype=None):
        # PyTorch's inputs are copies (fresh, aligned allocations of the same values); the lab's the
        # views themselves.
        return [t.detach().to(dtype or t.dtype, copy=dtype is not False).requires_grad_() if t.is_floating_point()
                else t for t in inputs]

    mine = leaves(False)
    out = f_lab(*mine)
    g = upstream_of(out)
    got = [out] + _grads(out, mine, g)
    refs = []
    for dtype in (torch.float64, None):
        theirs = leaves(dtype)
        ref = f_torch(*theirs)
        refs.append([ref] + _grads(ref, theirs, g))
    names = ["out"] + ["grad%d" % i for i in range(len(got) - 1)]
    return list(zip(names, got, refs[0], refs[1]))


def check(results, cancels=None):
    """What is wrong with each of run_both's results, if anything."""
    bad = []
    for name, got, ref64, low in results:
        why = distance(name, got, ref64, low, (cancels or {}).get(name, 0.0))
        if why:
            bad.append(why)
    return bad


def upstream(c):
    """The upstream gradient of an output: random in [0.5, 2], kept as c.upstream; a value of the
    output's dtype (a scalar's too), so that the float64 reference and both precisions take the
    same number: a bf16 loss's upstream drawn in float32 would be rounded (2^-9) for the lab and
    PyTorch's bf16 and not for float64, an error of the test's own, as large as the one bf16 output
    rounding the lab makes."""
    def of(out):
        c.upstream = (c.uniform(out.shape, 0.5, 2.0, out.dtype) if out.dim()
                      else torch.tensor(c.rng.uniform(0.5, 2), device=DEV).to(out.dtype))
        return c.upstream
    return of


# ---- the operators ----

def case_layer_norm(c):
    d = c.rng.choice((1, 2, 3, 4, 5, 8, 31, 33, 64, 127, 128, 768, 1000, 1024, 4096, 4097, 8192, 20000))
    dtype = c.rng.choice((torch.float32, torch.bfloat16, torch.float16))
    # fp16 holds up to 65504: dbias sums the upstream gradient (up to 2) over the rows, so at most
    # 15000 of them there, as a user of fp16 keeps a sum in range (PyTorch's would overflow as well).
    shape = c.lead(400000 if dtype != torch.float16 else min(400000, 15000 * d), d) + (d,)
    c.note("layer_norm x", shape, str(dtype)[6:])
    x = c.layout(c.uniform(shape, -2, 4, dtype))
    w, b = c.uniform((d,), 0.5, 1.5, dtype), c.uniform((d,), -0.5, 0.5, dtype)
    results = run_both(lambda x, w, b: lab.layer_norm(x, w, b), lambda x, w, b: F.layer_norm(x, (d,), w, b, 1e-5),
                       (x, w, b), upstream(c))
    # dx = rstd (g - mean(g) - xhat mean(g xhat)) cancels where the row is short or its values close
    # (at D = 2 it is zero but for eps), and PyTorch's float32 may land nearer there than its own
    # bound; so dx is also allowed 4 x the error of the textbook formula evaluated in float32 on the
    # same inputs (two passes for the mean and variance; dy the upstream gradient run_both used).
    return check(results, {"grad0": ln_textbook_dx_error(x, w, c.upstream, results[1][2])})


def ln_textbook_dx_error(x, w, dy, dx64):
    """The L2 error against float64's dx of LayerNorm's backward evaluated in float32 from its
    formula: xhat = (x - mean) rstd, g = dy w, dx = rstd (g - mean(g) - xhat mean(g xhat))."""
    if dy is None or x.numel() == 0:
        return 0.0
    with torch.no_grad():
        x, dy = x.float(), dy.float()
        mean = x.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
        xhat, g = (x - mean) * rstd, dy * w
        dx = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
        return (dx.double() - dx64.double()).norm().item()


def case_activation(c, name):
    n = c.rng.choice((1, 3, 4, 5, 7, 33, 1000, 4097, 65537))
    shape = c.lead(1000000, n) + (n,)
    scale = c.rng.choice((1.0, 4.0, 12.0))
    dtype = c.rng.choice((torch.float32, torch.bfloat16, torch.float16))
    c.note(name, "x", shape, "scale", scale, str(dtype)[6:])
    x = c.layout(c.uniform(shape, -scale, scale, dtype))
    f_lab, f_torch = (lab.gelu, F.gelu) if name == "gelu" else (lab.swish, F.silu)
    return check(run_both(f_lab, f_torch, (x,), upstream(c)))


def case_cross_entropy(c):
    classes = c.rng.choice((1, 2, 3, 10, 64, 100, 1000, 4097, 32768, 50257, 100003))
    dtype = c.rng.choice((torch.float32, torch.bfloat16, torch.float16))
    reduction = c.rng.choice(("mean", "sum", "none"))
    limit = 2000000 if classes < 40000 else 600000
    if dtype == torch.float16 and reduction == "sum":
        # fp16 holds up to 65504: a sum of row losses (each at most 2 x 20 + log C, under 52) over
        # at most 1000 rows stays in range (PyTorch's would overflow as well past it).
        limit = min(limit, 1000 * classes)
    lead = c.lead(limit, classes)
    if not lead and c.rng.random() < 0.7:
        lead = (c.rng.randint(1, 40),)  # (C,) logits alone now and then
    shape = lead + (classes,)
    ignore = -100 if c.rng.random() < 0.85 else c.rng.randrange(classes)
    smoothing = c.rng.choice((0.0, 0.0, 0.0, 0.1, 0.3))
    label_dtype = c.rng.choice((torch.int64, torch.int32))
    c.note("cross_entropy logits", shape, str(dtype)[6:], "ignore_index", ignore, reduction, "smoothing", smoothing,
           label_dtype)
    scale = c.rng.choice((1.0, 4.0, 20.0))
    logits = c.layout(c.uniform(shape, -scale, scale, dtype))
    labels = torch.randint(0, classes, lead, generator=c.gen, device=DEV)
    labels = torch.where(torch.rand(lead, generator=c.gen, device=DEV) < 0.1, torch.full_like(labels, ignore), labels)
    labels = labels.to(label_dtype)

    def f_torch(z):
        r = F.cross_entropy(z.reshape(-1, classes), labels.long().reshape(-1), ignore_index=ignore,
                            reduction=reduction, label_smoothing=smoothing)
        return r.reshape(lead) if reduction == "none" else r

    def f_lab(z):
        return lab.cross_entropy(z, labels, ignore_index=ignore, reduction=reduction, label_smoothing=smoothing)

    results = run_both(f_lab, f_torch, (logits,), upstream(c))
    fwd, bwd = ce_slack(logits, labels, ignore, reduction, smoothing, c.upstream)
    return check(results, {"out": fwd, "grad0": bwd})


def ce_slack(logits, labels, ignore, reduction, smoothing, upstream):
    """The L2 norm of the error a correct float32 kernel may make in the loss and in dlogits, as
    chapter 3's check states it (losses.cuh): each row's lse errs by sum_error(C + 256) + 7 A u
    (the sum of exp, __expf's 2 + 1.2 |a| ulp, the online rescales over the row's range A) +
    2^-21 (__logf) + 6 u log s + u |lse|; a row's loss by that and a few roundings of its terms
    (4 u of |lse|, the label's logit and the mean logit); the mean or sum by sum_error(K + 1) of
    the losses' magnitudes. dlogits: p = exp(x - lse) by (4 + 3.4 |a|) u p and the lse's own
    error p |d lse|, then the target's subtraction 3 u |p - y|, times the upstream gradient / K.
    Where PyTorch's float32 is more exact than that (a row whose loss is much smaller than its
    lse, as at two classes), the check allows this much."""
    classes = logits.shape[-1]
    x = logits.detach().double().reshape(-1, classes)
    lab_ = labels.long().reshape(-1)
    if x.shape[0] == 0:
        return 0.0, 0.0
    m, lo = x.max(-1).values, x.min(-1).values
    a0 = x - m[:, None]
    sums = a0.exp().sum(-1)
    lse = m + sums.log()
    counted = lab_ != ignore
    safe = torch.where((lab_ >= 0) & (lab_ < classes), lab_, torch.zeros_like(lab_))
    picked = x.gather(1, safe[:, None]).squeeze(1)
    lse_slack = sum_error(classes + 256) + 7 * (m - lo) * U + 2.0 ** -21 + 6 * U * sums.log() + U * lse.abs()
    row_slack = torch.where(counted, lse_slack + 4 * U * (lse.abs() + picked.abs() + x.mean(-1).abs()),
                            torch.zeros_like(lse))
    k = counted.sum().item()
    magnitude = torch.where(counted, (lse - picked).abs() + smoothing * (lse - x.mean(-1)).abs(),
                            torch.zeros_like(lse)).sum().item()
    g = upstream.double().reshape(-1) if reduction == "none" else upstream.double().reshape(1)
    if reduction == "none":
        fwd = row_slack.norm().item()
    else:
        fwd = row_slack.sum().item() + sum_error(k + 1) * magnitude
        if reduction == "mean":
            fwd, g = (fwd / k, g / k) if k else (0.0, g * 0)
    a = x - lse[:, None]
    p = a.exp()
    y = torch.zeros_like(x).scatter_(1, safe[:, None], 1.0) * (1 - smoothing) + smoothing / classes
    el = ((4 + 3.4 * a.abs()) * U * p + p * lse_slack[:, None] + 3 * U * (p - y).abs()) * g.abs()[:, None]
    bwd = torch.where(counted[:, None], el, torch.zeros_like(el)).norm().item()
    return fwd, bwd


def case_weighted_sum(c):
    d = c.rng.choice((1, 2, 3, 4, 5, 33, 128, 768, 1000, 4097))
    shape = c.lead(200000, d) + (d,)
    c.note("weighted_sum x", shape)
    x = c.layout(c.uniform(shape, -1, 1))
    w = c.layout(c.uniform((d,), -1, 1), ("dense", "step", "offset"))
    results = run_both(lab.weighted_sum, torch.matmul, (x, w), upstream(c))
    # y and dw are sums whose terms cancel (x and w of both signs); where cuBLAS's blocked sums land
    # nearer than its own bound, each is also allowed 4 x the error of a float32 sum taken one term
    # at a time (test_ops.sequential_sum_error, two random orders): the worst order a kernel may use.
    if x.numel() == 0:
        return check(results)
    xs, dy = x.detach().reshape(-1, d), c.upstream.reshape(-1, 1)
    y_seq = sequential_sum_error((xs * w).t(), results[0][2].reshape(-1), orders=2)
    dw_seq = sequential_sum_error(xs * dy, results[2][2], orders=2)
    return check(results, {"out": y_seq, "grad1": dw_seq})


def case_attention(c):
    precision = c.rng.choice(("fp32", "3xtf32", "bf16", "bf16", "fp16"))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    b, h = c.rng.randint(1, 3), c.rng.randint(1, 3)
    s = c.rng.choice((1, 2, 17, 64, 65, 100, 128, 129, 191, 192, 193, 256, 300))
    d = c.rng.choice((16, 32, 64, 128, 16, 32, 64, 128, 40, 80, 96))  # 40, 80, 96: padded (ops.attention)
    if precision in ("bf16", "fp16") and c.rng.random() < 0.2:
        d = c.rng.choice((256, 256, 160, 200))  # the 16-bit kernels' widest; 160 and 200 padded to it
    causal = c.rng.random() < 0.5
    bthd = c.rng.random() < 0.3  # q, k, v as a GPT-2 block makes them: views of one (B, T, 3H, D) buffer
    c.note("attention", (b, h, s, d), "causal" if causal else "full", precision, "bthd" if bthd else "")
    if bthd:
        qkv = c.uniform((b, s, 3 * h, d), -1, 1, dtype)
        q, k, v = (t.transpose(1, 2) for t in qkv.split(h, dim=2))
    else:
        q, k, v = (c.layout(c.uniform((b, h, s, d), -1, 1, dtype), ("dense", "offset")) for _ in range(3))
    do = c.uniform((b, h, s, d), -1, 1, dtype)

    def f_torch(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        results = run_both(lambda q, k, v: lab.attention(q, k, v, causal=causal, precision=precision), f_torch,
                           (q, k, v), lambda out: do)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    bad = [] if results[0][1].dtype == dtype else ["out: dtype %s, not %s" % (results[0][1].dtype, dtype)]
    eps = ATTENTION_EPS.get(precision, 16 * 2.0 ** -24)
    cancel = attention_cancel(q, k, v, do, causal, eps)
    return bad + check(results, {"grad0": cancel["dq"], "grad1": cancel["dk"]})


# ---- bad inputs: each raises the error it should, or matches PyTorch ----

def case_bad_inputs(c):
    """One bad input a case: a CPU tensor, a wrong dtype, a wrong shape, NaN, a label out of range."""
    rows, d = c.rng.randint(1, 20), c.rng.choice((1, 5, 64, 768))
    x = c.uniform((rows, d), -2, 2)
    w, b = c.uniform((d,), 0.5, 1.5), c.uniform((d,), -0.5, 0.5)
    labels = torch.randint(0, d, (rows,), generator=c.gen, device=DEV)
    q = c.uniform((1, 2, 33, 64), -1, 1)
    kind = c.rng.choice(("cpu", "dtype", "shape", "nan", "label", "attention"))
    c.note("bad input:", kind, (rows, d))
    expect = {
        "cpu": [(ValueError, lambda: lab.layer_norm(x.cpu(), w.cpu(), b.cpu())),
                (ValueError, lambda: lab.gelu(x.cpu())),
                (ValueError, lambda: lab.cross_entropy(x, labels.cpu())),
                (ValueError, lambda: lab.weighted_sum(x, w.cpu())),
                (ValueError, lambda: lab.attention(q.cpu(), q.cpu(), q.cpu()))],
        "dtype": [(TypeError, lambda: lab.layer_norm(x.double(), w, b)),
                  (TypeError, lambda: lab.layer_norm(x.bfloat16(), w, b)),
                  (TypeError, lambda: lab.swish(x.to(torch.int32))),
                  (TypeError, lambda: lab.gelu(x.double())),
                  (TypeError, lambda: lab.cross_entropy(x, labels.float())),
                  (TypeError, lambda: lab.weighted_sum(x, w.half())),
                  (TypeError, lambda: lab.attention(q, q, q, precision="bf16")),
                  (TypeError, lambda: lab.attention(q.half(), q.half(), q.half(), precision="bf16"))],
        "shape": [(ValueError, lambda: lab.layer_norm(x, w[:-1] if d > 1 else w.repeat(2), b)),
                  (ValueError, lambda: lab.cross_entropy(x, labels[:-1] if rows > 1 else labels.repeat(2))),
                  (ValueError, lambda: lab.weighted_sum(x, torch.ones(d + 1, device=DEV))),
                  (ValueError, lambda: lab.attention(q, q[:, :1], q)),
                  (ValueError, lambda: lab.attention(*[torch.ones(1, 1, 8, 129, device=DEV)] * 3)),  # d 129 > 128
                  (ValueError, lambda: lab.attention(q[0], q[0], q[0]))],
    }
    bad = []
    if kind in expect:
        for exc, call in expect[kind]:
            try:
                call()
                bad.append("%s: no %s raised" % (kind, exc.__name__))
            except exc:
                pass
            except Exception as e:  # noqa: BLE001 (the wrong kind of error is the finding)
                bad.append("%s: %s raised, not %s" % (kind, type(e).__name__, exc.__name__))
        return bad
    if kind == "nan":  # NaN where PyTorch has NaN, the rest as PyTorch
        xn = x.clone()
        xn[c.rng.randrange(rows), c.rng.randrange(d)] = math.nan
        pairs = [("layer_norm", lab.layer_norm(xn, w, b), F.layer_norm(xn.double(), (d,), w.double(), b.double()),
                  F.layer_norm(xn, (d,), w, b)),
                 ("gelu", lab.gelu(xn), F.gelu(xn.double()), F.gelu(xn)),
                 ("swish", lab.swish(xn), F.silu(xn.double()), F.silu(xn)),
                 ("cross_entropy", lab.cross_entropy(xn, labels, reduction="none"),
                  F.cross_entropy(xn.double(), labels, reduction="none"), F.cross_entropy(xn, labels, reduction="none")),
                 ("weighted_sum", lab.weighted_sum(xn, w), xn.double() @ w.double(), xn @ w)]
        for name, got, ref, low in pairs:
            why = distance(name, got, ref, low)
            if why:
                bad.append(why)
        return bad
    if kind == "label":  # out of [0, C), not ignore_index: NaN in that row (documented), never a fault
        bad_row = c.rng.randrange(rows)
        wrong = labels.clone()
        wrong[bad_row] = c.rng.choice((d, d + 7, -1, -99, 2 ** 31 - 1, -(2 ** 40)))
        per_row = lab.cross_entropy(x, wrong, reduction="none")
        torch.cuda.synchronize()
        nan = per_row.isnan()
        if not (nan[bad_row] and nan.sum().item() == 1):
            bad.append("label: NaN at rows %s, not row %d alone" % (nan.nonzero().flatten().tolist(), bad_row))
        if not lab.cross_entropy(x, wrong).isnan():
            bad.append("label: the mean is not NaN")
        return bad
    # attention: a head size past the largest the kernels take (128 in float32, 256 in bf16 and
    # fp16; smaller ones are padded) raises, naming it; the device still runs after
    dtype, d = c.rng.choice(((torch.float32, 160), (torch.bfloat16, 300), (torch.float16, 257)))
    try:
        lab.attention(*(c.uniform((1, 1, 8, d), -1, 1, dtype) for _ in range(3)))
        bad.append("attention %s d = %d: no ValueError raised" % (dtype, d))
    except ValueError:
        pass
    return bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", required=True, choices=OPS)
    p.add_argument("--cases", type=int, required=True)
    p.add_argument("--seed", type=int, default=0, help="the first case's number; cases seed, seed + 1, ...")
    a = p.parse_args()
    run = {"layer_norm": case_layer_norm, "gelu": lambda c: case_activation(c, "gelu"),
           "swish": lambda c: case_activation(c, "swish"), "cross_entropy": case_cross_entropy,
           "weighted_sum": case_weighted_sum, "attention": case_attention, "bad_inputs": case_bad_inputs}[a.op]
    mismatches = 0
    for i in range(a.seed, a.seed + a.cases):
        c = Case(a.op, i)
        print("case %d:" % i, end=" ", flush=True)
        bad = run(c)
        print(c, flush=True)
        for why in bad:
            mismatches += 1
            print("MISMATCH case %d (%s): %s" % (i, c, why), flush=True)
    torch.cuda.synchronize()  # a fault in the last case's kernels surfaces here, not after exit
    print("%s: %d cases, %d mismatches" % (a.op, a.cases, mismatches), flush=True)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
