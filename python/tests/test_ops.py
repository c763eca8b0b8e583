"""The bridge's operators against PyTorch's own, on the GPU.

Accuracy. Each output (and each gradient) is compared with PyTorch's float64 result on the same
inputs. The lab's float32 result passes when its L2 distance from float64 is at most 4 times the
larger of PyTorch float32's own distance (or bf16's, for the bf16 attention) and a floor of
2^-21 of the tensor's norm. A distance over many elements is a steady statistic, so the bound
neither flakes on a seed nor hides a wrong kernel (a wrong element of a large tensor moves it by
orders of magnitude); the floor, 16 ulps relative to the tensor's norm, covers shapes where
PyTorch's float32 happens to be exact (one element, a single class) while the lab's
transcendental functions (erfcf, __expf, __logf: a few ulps each) are not. Gradients are checked
the same way against float64 autograd: the operators run in float32 (or bf16) only, so
torch.autograd.gradcheck, which needs float64, does not apply.

Shapes: random inputs at the shapes the chapters check (awkward ones included: one element, one
class, rows not a multiple of 4 or 32, seq off the 64-row tile) plus, for each op, a model-sized one.
"""
import math

import pytest

from conftest import MISSING

if MISSING:
    pytest.skip(MISSING, allow_module_level=True)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import cuda_perf_lab as lab  # noqa: E402

ops = torch.ops.cuda_perf_lab
DEV = "cuda"
FLOOR = 2.0 ** -21


def assert_close(name, got, ref64, torch_low, cancel=0.0):
    """got (the lab's) against ref64 (float64), allowed 4 x PyTorch's own lower-precision error.
    cancel: the error the inputs' rounding may leave where the result is a difference of larger
    terms (attention's dQ and dK at one key: exactly zero, whatever the terms), for shapes where
    PyTorch's order of operations happens to cancel them exactly; or the error of a same-precision
    implementation that sums as the lab's kernel does, where PyTorch's sums differently
    (sequential_sum_error)."""
    ref = ref64.double()
    err = (got.double() - ref).norm().item()
    allowed = 4 * max((torch_low.double() - ref).norm().item(), FLOOR * ref.norm().item(), cancel)
    assert math.isfinite(err), "%s: not finite" % name
    assert err <= allowed, "%s: L2 error %.3g above %.3g (4 x PyTorch's own, or the floor)" % (name, err, allowed)


