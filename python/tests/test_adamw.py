"""The AdamW operator (torch.ops.cuda_perf_lab.adamw_) and FlatAdamW against torch.optim.AdamW.

Accuracy, as test_ops.py states it: after several steps, each of p, m and v (and the change of p,
which is what the update's arithmetic decides: p itself is mostly its starting value) is at an
L2 distance from a float64 AdamW that is at most 4 times float32 torch.optim.AdamW's own distance,
or 2^-21 of the reference's norm; for the change of p also the most that fp32's rounding of p itself
can leave in it (p_rounding: on a tensor of a few elements PyTorch's own distance is a sample of a
few roundings, sometimes none, and 4 times it is no bound). The gradients span 10^-10 to 10 in magnitude, so that eps
(1e-8) decides some denominators: a kernel that placed eps wrongly, dropped a bias correction or
the decoupled decay moves those elements by a good part of lr, orders of magnitude past the bound.
"""
import copy
import math

import pytest

from conftest import MISSING

if MISSING:
    pytest.skip(MISSING, allow_module_level=True)

import torch  # noqa: E402

import cuda_perf_lab as lab  # noqa: E402
from test_ops import DEV, assert_close, rand  # noqa: E402

ops = torch.ops.cuda_perf_lab
HP = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
STEPS = 5


def grads(n, step, dtype=torch.float64):
    """Gradients of sign +-1 and magnitude 10^u, u uniform in [-10, 1], a few exactly zero."""
    g = torch.Generator(device=DEV).manual_seed(100 + step)
    mag = 10.0 ** (torch.rand(n, generator=g, device=DEV, dtype=torch.float64) * 11 - 10)
    sign = torch.randint(0, 2, (n,), generator=g, device=DEV).double() * 2 - 1
    out = mag * sign
    out[::97] = 0
    return out.to(dtype)


def torch_adamw(p0, dtype, steps=STEPS):
    """torch.optim.AdamW (single-tensor) in `dtype` from p0: (p, exp_avg, exp_avg_sq)."""
    p = p0.to(dtype).clone().requires_grad_()
    opt = torch.optim.AdamW([p], foreach=False, **HP)
    for s in range(1, steps + 1):
        p.grad = grads(p.numel(), s, dtype)
        opt.step()
    st = opt.state[p]
    return p.detach(), st["exp_avg"], st["exp_avg_sq"]


def lab_adamw_(p, m, v, steps=STEPS):
    for s in range(1, steps + 1):
        ops.adamw_(p, grads(p.numel(), s, torch.float32), m, v, s, HP["lr"], *HP["betas"], HP["eps"],
                   HP["weight_decay"])


def p_rounding(p0, p):
    """The most fp32 arithmetic can leave in p - p0, in whatever order an implementation updates p:
    each of the STEPS steps rounds at p's scale at most twice (p times the decay, then the update
    subtracted: half an ulp each) and multiplies p by the decay 1 - lr wd rounded to fp32 (half an
    ulp of 0.999, 2^-25, times |p|: under half an ulp of p), so 1.5 ulps of the largest |p| the step
    sees. A step moves p by at most lr (sqrt(t) + wd |p|) < 4 lr (Adam's normalized step
    |m_hat| / sqrt(v_hat) is at most sqrt(t)). The L2 norm over the elements. A 1% error in the
    update (1e-4 an element at the first step, where |m_hat| / sqrt(v_hat) is 1) lies ten times and more
    above 4 times this bound: test_adamw_bound_fails_a_one_percent_error."""
    reach = (torch.maximum(p0.abs(), p.abs()) + STEPS * 4 * HP["lr"]).float()
    ulp = torch.nextafter(reach, torch.full_like(reach, math.inf)).double() - reach.double()
    return (1.5 * STEPS * ulp).norm().item()


def check_against_torch(p0, p, m, v):
    ref, low = torch_adamw(p0, torch.float64), torch_adamw(p0, torch.float32)
    assert_close("p", p, ref[0], low[0])
    assert_close("p - p0", p.double() - p0.double(), ref[0] - p0.double(), low[0].double() - p0.double(),
                 cancel=p_rounding(p0, p))
    assert_close("exp_avg", m, ref[1], low[1])
    assert_close("exp_avg_sq", v, ref[2], low[2])


@pytest.mark.parametrize("n", [1, 3, 1000])
def test_adamw_bound_fails_a_one_percent_error(n):
    """The check is tight: the lab's kernel with lr 1% high (every update 1% too large, the decay
    with it) fails it, at one element as at a thousand."""
    p0 = rand(n, seed=7)
    p, m, v = p0.clone(), torch.zeros_like(p0), torch.zeros_like(p0)
    for s in range(1, STEPS + 1):
        ops.adamw_(p, grads(n, s, torch.float32), m, v, s, 1.01 * HP["lr"], *HP["betas"], HP["eps"],
                   HP["weight_decay"])
    with pytest.raises(AssertionError, match=r"^p( - p0)?: L2 error"):
        check_against_torch(p0, p, m, v)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 17, 1000, (1 << 20) + 3])