def rand(*shape, lo=-1.0, hi=1.0, dtype=torch.float32, seed=0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return (torch.rand(*shape, generator=g, device=DEV, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


# ---- LayerNorm ----

LN_SHAPES = [(1, 1), (3, 5), (7, 33), (300, 128), (64, 768), (33, 1000), (2, 4097), (2, 16384), (2, 32768),
             (4, 8, 768)]


@pytest.mark.parametrize("shape", LN_SHAPES)
@pytest.mark.parametrize("variant", ["optimized_layernorm", "baseline_layernorm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_layernorm_forward_and_gradients(shape, variant, dtype):
    """(3, 5), (7, 33) and (2, 16384): the optimized backward (the TMA pipeline) declares them N/A
    (D not a multiple of 4, or wider than 8192), and autograd runs its one-pass step there; (2, 4097)
    and (2, 32768): that step declares them N/A too (its register tiles), and autograd runs the
    baseline. bf16 and fp16: the storage twins run (+ "_bf16", "_fp16"; the backward's one-pass step
    where the TMA pipeline would, which has no twin); y and the gradients in x's dtype, as
    PyTorch's, against PyTorch's own error in that dtype."""
    d = shape[-1]
    x = rand(*shape, lo=-2, hi=4, seed=1, dtype=dtype)
    w, b = rand(d, lo=0.5, hi=1.5, seed=2, dtype=dtype), rand(d, lo=-0.5, hi=0.5, seed=3, dtype=dtype)
    dy = rand(*shape, seed=4, dtype=dtype)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    y = lab.layer_norm(*leaves, variant=variant)
    y.backward(dy)
    assert y.dtype == dtype and all(t.grad.dtype == dtype for t in leaves)
    ref = [t.double().requires_grad_() for t in (x, w, b)]
    y64 = F.layer_norm(ref[0], (d,), ref[1], ref[2], 1e-5)
    y64.backward(dy.double())
    low = [t.clone().requires_grad_() for t in (x, w, b)]
    y32 = F.layer_norm(low[0], (d,), low[1], low[2], 1e-5)
    y32.backward(dy)
    assert_close("y", y, y64, y32)
    for name, a, r, t in zip(("dx", "dweight", "dbias"), leaves, ref, low):
        assert_close(name, a.grad, r.grad, t.grad)


# Half an ulp of each 16-bit storage, relative: one rounding to nearest (bf16: 8 significant bits,
# fp16: 11; fp16's values here stay in its normal range).
HALF_ULP = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_layernorm_is_fp32_arithmetic_rounded_once(dtype):
    # Element by element: the lab's 16-bit y is the float64 LayerNorm of the 16-bit inputs rounded
    # to that storage, give or take fp32's arithmetic: within half an ulp (2^-8 relative in bf16,
    # 2^-11 in fp16) plus 1e-5 (the rows' sums of 768 terms in fp32 stay far inside it at these
    # values). A 1% error in any element of magnitude above 1e-3 fails. mean and rstd are float32,
    # as PyTorch's.
    x = rand(4096, 768, lo=-2, hi=4, seed=11, dtype=dtype)
    w = rand(768, lo=0.5, hi=1.5, seed=12, dtype=dtype)
    b = rand(768, lo=-0.5, hi=0.5, seed=13, dtype=dtype)
    y, mean, rstd = ops.layernorm_forward(x, w, b, "optimized_layernorm")
    assert y.dtype == dtype and mean.dtype == rstd.dtype == torch.float32
    ref = F.layer_norm(x.double(), (768,), w.double(), b.double(), 1e-5)
    err = (y.double() - ref).abs()
    bound = 1e-5 + (HALF_ULP[dtype] + 1e-5) * ref.abs()
    assert (err <= bound).all().item(), "worst %.3g of its bound" % (err / bound).max().item()


def test_layernorm_saves_mean_and_rstd():
    x = rand(300, 128, lo=-2, hi=4, seed=5)
    w, b = torch.ones(128, device=DEV), torch.zeros(128, device=DEV)
    _, mean, rstd = ops.layernorm_forward(x, w, b, "optimized_layernorm")
    x64 = x.double()
    mean64 = x64.mean(-1)
    rstd64 = (x64.var(-1, unbiased=False) + 1e-5).rsqrt()
    assert_close("mean", mean, mean64, x.mean(-1))
    assert_close("rstd", rstd, rstd64, (x.var(-1, unbiased=False) + 1e-5).rsqrt())


# ---- GELU and Swish ----

FLAT = [(1,), (3,), (4097,), (1000003,), (8, 128, 3072)]


@pytest.mark.parametrize("shape", FLAT)
@pytest.mark.parametrize("name", ["gelu", "swish"])
@pytest.mark.parametrize("role", ["optimized", "baseline"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_activation_forward_and_gradient(shape, name, role, dtype):
    # bf16 (fp16): the program of the variant's name + "_bf16" ("_fp16") runs (fp32 arithmetic on
    # 16-bit storage); the output and the gradient in x's dtype, as PyTorch's, against PyTorch's own
    # error in that dtype.
    x = rand(*shape, lo=-6, hi=6, seed=6, dtype=dtype)
    dy = rand(*shape, seed=7, dtype=dtype)
    fn = getattr(lab, name)
    torch_fn = F.gelu if name == "gelu" else F.silu
    a = x.clone().requires_grad_()
    y = fn(a, variant="%s_%s" % (role, name))
    y.backward(dy)
    assert y.dtype == dtype and a.grad.dtype == dtype
    r = x.double().requires_grad_()
    y64 = torch_fn(r)
    y64.backward(dy.double())
    t = x.clone().requires_grad_()
    y_low = torch_fn(t)
    y_low.backward(dy)
    assert_close(name, y, y64, y_low)
    assert_close("d" + name, a.grad, r.grad, t.grad)


@pytest.mark.parametrize("name", ["gelu", "swish"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_activation_is_fp32_arithmetic_rounded_once(name, dtype):
    # Element by element: the lab's 16-bit result is the float64 value rounded to that storage, give
    # or take fp32's arithmetic: within half an ulp (2^-8 relative in bf16, 2^-11 in fp16) plus
    # fp32's 1e-5 (which also holds fp16's subnormals, spaced 2^-24, in the far negative tail). A 1%
    # error in any element above 1e-3 fails.
    x = rand(1 << 20, lo=-6, hi=6, seed=9, dtype=dtype)
    dy = rand(1 << 20, seed=10, dtype=dtype)
    a = x.clone().requires_grad_()
    y = getattr(lab, name)(a)
    y.backward(dy)
    r = x.double().requires_grad_()
    y64 = (F.gelu if name == "gelu" else F.silu)(r)
    y64.backward(dy.double())
    for got, ref in ((y, y64), (a.grad, r.grad)):
        err = (got.double() - ref).abs()
        bound = 1e-5 + (HALF_ULP[dtype] + 1e-5) * ref.abs()
        assert (err <= bound).all().item(), "worst %.3g of its bound" % (err / bound).max().item()


def test_gelu_tanh_is_the_tanh_approximation():
    x = rand(100000, lo=-6, hi=6, seed=8)
    y = lab.gelu(x, variant="optimized_gelu_tanh")
    # Its own bound (the program's): every element within 5e-4 of the erf form; and it is the tanh
    # form: closer to PyTorch's approximate="tanh" than to the erf form by orders of magnitude.
    exact = F.gelu(x.double())
    assert (y.double() - exact).abs().max().item() <= 5e-4
    assert (y.double() - F.gelu(x.double(), approximate="tanh")).abs().max().item() <= 1e-5


# ---- Cross-entropy ----

CE_SHAPES = [(1, 1), (13, 1), (1, 2), (3, 5), (7, 33), (1000, 10), (64, 768), (5, 2049), (2, 50257), (512, 50304)]


@pytest.mark.parametrize("shape", CE_SHAPES)
@pytest.mark.parametrize("variant", ["optimized_cross_entropy"])
@pytest.mark.parametrize("label_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cross_entropy_and_gradient(shape, variant, label_dtype, dtype):
    # 16-bit logits: the storage twins run (+ "_bf16", "_fp16"); the loss and the gradient in the
    # logits' dtype, as PyTorch's, against PyTorch's own error in that dtype.
    rows, classes = shape
    x = rand(rows, classes, lo=-8, hi=8, seed=9, dtype=dtype)
    g = torch.Generator(device=DEV).manual_seed(10)
    labels = torch.randint(0, classes, (rows,), generator=g, device=DEV).to(label_dtype)
    a = x.clone().requires_grad_()
    loss = lab.cross_entropy(a, labels, variant=variant)
    (loss * 1.5).backward()  # a gradient other than 1 reaches the loss: the backward's dloss
    r = x.double().requires_grad_()
    l64 = F.cross_entropy(r, labels.long())
    (l64 * 1.5).backward()
    t = x.clone().requires_grad_()
    l32 = F.cross_entropy(t, labels.long())
    (l32 * 1.5).backward()
    assert loss.shape == () and loss.dtype == dtype and a.grad.dtype == dtype
    assert_close("loss", loss, l64, l32)
    assert_close("dlogits", a.grad, r.grad, t.grad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_cross_entropy_gradient_is_fp32_arithmetic_rounded_once(dtype):
    # Element by element: the lab's 16-bit dlogits is the float64 gradient of the 16-bit logits
    # rounded to that storage, give or take fp32's arithmetic: within half an ulp (2^-8 relative in
    # bf16, 2^-11 in fp16) plus 1e-5 of the largest (a 1% error in any element above 1e-2 of it
    # fails; in fp16 the elements below its normal range, 2^-14, round to steps of 2^-24, far inside
    # that absolute term); the loss is the fp32 mean rounded once (half an ulp of it, and fp32's 1e-5).
    x = rand(512, 50304, lo=-8, hi=8, seed=19, dtype=dtype)
    labels = torch.randint(0, 50304, (512,), generator=torch.Generator(device=DEV).manual_seed(20), device=DEV)
    a = x.clone().requires_grad_()
    loss = lab.cross_entropy(a, labels)
    (loss * 1024).backward()  # a loss scale, as mixed precision uses: most gradients far above 1e-5
    r = x.double().requires_grad_()
    l64 = F.cross_entropy(r, labels)
    (l64 * 1024).backward()
    for got, ref in ((loss, l64), (a.grad, r.grad)):
        err = (got.double() - ref).abs()
        bound = 1e-5 * ref.abs().max() + (HALF_ULP[dtype] + 1e-5) * ref.abs()
        assert (err <= bound).all().item(), "worst %.3g of its bound" % (err / bound).max().item()


@pytest.mark.parametrize("reduction,smoothing", [("mean", 0.0), ("sum", 0.0), ("none", 0.0), ("mean", 0.1)])
def test_cross_entropy_under_autocast_returns_autocasts_dtypes(reduction, smoothing):
    # Under torch.autocast PyTorch runs cross_entropy in float32 (on a float32 copy of bf16 logits):
    # the loss float32, the gradient back in bf16 by the cast's backward. The lab's, on the bf16
    # logits themselves, returns the same dtypes: the loss within 4 x float32 PyTorch's error of
    # float64 (it is not rounded to bf16: half a bf16 ulp, 2^-9, would be thousands of times that),
    # the gradient within 4 x autocast PyTorch's.
    x = rand(64, 1000, lo=-8, hi=8, seed=21, dtype=torch.bfloat16)
    labels = torch.randint(0, 1000, (64,), generator=torch.Generator(device=DEV).manual_seed(22), device=DEV)
    up = rand(64, lo=0.5, hi=2, seed=23, dtype=torch.float32) if reduction == "none" else torch.tensor(1.5, device=DEV)
    kw = {"reduction": reduction, "label_smoothing": smoothing}
    a, t = x.clone().requires_grad_(), x.clone().requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = lab.cross_entropy(a, labels, **kw)
        want = F.cross_entropy(t, labels, **kw)
    assert loss.dtype == want.dtype == torch.float32
    (loss * up).sum().backward()
    (want * up).sum().backward()
    assert a.grad.dtype == t.grad.dtype == torch.bfloat16
    r = x.double().requires_grad_()
    l64 = F.cross_entropy(r, labels, **kw)
    (l64 * up.double()).sum().backward()
    assert_close("loss", loss, l64, want)
    assert_close("dlogits", a.grad, r.grad, t.grad)


def test_cross_entropy_bad_label_is_nan_not_a_fault():
    x = rand(4, 10, seed=11)
    loss = lab.cross_entropy(x, torch.tensor([0, 1, 10, 2], device=DEV))
    torch.cuda.synchronize()
    assert math.isnan(loss.item())
    assert lab.cross_entropy(x, torch.tensor([0, 1, 9, 2], device=DEV)).isfinite().item()


# The loss as PyTorch's: ignore_index (PyTorch's -100, or a class), the three reductions, label
# smoothing, and logits of any leading dimensions (classes last) against
# F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1), ...), reshaped back for "none".
CE_TORCH_CASES = [
    # (logits shape, ignore_index, fraction of rows ignored)
    ((2, 5, 11), -100, 0.3),    # (B, T, C), the shape that once killed the process
    ((11,), -100, 0.0),         # one row: logits (C,), a label of shape ()
    ((64, 768), -100, 0.25),
    ((4, 3, 1000), 7, 0.2),     # ignore_index a class
    ((3, 50257), -100, 0.34),
    ((1000, 10), -1, 0.5),
]


def _ce_inputs(shape, ignore_index, frac, seed):
    x = rand(*shape, lo=-8, hi=8, seed=seed)
    g = torch.Generator(device=DEV).manual_seed(seed + 1)
    labels = torch.randint(0, shape[-1], shape[:-1], generator=g, device=DEV)
    drop = torch.rand(shape[:-1], generator=g, device=DEV) < frac
    if labels.dim():
        drop.view(-1)[0] = False  # some row counts
    return x, torch.where(drop, torch.full_like(labels, ignore_index), labels)


@pytest.mark.parametrize("case", range(len(CE_TORCH_CASES)))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("label_dtype", [torch.int64, torch.int32])
def test_cross_entropy_as_pytorch(case, reduction, smoothing, label_dtype):
    shape, ignore_index, frac = CE_TORCH_CASES[case]
    x, labels = _ce_inputs(shape, ignore_index, frac, seed=20 + case)
    labels = labels.to(label_dtype)
    classes = shape[-1]
    a = x.clone().requires_grad_()
    loss = lab.cross_entropy(a, labels, ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
    upstream = rand(*loss.shape, lo=0.5, hi=2.0, seed=99) if loss.dim() else torch.tensor(1.5, device=DEV)
    (loss * upstream).sum().backward()
    refs = []
    for dtype in (torch.float64, torch.float32):
        r = x.to(dtype).requires_grad_()
        lr = F.cross_entropy(r.reshape(-1, classes), labels.long().reshape(-1), ignore_index=ignore_index,
                             reduction=reduction, label_smoothing=smoothing)
        lr = lr.reshape(shape[:-1]) if reduction == "none" else lr
        (lr * upstream.to(dtype)).sum().backward()
        refs.append((lr, r.grad))
    assert loss.shape == refs[0][0].shape and loss.dtype == torch.float32
    assert_close("loss", loss, refs[0][0], refs[1][0])
    assert_close("dlogits", a.grad, refs[0][1], refs[1][1])


@pytest.mark.parametrize("label_dtype", [torch.int64, torch.int32])
def test_cross_entropy_every_row_ignored(label_dtype):
    """No row counts: the mean is 0/0 (NaN, as PyTorch's), the sum 0, every row 0; the gradient 0."""
    x = rand(6, 40, seed=12)
    labels = torch.full((6,), -100, dtype=label_dtype, device=DEV)
    for reduction in ("mean", "sum", "none"):
        a = x.clone().requires_grad_()
        loss = lab.cross_entropy(a, labels, reduction=reduction)
        want = F.cross_entropy(x, labels.long(), reduction=reduction)
        assert torch.equal(loss.isnan(), want.isnan()), reduction
        assert torch.equal(torch.nan_to_num(loss), torch.nan_to_num(want)), reduction
        loss.sum().backward()
        assert torch.equal(a.grad, torch.zeros_like(x)), reduction


def test_cross_entropy_no_rows():
    """Logits of no rows: the mean NaN, the sum 0, "none" empty, as PyTorch's; the gradient empty."""
    for shape in ((0, 10), (2, 0, 7)):
        x = torch.empty(shape, device=DEV, requires_grad=True)
        labels = torch.empty(shape[:-1], dtype=torch.long, device=DEV)
        assert lab.cross_entropy(x, labels).isnan().item()
        assert lab.cross_entropy(x, labels, reduction="sum").item() == 0.0
        loss = lab.cross_entropy(x, labels, reduction="none")
        assert loss.shape == shape[:-1]
        lab.cross_entropy(x, labels, reduction="sum").backward()
        assert x.grad.shape == shape


def test_cross_entropy_arguments_checked():
    x, labels = rand(4, 10), torch.zeros(4, dtype=torch.long, device=DEV)
    for kwargs, match in (({"reduction": "avg"}, "reduction"), ({"label_smoothing": 1.5}, "label_smoothing"),
                          ({"ignore_index": 2 ** 40}, "ignore_index")):
        with pytest.raises(ValueError, match=match):
            lab.cross_entropy(x, labels, **kwargs)
    with pytest.raises(ValueError, match="at least one class"):
        lab.cross_entropy(torch.empty(3, 0, device=DEV), torch.zeros(3, dtype=torch.long, device=DEV))
    with pytest.raises(ValueError, match="labels must have shape"):
        lab.cross_entropy(rand(2, 5, 11), torch.zeros(2, 4, dtype=torch.long, device=DEV))


def test_cross_entropy_compiles_with_ignored_rows():
    x, labels = _ce_inputs((2, 8, 50), -100, 0.3, seed=40)
    for reduction in ("mean", "none"):
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        f = lambda z: lab.cross_entropy(z, labels, reduction=reduction).sum()  # noqa: E731
        got = torch.compile(f, fullgraph=True)(a)
        got.backward()
        want = f(b)
        want.backward()
        # the mean: the kernels alone, the same bits; "none": PyTorch's operations, which the compiler
        # may fuse and sum in another order
        assert torch.allclose(got, want, rtol=1e-6, atol=0), reduction
        assert torch.allclose(a.grad, b.grad, rtol=1e-6, atol=1e-12), reduction


def test_cross_entropy_baseline_has_no_lse_for_the_backward():
    with pytest.raises(ValueError, match="lse"):
        lab.cross_entropy(rand(4, 10), torch.zeros(4, dtype=torch.long, device=DEV), variant="baseline_cross_entropy")


# ---- The weighted sum (seed 000: x @ w) ----


def sequential_sum_error(terms, ref64, orders=8, seed=0):
    """The L2 error (RMS over `orders` random orders of the rows) of summing the float32 terms
    (rows x d) down the rows one at a time into one float32 accumulator a column: the arithmetic of
    the baselines, whose forward gives each row of x to one thread, which adds its products in
    turn, and whose backward atomicAdds each row's product into dw in the order the threads arrive.
    PyTorch (cuBLAS) sums in blocks, whose error grows more slowly with the terms: at 70000 rows of
    3 the baseline's dw came out 9 times PyTorch's error on the H100, and a row of 768 its y 7
    times."""
    g = torch.Generator().manual_seed(seed)
    t = terms.float().cpu()
    shuffled = torch.stack([t[torch.randperm(t.shape[0], generator=g)] for _ in range(orders)], 1)
    acc = torch.zeros(shuffled.shape[1:], dtype=torch.float32)
    for row in shuffled:  # rows x orders x d: one float32 addition a row, every order at once
        acc += row
    sq = ((acc.double() - ref64.detach().double().cpu()) ** 2).sum().item()
    return math.sqrt(sq / orders)


# The topic's check shapes (one row, one column, D not a multiple of 4, more rows than a grid row),
# the users' three, and leading dimensions of a batch.
WS_SHAPES = [(1, 1), (3, 5), (7, 33), (33, 1000), (5, 4097), (70000, 3), (64, 128), (256, 512), (1024, 2048),
             (4, 8, 768), (768,)]


@pytest.mark.parametrize("shape", WS_SHAPES)
@pytest.mark.parametrize("variant", ["optimized_weighted_sum", "baseline_weighted_sum", "library_weighted_sum"])
def test_weighted_sum_and_gradients(shape, variant):
    d = shape[-1]
    x, w = rand(*shape, seed=40), rand(d, seed=41)
    dy = rand(max(1, x.numel() // d), seed=42).reshape(shape[:-1])  # a vector x: a 0-d dy
    leaves = [t.clone().requires_grad_() for t in (x, w)]
    y = lab.weighted_sum(*leaves, variant=variant)
    y.backward(dy)
    ref = [t.double().requires_grad_() for t in (x, w)]
    y64 = ref[0] @ ref[1]
    y64.backward(dy.double())
    low = [t.clone().requires_grad_() for t in (x, w)]
    y32 = low[0] @ low[1]
    y32.backward(dy)
    assert y.shape == y32.shape and y.dtype == torch.float32
    baseline = variant.startswith("baseline")  # one float32 accumulator a sum (each product rounded)
    y_seq = sequential_sum_error((x.reshape(-1, d) * w).t(), y64.reshape(-1)) if baseline else 0.0
    assert_close("y", y, y64, y32, cancel=y_seq)
    assert_close("dx", leaves[0].grad, ref[0].grad, low[0].grad)
    dw_seq = sequential_sum_error(x.reshape(-1, d) * dy.reshape(-1, 1), ref[1].grad) if baseline else 0.0
    assert_close("dw", leaves[1].grad, ref[1].grad, low[1].grad, cancel=dw_seq)


def test_weighted_sum_backward_variants_agree():
    """The optimized backward (one pass, partial dw per row slice summed in a fixed order) gives the
    same bits on every call; the baseline's dw (atomicAdd) is only within fp32's rounding of it."""
    x, w, dy = rand(1000, 300, seed=43), rand(300, seed=44), rand(1000, seed=45)
    a = ops.weighted_sum_backward(dy, x, w, "optimized_weighted_sum_backward")
    b = ops.weighted_sum_backward(dy, x, w, "optimized_weighted_sum_backward")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = ops.weighted_sum_backward(dy, x, w, "baseline_weighted_sum_backward")
    assert torch.equal(a[0], c[0])  # dx: one product an element, the same in both
    assert_close("dw", c[1], (x.double().t() @ dy.double()), x.t() @ dy)


# ---- Attention ----

ATTN_SHAPES = [(1, 1, 1, 16, False), (1, 1, 1, 64, True), (2, 1, 77, 16, True), (1, 2, 130, 32, False),
               (2, 1, 65, 64, True), (1, 1, 200, 64, False), (1, 2, 129, 128, True), (1, 1, 300, 128, False),
               (2, 4, 256, 64, True),
               # head sizes the kernels do not take: padded to the next they do (ops.attention)
               (1, 2, 130, 80, True), (2, 1, 65, 96, False), (1, 1, 70, 40, True), (1, 1, 9, 3, False)]


def attention_cancel(q, k, v, do, causal, eps, scale=None):
    """The L2 error that inputs rounded to relative precision eps leave in dQ and dK through
    dP - delta, whatever it cancels to (see test_attention_forward_and_gradients): {"dq", "dk", "dv"}.
    scale: the scores' (1/sqrt(d) when None)."""
    s, d = q.shape[-2], q.shape[-1]
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    with torch.no_grad():
        qa, ka, va, doa = (t.double().abs() for t in (q, k, v, do))
        scores = (q.double() @ k.double().transpose(-2, -1)) * sc
        if causal:
            scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        p = torch.softmax(scores, dim=-1)
        e = doa @ va.transpose(-2, -1)
        w = p * (e + (p * e).sum(-1, keepdim=True)) * abs(sc)
        return {"dq": eps * (w @ ka).norm().item(), "dk": eps * (w.transpose(-2, -1) @ qa).norm().item(), "dv": 0.0}


# The relative rounding of the 16-bit kernels' P and dS (to bf16: 2^-8; to fp16: 2^-11), and fp32's
# 16u for fp32 and 3xTF32: the eps of attention_cancel.
ATTENTION_EPS = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
ATTENTION_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.mark.parametrize("shape", ATTN_SHAPES)
@pytest.mark.parametrize("precision", ["fp32", "3xtf32", "bf16", "fp16"])
def test_attention_forward_and_gradients(shape, precision):
    check_attention(shape, precision)


# Head sizes past 128, which the 16-bit kernels take (the fp32 ones raise: test_bad_inputs_raise_clear_errors):
# 256 as it is (the forward's warps own one m-tile, the backward's blocks half of the gradients'
# columns each), 160 and 200 padded to it; seq below, at and off the 64-row tile.
WIDE_SHAPES = [(1, 2, 130, 256, True), (2, 1, 65, 256, False), (1, 1, 64, 256, True), (1, 1, 200, 160, True),
               (1, 2, 129, 200, False)]


@pytest.mark.parametrize("shape", WIDE_SHAPES)
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_16bit_attention_at_head_sizes_past_128(shape, precision):
    check_attention(shape, precision)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 80])
def test_attention_scale_as_sdpa(precision, d):
    """scale= as SDPA's, in the forward and the backward: at a head size the kernels take and at a
    padded one (whose default would be the padded width's)."""
    check_attention((2, 2, 100, d, True), precision, scale=0.3)


def check_attention(shape, precision, scale=None):
    b, h, s, d, causal = shape
    dtype = ATTENTION_DTYPE.get(precision, torch.float32)
    q, k, v = (rand(b, h, s, d, seed=12 + i, dtype=dtype) for i in range(3))
    do = rand(b, h, s, d, seed=15, dtype=dtype)  # 16 bits in, a 16-bit gradient, as autograd hands it
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = lab.attention(*leaves, causal=causal, precision=precision, scale=scale)
    assert o.dtype == dtype and o.shape == q.shape
    o.backward(do.to(dtype))

    def torch_sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    ref = [t.double().requires_grad_() for t in (q, k, v)]
    o64 = torch_sdpa(*ref)
    o64.backward(do.double())
    # PyTorch at the same input precision (float32 with TF32 off, bf16 or fp16) is the yardstick.
    low = [t.clone().requires_grad_() for t in (q, k, v)]
    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        o_low = torch_sdpa(*low)
        o_low.backward(do.to(dtype))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    assert_close("o", o, o64, o_low)
    # dQ = scale dS K and dK = scale dS^T Q with dS = P o (dP - delta): dP_ij = dO_i . V_j and
    # delta_i = sum_j P_ij dP_ij are each sums of d products of inputs rounded to the kernel's
    # precision (2^-8 relative for two bf16 operands, 2^-11 for fp16's, 16u for fp32 and 3xTF32), so
    # their difference errs by that much of E_ij = |dO_i| . |V_j| plus its P-weighted row mean,
    # whatever it cancels to.
    eps = ATTENTION_EPS.get(precision, 16 * 2.0 ** -24)
    cancel = attention_cancel(q, k, v, do, causal, eps, scale)
    for name, a, r, t in zip(("dq", "dk", "dv"), leaves, ref, low):
        assert a.grad.dtype == dtype
        assert_close(name, a.grad, r.grad, t.grad, cancel[name])


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_16bit_attention_as_sdpa(precision):
    """bf16 (fp16) in, bf16 (fp16) out, in the layout of SDPA's flash kernels: o and the gradients the
    (B, H, T, D) transpose of a dense (B, T, H, D), so that a GPT-2 block's o.transpose(1, 2) is
    dense; and the backward's gradients whatever layout dO and O are handed to it in."""
    dtype = ATTENTION_DTYPE[precision]
    q, k, v = (rand(2, 3, 130, 64, seed=60 + i, dtype=dtype) for i in range(3))
    o, lse = ops.attention_forward(q, k, v, True, precision)
    assert o.dtype == dtype and o.shape == q.shape
    assert o.stride() == (130 * 3 * 64, 64, 3 * 64, 1)
    assert o.transpose(1, 2).is_contiguous()
    do = rand(2, 3, 130, 64, seed=63, dtype=dtype)
    grads = ops.attention_backward(do, q, k, v, o, lse, True, precision)
    again = ops.attention_backward(do.transpose(1, 2).contiguous().transpose(1, 2), q, k, v, o.contiguous(), lse,
                                   True, precision)
    for g, h in zip(grads, again):
        assert g.dtype == dtype and g.stride() == o.stride()
        # dK, dV: the same sums in the same order; dQ: added by the TMA or by atomics, in fp32, then
        # rounded: at most one ulp apart (2 ATTENTION_EPS of the value, the rounding's spacing; in fp16
        # below its normal range the spacing is 2^-24)
        ulp_floor = 2.0 ** -24 if precision == "fp16" else 0.0
        assert ((g.float() - h.float()).abs() <= 2 * ATTENTION_EPS[precision] * g.float().abs() + ulp_floor).all()


def test_bf16_attention_runs_the_hopper_kernels_on_sm90():
    """On an sm_90 GPU the package is built for sm_90a (setup.py) and the bf16 attention runs the
    chapter's Hopper kernels at head sizes 64 and 128; elsewhere it says why not."""
    from cuda_perf_lab import _C
    if torch.cuda.get_device_capability() != (9, 0):
        assert _C.hopper_attention(64) != ""
        pytest.skip("not an sm_90 GPU: %s" % _C.hopper_attention(64))
    assert _C.hopper_attention(64) == "" and _C.hopper_attention(128) == ""
    assert "64 and 128" in _C.hopper_attention(32)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 128])
def test_hopper_attention_reads_bthd_rows_as_they_lie(precision, d):
    """On an sm_90 GPU, q, k and v made as a GPT-2 block makes them (views of one (B, T, 3H, D)
    buffer, transposed: T's stride 3H x D) are read as they lie, through tensor maps over the rows
    (chapter 4's step 18): no copy, so the forward allocates O and lse alone. The kernels and their
    order of operations are the dense inputs', so O, lse, dK and dV are the dense inputs' bit for
    bit, and dQ (summed by the TMA in fp32, in an order the blocks pick) within one rounding step.
    Causal and not, a sequence not a whole number of tiles, and batches folded into the rows."""
    from cuda_perf_lab import _C
    if _C.hopper_attention(d) != "":
        pytest.skip("the Hopper kernels do not run here: %s" % _C.hopper_attention(d))
    dtype = ATTENTION_DTYPE[precision]
    b, h, t = 3, 4, 200
    qkv = rand(b, t, 3 * h, d, seed=70 + d, dtype=dtype)
    views = [x.transpose(1, 2) for x in qkv.split(h, dim=2)]  # (B, H, T, D), T's stride 3 H D
    dense = [x.contiguous() for x in views]
    assert not any(x.is_contiguous() for x in views)
    do = rand(b, h, t, d, seed=71, dtype=dtype)
    for causal in (True, False):
        ops.attention_forward(*views, causal, precision)  # a first call: the kernels' set-up, a plan
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        o, lse = ops.attention_forward(*views, causal, precision)
        torch.cuda.synchronize()
        made = torch.cuda.max_memory_allocated() - before
        outputs = o.numel() * o.element_size() + lse.numel() * lse.element_size()
        assert made <= outputs + 4096, "the forward allocated %d bytes for %d of outputs: a copy" % (made, outputs)
        o_dense, lse_dense = ops.attention_forward(*dense, causal, precision)
        assert torch.equal(o, o_dense) and torch.equal(lse, lse_dense)
        grads = ops.attention_backward(do, *views, o, lse, causal, precision)
        grads_dense = ops.attention_backward(do, *dense, o_dense, lse_dense, causal, precision)
        assert torch.equal(grads[1], grads_dense[1]) and torch.equal(grads[2], grads_dense[2])  # dK, dV
        ulp_floor = 2.0 ** -24 if precision == "fp16" else 0.0  # dQ: one rounding step apart at most
        dq, dq_dense = grads[0].float(), grads_dense[0].float()
        assert ((dq - dq_dense).abs() <= 2 * ATTENTION_EPS[precision] * dq_dense.abs() + ulp_floor).all()


def test_16bit_causal_attention_runs_persistent_blocks_at_few_waves():
    """On an sm_90 GPU a causal 16-bit forward whose grid is a few waves runs step 10's persistent
    blocks (one an SM, each a planned list of query tiles), the grid otherwise; at (4, 50, 200, 64) and
    (4, 16, 300, 128), causal, the blocks run two to three query tiles each, checked against SDPA as
    every shape is, forward and backward."""
    from cuda_perf_lab import _C
    if _C.hopper_attention(64) != "":
        pytest.skip("the Hopper kernels do not run here: %s" % _C.hopper_attention(64))
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    assert _C.hopper_attention_forward_blocks(4, 50, 200, 64, True) == "persistent %d" % min(400, sms)
    assert _C.hopper_attention_forward_blocks(4, 50, 200, 64, False) == "grid"
    assert _C.hopper_attention_forward_blocks(8, 16, 4096, 64, True) == "grid"
    assert _C.hopper_attention_forward_blocks(4, 50, 200, 32, True) == ""
    for precision in ("bf16", "fp16"):
        check_attention((4, 50, 200, 64, True), precision)
    check_attention((4, 16, 300, 128, True), "bf16")


def test_16bit_attention_backward_runs_the_chapters_kernel_for_its_head_size():
    """On an sm_90 GPU the 16-bit backward runs step 11's persistent kernel at d = 128 and step 12's
    (two consumers on query tiles of 128, dQ split by queries) at d = 64, at every grid; step 12's
    checked against SDPA in bf16 and fp16 on a grid of four waves and more with a causal length off
    the 128-query tile (1200 = 9 x 128 + 48), and the smaller grids of the other tests run it too."""
    from cuda_perf_lab import _C
    if _C.hopper_attention(64) != "":
        pytest.skip("the Hopper kernels do not run here: %s" % _C.hopper_attention(64))
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    heads = -(-4 * sms // (2 * 10))  # 2 x heads x 10 blocks of 128 keys (seq 1200): four waves or more
    assert _C.hopper_attention_backward_kernel(2, heads, 1200, 64) == "step 12, 2 consumers"
    assert _C.hopper_attention_backward_kernel(4, 12, 1024, 64) == "step 12, 2 consumers"
    assert _C.hopper_attention_backward_kernel(4, 12, 1024, 128) == "step 11, 2 consumers"
    assert _C.hopper_attention_backward_kernel(4, 12, 1024, 32) == ""
    for precision in ("bf16", "fp16"):
        check_attention((2, heads, 1200, 64, True), precision)


def test_attention_lse():
    q, k, v = (rand(2, 3, 100, 64, seed=20 + i) for i in range(3))
    _, lse = ops.attention_forward(q, k, v, True, "fp32")
    s = (q.double() @ k.double().transpose(-2, -1)) / 8.0
    s = s.masked_fill(torch.ones(100, 100, dtype=torch.bool, device=DEV).triu(1), float("-inf"))
    s32 = ((q @ k.transpose(-2, -1)) / 8.0).masked_fill(torch.ones(100, 100, dtype=torch.bool, device=DEV).triu(1),
                                                         float("-inf"))
    assert_close("lse", lse, torch.logsumexp(s, -1), torch.logsumexp(s32, -1))


def test_the_package_imports_first():
    """`import cuda_perf_lab` as a fresh interpreter's first import: its extension links PyTorch's
    libraries (libc10, libtorch), which only importing torch loads; the package imports it first."""
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    code = "import sys; sys.path[:0] = %r; import cuda_perf_lab; print(cuda_perf_lab.variants('gelu')[:1])" % (
        [p for p in sys.path if os.path.isdir(os.path.join(p, "cuda_perf_lab"))][:1])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=here)
    assert out.returncode == 0, out.stderr[-2000:]


# ---- the checks: a clear exception, never a fault ----


def test_bad_inputs_raise_clear_errors():
    x = rand(8, 768)
    w, b = torch.ones(768, device=DEV), torch.zeros(768, device=DEV)
    cases = [
        (ValueError, "CUDA tensor", lambda: lab.layer_norm(x.cpu(), w.cpu(), b.cpu())),
        (TypeError, "x must be Float, BFloat16 or Half \\(it is Double\\)", lambda: lab.layer_norm(x.double(), w, b)),
        (TypeError, "weight must be Half \\(it is Float\\)", lambda: lab.layer_norm(x.half(), w, b)),
        (TypeError, "weight must be BFloat16 \\(it is Float\\)", lambda: lab.layer_norm(x.bfloat16(), w, b)),
        (ValueError, "weight must have shape", lambda: lab.layer_norm(x, w[:100], b)),
        (ValueError, "eps", lambda: lab.layer_norm(x, w, b, eps=1e-6)),
        (ValueError, "longer than the largest register tile",
         lambda: lab.layer_norm(rand(1, 40000), torch.ones(40000, device=DEV), torch.zeros(40000, device=DEV))),
        (ValueError, "no variant 'optimized_nothing'", lambda: lab.layer_norm(x, w, b, variant="optimized_nothing")),
        (ValueError, "no variant 'optimized_gelu'", lambda: lab.layer_norm(x, w, b, variant="optimized_gelu")),
        (TypeError, "labels must be int32 or int64",
         lambda: lab.cross_entropy(x, torch.zeros(8, device=DEV))),
        (TypeError, "logits must be Float, BFloat16 or Half \\(it is Double\\)",
         lambda: lab.cross_entropy(x.double(), torch.zeros(8, dtype=torch.long, device=DEV))),
        (ValueError, "labels must have shape", lambda: lab.cross_entropy(x, torch.zeros(7, dtype=torch.long,
                                                                                       device=DEV))),
        (ValueError, "head size 160; the fp32 kernels take head sizes 1 to 128",
         lambda: lab.attention(*(rand(1, 1, 64, 160) for _ in range(3)))),
        (ValueError, "head size 160; the 3xtf32 kernels take head sizes 1 to 128",
         lambda: lab.attention(*(rand(1, 1, 64, 160) for _ in range(3)), precision="3xtf32")),
        (ValueError, "head size 300; the bf16 kernels take head sizes 1 to 256",
         lambda: lab.attention(*(rand(1, 1, 64, 300, dtype=torch.bfloat16) for _ in range(3)))),
        (ValueError, "d must be 16, 32, 64 or 128",  # the operator itself takes the kernels' sizes only
         lambda: ops.attention_forward(*(rand(1, 1, 64, 80) for _ in range(3)), False, "fp32")),
        (ValueError, "d must be 16, 32, 64 or 128",  # 256 in the 16-bit kernels alone
         lambda: ops.attention_forward(*(rand(1, 1, 64, 256) for _ in range(3)), False, "fp32")),
        (ValueError, "d must be 16, 32, 64, 128 or 256",
         lambda: ops.attention_forward(*(rand(1, 1, 64, 80, dtype=torch.half) for _ in range(3)), False, "fp16")),
        (ValueError, "q must be batch x heads x seq x head_dim \\(it has 3 dimensions\\)",
         lambda: lab.attention(*(rand(1, 64, 64) for _ in range(3)))),
        (ValueError, "k must have shape",
         lambda: lab.attention(rand(1, 1, 64, 64), rand(1, 1, 32, 64), rand(1, 1, 64, 64))),
        (TypeError, "BFloat16", lambda: lab.attention(*(rand(1, 1, 64, 64) for _ in range(3)), precision="bf16")),
        (ValueError, "precision must be", lambda: lab.attention(*(rand(1, 1, 64, 64) for _ in range(3)),
                                                                precision="fp8")),
        (ValueError, "must be a CUDA tensor", lambda: lab.gelu(torch.ones(3))),
        (TypeError, "x must be Float, BFloat16 or Half \\(it is Double\\)", lambda: lab.gelu(x.double())),
        (ValueError, "no variant 'optimized_gelu_tanh_bf16' of gelu_bf16",
         lambda: lab.gelu(x.bfloat16(), variant="optimized_gelu_tanh")),
        (ValueError, "w must have shape", lambda: lab.weighted_sum(x, w[:100])),
        (TypeError, "w must be Float", lambda: lab.weighted_sum(x, w.double())),
        (ValueError, "at least one dimension", lambda: lab.weighted_sum(torch.ones((), device=DEV), w[:1])),
        (ValueError, "no variant 'optimized_gelu' of weighted_sum",
         lambda: lab.weighted_sum(x, w, variant="optimized_gelu")),
    ]
    for exc, text, call in cases:
        with pytest.raises(exc, match=text):
            call()
    torch.cuda.synchronize()  # nothing faulted: the device still runs
    assert torch.isfinite(lab.layer_norm(x, w, b)).all()


# ---- any strides: a strided input is copied to a dense one, and the result is the dense input's ----

def _strided_cases():
    """(name, function of the inputs, the inputs as views of other strides): a transposed view, a
    slice with a step, and attention's q, k, v made as a GPT-2 block makes them, (B, T, H, D)
    transposed to (B, H, T, D)."""
    x = rand(96, 64, lo=-2, hi=4, seed=50).t()               # 64 x 96, transposed
    w, b = rand(192, lo=0.5, hi=1.5, seed=51)[::2], rand(96, seed=52)
    logits = rand(40, 70, lo=-4, hi=4, seed=53)[:, ::2]      # 40 x 35, every other column
    labels = torch.randint(0, 35, (80,), device=DEV)[::2]
    qkv = rand(2, 130, 3 * 4, 32, seed=54)                   # (B, T, 3H, D): one buffer, as a block's
    q, k, v = (t.transpose(1, 2) for t in qkv.split(4, dim=2))  # (B, H, T, D), T's stride 3H x D
    qb, kb, vb = (t.transpose(1, 2) for t in qkv.to(torch.bfloat16).split(4, dim=2))
    return [
        ("layer_norm", lambda x, w, b: lab.layer_norm(x, w, b), (x, w, b)),
        ("gelu", lab.gelu, (x,)),
        ("swish", lab.swish, (x[:, ::3],)),
        ("cross_entropy", lambda z: lab.cross_entropy(z, labels), (logits,)),
        ("weighted_sum", lab.weighted_sum, (x, w)),
        ("attention fp32", lambda q, k, v: lab.attention(q, k, v, causal=True), (q, k, v)),
        ("attention bf16", lambda q, k, v: lab.attention(q, k, v, causal=True), (qb, kb, vb)),
    ]


@pytest.mark.parametrize("case", range(7))
def test_any_strides(case):
    """The same kernels on the same values: the outputs are the dense inputs' bit for bit, and so
    are the gradients up to the order of a sum (the attention backward adds dQ's parts atomically,
    in fp32): within 4 x 2^-21 of their norm, or, rounded to bf16 after that sum, each element
    within one bf16 step (2^-7 of it) of the dense inputs'."""
    name, f, args = _strided_cases()[case]
    strided = [a.detach().requires_grad_() for a in args]  # the views themselves, as leaves
    dense = [a.detach().contiguous().requires_grad_() for a in args]
    assert not all(a.is_contiguous() for a in strided), name
    y, y_dense = f(*strided), f(*dense)
    assert y.stride() == y_dense.stride() and torch.equal(y, y_dense), name
    g = rand(*y.shape, seed=55) if y.dim() else torch.tensor(1.5, device=DEV)
    y.backward(g.to(y.dtype))
    y_dense.backward(g.to(y.dtype))
    for i, (a, d) in enumerate(zip(strided, dense)):
        assert a.grad.shape == a.shape, name
        if a.grad.dtype == torch.bfloat16:
            off = (a.grad.float() - d.grad.float()).abs() > 2.0 ** -7 * d.grad.float().abs()
            assert not off.any(), "%s: grad %d, %d elements a bf16 step apart" % (name, i, off.sum().item())
        else:
            assert_close("%s: grad %d" % (name, i), a.grad, d.grad, d.grad)


def test_empty_inputs():
    assert lab.gelu(torch.empty(0, device=DEV)).shape == (0,)
    assert lab.layer_norm(torch.empty(0, 16, device=DEV), torch.ones(16, device=DEV),
                          torch.zeros(16, device=DEV)).shape == (0, 16)
    # the weighted sum with no rows, and with rows of no columns (an empty sum: 0, as x @ w gives)
    assert lab.weighted_sum(torch.empty(0, 16, device=DEV), torch.ones(16, device=DEV)).shape == (0,)
    assert torch.equal(lab.weighted_sum(torch.empty(3, 0, device=DEV), torch.empty(0, device=DEV)),
                       torch.zeros(3, device=DEV))
    x, w = torch.empty(0, 16, device=DEV, requires_grad=True), torch.ones(16, device=DEV, requires_grad=True)
    lab.weighted_sum(x, w).sum().backward()
    assert torch.equal(w.grad, torch.zeros(16, device=DEV))  # no rows: dw an empty sum


# ---- torch.library's own checks, and torch.compile without a graph break ----

def _opcheck_cases():
    x = rand(6, 40, lo=-2, hi=4)
    w, b = rand(40, lo=0.5, hi=1.5, seed=2), rand(40, seed=3)
    labels = torch.randint(0, 40, (6,), device=DEV)
    q, k, v = (rand(1, 2, 70, 32, seed=30 + i) for i in range(3))
    return [
        (ops.layernorm_forward, (x.requires_grad_(), w.requires_grad_(), b.requires_grad_(), "optimized_layernorm")),
        (ops.gelu_forward, (rand(1000, lo=-6, hi=6).requires_grad_(), "optimized_gelu")),
        (ops.swish_forward, (rand(1000, lo=-6, hi=6).requires_grad_(), "optimized_swish")),
        (ops.gelu_forward, (rand(1001, lo=-6, hi=6, dtype=torch.bfloat16).requires_grad_(), "optimized_gelu")),
        (ops.swish_forward, (rand(1001, lo=-6, hi=6, dtype=torch.float16).requires_grad_(), "optimized_swish")),
        (ops.cross_entropy_forward, (rand(6, 40, seed=5).requires_grad_(), labels, -100, "optimized_cross_entropy")),
        (ops.attention_forward, (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), True, "fp32")),
        # fp16 (the mma.sync kernels' fp16 instruction, SDPA's layout out) and a scale given
        (ops.attention_forward, tuple(rand(1, 2, 70, 64, seed=33 + i, dtype=torch.float16).requires_grad_()
                                      for i in range(3)) + (True, "fp16", 0.2)),
        (ops.weighted_sum_forward, (rand(6, 40, seed=6).requires_grad_(), rand(40, seed=7).requires_grad_(),
                                    "optimized_weighted_sum")),
    ]


@pytest.mark.parametrize("case", range(8))
def test_opcheck(case):
    op, args = _opcheck_cases()[case]
    torch.library.opcheck(op, args)


def test_compiles_without_graph_break():
    x = rand(16, 64, lo=-2, hi=4).requires_grad_()
    w, b = torch.ones(64, device=DEV, requires_grad=True), torch.zeros(64, device=DEV, requires_grad=True)
    labels = torch.randint(0, 64, (16,), device=DEV)

    def f(x, w, b):
        h = lab.gelu(lab.layer_norm(x, w, b))
        q = h.view(1, 1, 16, 64)
        return lab.cross_entropy(lab.attention(q, q, q, causal=True).view(16, 64), labels)

    compiled = torch.compile(f, fullgraph=True)  # fullgraph: a graph break is an error
    loss = compiled(x, w, b)
    loss.backward()
    ref = f(x.detach().clone().requires_grad_(), w, b)
    assert torch.equal(loss, ref)  # the same kernels on the same inputs, none of them with atomics
    assert x.grad is not None and torch.isfinite(x.grad).all()