def test_adamw_matches_torch(n):
    """Sizes around the kernel's 16-byte quads: loose ends only (1, 3), quads only (4), both."""
    p0 = rand(n, seed=7)
    p, m, v = p0.clone(), torch.zeros_like(p0), torch.zeros_like(p0)
    lab_adamw_(p, m, v)
    check_against_torch(p0, p, m, v)


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_adamw_on_views_at_one_offset(offset):
    """Four views at one offset into tensors of one size share their address modulo 16: the kernel
    starts at the boundary below them, the first elements being loose ends."""
    n = 1001
    p0 = rand(n, seed=8)
    bases = [torch.empty(n + offset, device=DEV) for _ in range(4)]
    p, m, v, g = (b[offset:] for b in bases)
    p.copy_(p0), m.zero_(), v.zero_()
    for b in bases:
        b[:offset] = 12345.0  # outside the views: must stay
    for s in range(1, STEPS + 1):
        g.copy_(grads(n, s, torch.float32))
        ops.adamw_(p, g, m, v, s, HP["lr"], *HP["betas"], HP["eps"], HP["weight_decay"])
    check_against_torch(p0, p, m, v)
    for b in bases:
        assert (b[:offset] == 12345.0).all()


def flat_of(sizes):
    """The flat layout of adamw_list_: tensor t at the sizes before it each rounded up to 4."""
    at, out = 0, []
    for n in sizes:
        out.append((at, n))
        at += (n + 3) // 4 * 4
    return at, out


@pytest.mark.parametrize("sizes", [[1, 3, 4, 5, 17, 1000, (1 << 20) + 3], [(i % 7) + 1 for i in range(300)]])
def test_adamw_list_matches_torch(sizes):
    """Each tensor's gradient where it lies: tensors ending in partial quads (1, 3, 5, 17, ...) and
    whole ones, and 300 tensors (three launches of at most 128). Each tensor as torch.optim.AdamW has
    it, within the bound; the padding between tensors untouched. (Not bit for bit the flat kernel's:
    ptxas pairs the same formula's multiply-adds otherwise in the two kernels, an ulp apart here and
    there, as the H200 showed.)"""
    total, layout = flat_of(sizes)
    p0s = [rand(n, seed=7 + t) for t, n in enumerate(sizes)]
    p, m, v = torch.full((total,), 7.0, device=DEV), torch.full((total,), 7.0, device=DEV), \
        torch.full((total,), 7.0, device=DEV)
    for (at, n), p0 in zip(layout, p0s):
        p[at:at + n].copy_(p0), m[at:at + n].zero_(), v[at:at + n].zero_()
    for s in range(1, STEPS + 1):
        gs = [grads(n, s, torch.float32) for n in sizes]
        ops.adamw_list_(p, gs, m, v, s, HP["lr"], *HP["betas"], HP["eps"], HP["weight_decay"])
    pad = torch.ones(total, dtype=torch.bool, device=DEV)
    for (at, n), p0 in zip(layout, p0s):
        pad[at:at + n] = False
        check_against_torch(p0, p[at:at + n], m[at:at + n], v[at:at + n])
    for t in (p, m, v):
        assert (t[pad] == 7.0).all()


def expect_raises_untouched(cases, p):
    """Each (exception, message, call) raises that exception with that message and leaves p as it
    was: the operator checks before it launches."""
    for exc, text, call in cases:
        before = p.clone()
        with pytest.raises(exc, match=text):
            call()
        assert torch.equal(p, before)  # nothing ran
    torch.cuda.synchronize()


def test_adamw_list_bad_inputs_raise_clear_errors():
    total, _ = flat_of([5, 8])
    p, m, v = rand(total), torch.zeros(total, device=DEV), torch.zeros(total, device=DEV)
    g5, g8 = rand(5, seed=2), rand(8, seed=3)
    hp = (1e-3, 0.9, 0.999, 1e-8, 0.01)
    cases = [
        (ValueError, "step must be at least 1", lambda: ops.adamw_list_(p, [g5, g8], m, v, 0, *hp)),
        (ValueError, "16 elements; the gradients. sizes, each rounded up to 4, add up to 24",
         lambda: ops.adamw_list_(p, [g5, g5, g8], m, v, 1, *hp)),
        (ValueError, r"grads\[1\] must start at a 16-byte boundary", lambda: ops.adamw_list_(
            p, [g5, rand(9, seed=4)[1:]], m, v, 1, *hp)),
        (ValueError, r"grads\[1\] must be contiguous", lambda: ops.adamw_list_(p, [g5, rand(16)[::2]], m, v, 1, *hp)),
        (TypeError, r"grads\[0\] must be Float", lambda: ops.adamw_list_(p, [g5.double(), g8], m, v, 1, *hp)),
        (ValueError, r"grads\[0\] must be a CUDA tensor", lambda: ops.adamw_list_(p, [g5.cpu(), g8], m, v, 1, *hp)),
        (ValueError, "exp_avg must have shape", lambda: ops.adamw_list_(p, [g5, g8], m[:8], v, 1, *hp)),
        (ValueError, "16-byte boundary \\(fresh", lambda: ops.adamw_list_(rand(17)[1:], [g5, g8], m, v, 1, *hp)),
    ]
    expect_raises_untouched(cases, p)


def test_adamw_list_opcheck():
    total, _ = flat_of([37, 4])
    p = rand(total)
    torch.library.opcheck(ops.adamw_list_, (p, [rand(37, seed=2), rand(4, seed=3)], torch.zeros_like(p),
                                            torch.zeros_like(p), 3, 1e-3, 0.9, 0.999, 1e-8, 0.01))


def test_adamw_bad_inputs_raise_clear_errors():
    p = rand(64)
    m, v, g = torch.zeros_like(p), torch.zeros_like(p), rand(64, seed=2)
    hp = (1e-3, 0.9, 0.999, 1e-8, 0.01)
    cases = [
        (ValueError, "step must be at least 1", lambda: ops.adamw_(p, g, m, v, 0, *hp)),
        (ValueError, "beta1 must be in", lambda: ops.adamw_(p, g, m, v, 1, 1e-3, 1.0, 0.999, 1e-8, 0.01)),
        (ValueError, "beta2 must be in", lambda: ops.adamw_(p, g, m, v, 1, 1e-3, 0.9, -0.1, 1e-8, 0.01)),
        (ValueError, "lr must be", lambda: ops.adamw_(p, g, m, v, 1, -1.0, 0.9, 0.999, 1e-8, 0.01)),
        (ValueError, "eps must be", lambda: ops.adamw_(p, g, m, v, 1, 1e-3, 0.9, 0.999, -1.0, 0.01)),
        (ValueError, "weight_decay must be", lambda: ops.adamw_(p, g, m, v, 1, 1e-3, 0.9, 0.999, 1e-8, -1.0)),
        (ValueError, "grad must have shape", lambda: ops.adamw_(p, g[:63], m, v, 1, *hp)),
        (TypeError, "exp_avg must be Float", lambda: ops.adamw_(p, g, m.double(), v, 1, *hp)),
        (ValueError, "must be a CUDA tensor", lambda: ops.adamw_(p.cpu(), g.cpu(), m.cpu(), v.cpu(), 1, *hp)),
        (ValueError, "contiguous", lambda: ops.adamw_(p, g, m, rand(128)[::2], 1, *hp)),
        (ValueError, "same address modulo 16",
         lambda: ops.adamw_(rand(65)[1:], g, m, v, 1, *hp)),
    ]
    expect_raises_untouched(cases, p)


def test_adamw_opcheck():
    p = rand(37)
    torch.library.opcheck(ops.adamw_, (p, rand(37, seed=2), torch.zeros_like(p), torch.zeros_like(p), 3,
                                       1e-3, 0.9, 0.999, 1e-8, 0.01))


def test_adamw_compiles_without_graph_break():
    p0, g = rand(300), rand(300, seed=2)

    def f(p, g, m, v):
        ops.adamw_(p, g, m, v, 2, 1e-2, 0.9, 0.999, 1e-8, 0.1)
        return p.sum()

    a = [p0.clone(), g, torch.full_like(p0, 0.5), torch.full_like(p0, 0.25)]
    b = [t.clone() for t in a]
    torch.compile(f, fullgraph=True)(*a)
    f(*b)
    for x, y in zip(a, b):
        assert torch.equal(x, y)  # the same kernel on the same inputs, elementwise


# ---- FlatAdamW ----


def tiny_model(dtype=torch.float32):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.LayerNorm(5), torch.nn.GELU(),
                               torch.nn.Linear(5, 3)).to(DEV, dtype)


def test_flat_adamw_is_adamw():
    """Four steps with fixed gradients, given each way a user gives them (written into .grad in
    place, a new .grad tensor, after model.zero_grad() set them to None), lr changed between steps
    as a scheduler does: every parameter as float64 torch.optim.AdamW has it, within the bound."""
    models = {"lab": tiny_model(), "low": tiny_model(), "ref": tiny_model(torch.float64)}
    opts = {"lab": lab.FlatAdamW(models["lab"].parameters(), **HP),
            "low": torch.optim.AdamW(models["low"].parameters(), foreach=False, **HP),
            "ref": torch.optim.AdamW(models["ref"].parameters(), foreach=False, **HP)}
    for s in range(1, 5):
        for key, model in models.items():
            if s == 4:
                opts[key].param_groups[0]["lr"] = HP["lr"] / 3
            if s == 3:
                model.zero_grad(set_to_none=True)
            if s == 1 and key == "lab":
                opts[key].zero_grad(set_to_none=False)  # the flat gradient's views, written in place
            for i, p in enumerate(model.parameters()):
                g = grads(p.numel(), 10 * s + i, p.dtype).view_as(p)
                if s == 1 and key == "lab":
                    p.grad.copy_(g)
                else:
                    p.grad = g.clone()
            opts[key].step()
    for i, (a, lo, r) in enumerate(zip(*(m.parameters() for m in models.values()))):
        assert_close("parameter %d" % i, a.detach(), r.detach(), lo.detach())


def test_flat_adamw_keeps_gradients_in_place():
    model = tiny_model()
    opt = lab.FlatAdamW(model.parameters())
    x = rand(4, 7, seed=3)
    for _ in range(2):
        opt.zero_grad(set_to_none=False)
        model(x).square().sum().backward()
        for p in model.parameters():  # backward accumulated into the flat gradient's views
            assert p.grad.untyped_storage().data_ptr() == opt.flat_grad.untyped_storage().data_ptr()
            assert p.untyped_storage().data_ptr() == opt.flat.untyped_storage().data_ptr()
        before = opt.flat.clone()
        opt.step()
        assert not torch.equal(before, opt.flat)


def test_flat_adamw_takes_the_gradients_backward_makes():
    """zero_grad() (set_to_none, PyTorch's default): no gradient kept, backward's own tensors read
    where they lie, with no flat gradient buffer; the same parameters, bit for bit, as the flat
    gradient's in-place accumulation (zero_grad(set_to_none=False)) over three steps, with two
    micro-batches a step accumulated either way (the same sums, the same kernel)."""
    models = [tiny_model(), tiny_model()]
    opts = [lab.FlatAdamW(m.parameters(), **HP) for m in models]
    for s in range(3):
        for none, (model, opt) in zip((True, False), zip(models, opts)):
            opt.zero_grad(set_to_none=none)
            if none:
                assert opt.flat_grad is None and all(p.grad is None for p in model.parameters())
            for k in range(2):
                model(rand(4, 7, seed=30 + 2 * s + k)).square().sum().backward()
            if none:
                for p in model.parameters():
                    assert p.grad.untyped_storage().data_ptr() != opt.flat.untyped_storage().data_ptr()
            opt.step()
    for a, b in zip(*(m.parameters() for m in models)):
        assert torch.equal(a, b)
    # every parameter starts on a 16-byte boundary of the flat tensor
    assert all(p.data_ptr() % 16 == 0 for p in models[0].parameters())


def test_flat_adamw_state_dict_round_trip():
    a_model = tiny_model()
    a = lab.FlatAdamW(a_model.parameters(), **HP)
    a.zero_grad(set_to_none=False)
    for s in range(1, 4):
        for i, p in enumerate(a_model.parameters()):
            p.grad.copy_(grads(p.numel(), 10 * s + i, torch.float32).view_as(p))
        a.step()
    b_model = copy.deepcopy(a_model)
    b = lab.FlatAdamW(b_model.parameters(), **HP)
    b.zero_grad(set_to_none=False)
    b.load_state_dict(a.state_dict())
    assert a.state_dict()["state"][0]["step"].item() == 3
    for model, opt in ((a_model, a), (b_model, b)):
        for i, p in enumerate(model.parameters()):
            p.grad.copy_(grads(p.numel(), 40 + i, torch.float32).view_as(p))
        opt.step()
    for pa, pb in zip(a_model.parameters(), b_model.parameters()):
        assert torch.equal(pa, pb)


def test_flat_adamw_rejects_what_one_launch_cannot_do():
    model = tiny_model()
    opt = lab.FlatAdamW(model.parameters())
    with pytest.raises(ValueError, match="parameter 0 has no gradient"):  # none yet: a fresh model's
        opt.step()
    opt.zero_grad(set_to_none=False)
    list(model.parameters())[2].grad = None
    with pytest.raises(ValueError, match="parameter 2 has no gradient"):
        opt.step()
    with pytest.raises(ValueError, match="float32 on one CUDA device"):
        lab.FlatAdamW(tiny_model(torch.float64).parameters())
    with pytest.raises(ValueError, match="one parameter group"):
        params = list(tiny_model().parameters())
        lab.FlatAdamW([{"params": params[:2]}, {"params": params[2:]}])
