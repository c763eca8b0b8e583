#!/usr/bin/env python3
"""The lab's operators through PyTorch (python/, cuda_perf_lab) against PyTorch eager,
torch.compile, and the lab's own C++ programs, at the chapters' large shapes, in one session.

For each operator and shape it times, the lab's way (CUDA events around one call, the L2 flushed
before it, the median of --reps calls after warm-up):
  - lab (torch): the operator called from Python (torch.ops.cuda_perf_lab.*), its outputs
    allocated by PyTorch's allocator;
  - C++: the program that runs the same kernels (build/chNN/optimized_*), run with --shape and
    --no-check; its median from its Google Benchmark JSON (cold L2, as here);
  - eager: PyTorch's own operator (F.layer_norm, F.gelu, F.cross_entropy, SDPA ...; a backward as
    torch.autograd.grad on the graph the forward built);
  - compile: torch.compile of the same function (for a backward, of its formula written out: what
    inductor generates for it), in each of --compile-modes; the column is the fastest mode's time,
    the mode named beside it when more than one was timed (the JSON keeps every mode's time).
    Attention has none (SDPA is PyTorch's kernel).
  - adamw (one step over n parameters in one flat tensor): eager is torch.optim.AdamW(fused=True),
    PyTorch's fastest, compile torch.compile of its foreach step; its C++ counterpart is the fused
    GPT-2 step's optimizer, which has no program of its own.
A call's CPU work (Python, the dispatcher, the checks) is kept out of its GPU time by a spin of
the GPU before the start event, long enough for the call to be queued behind it; the host time of
a call is reported apart (host_us: enqueueing one call, measured on the CPU).

  python3 tools/torch_ops_bench.py [--ops layernorm,cross_entropy,...] [--build build] [--reps 20]
      [--compile-modes default,max-autotune] [--kernels 5] [--json out.json] [--markdown out.md] [--quick]

--kernels K: each implementation also run under torch.profiler (the same cold L2, --reps calls), its
K longest kernels printed under the row, us a call: where a call's time goes, kernel by kernel, the
lab's against PyTorch's (the flush's own kernels are taken out).

Columns: ms for each; lab/C++ (1.00: the binding adds nothing; the target is within 5%), and
eager/lab and compile/lab (above 1: the lab is faster). Exit status 0; 2 for a bad argument, no
PyTorch or GPU, or the package not built.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import torch_gpt2  # noqa: E402  (cuda_torch)
from torch_timing import import_bridge, kernel_times, l2_flush_buffer, put_bridge_on_path, time_call  # noqa: E402

put_bridge_on_path(sys)

# op -> (chapter folder, C++ program, shapes (the chapter's sweep, large ones))
OPS = {
    "layernorm": ("ch03_kernels", "optimized_layernorm", ["16384x768", "8192x4096", "4096x16384"]),
    "layernorm_backward": ("ch03_kernels", "optimized_layernorm_backward", ["16384x768", "8192x4096", "4096x16384"]),
    "gelu": ("ch03_kernels", "optimized_gelu", ["16777216", "268435456"]),
    "gelu_backward": ("ch03_kernels", "optimized_gelu_backward", ["16777216", "268435456"]),
    "swish": ("ch03_kernels", "optimized_swish", ["16777216", "268435456"]),
    "swish_backward": ("ch03_kernels", "optimized_swish_backward", ["16777216", "268435456"]),
    # bf16 storage (fp32 arithmetic): the package runs the program of the variant's name + "_bf16".
    "gelu_bf16": ("ch03_kernels", "optimized_gelu_bf16", ["16777216", "268435456"]),
    "gelu_backward_bf16": ("ch03_kernels", "optimized_gelu_backward_bf16", ["16777216", "268435456"]),
    "swish_bf16": ("ch03_kernels", "optimized_swish_bf16", ["16777216", "268435456"]),
    "swish_backward_bf16": ("ch03_kernels", "optimized_swish_backward_bf16", ["16777216", "268435456"]),
    # fp16: the bf16 files' fp16 twins (the name + "_fp16").
    "gelu_fp16": ("ch03_kernels", "optimized_gelu_fp16", ["16777216", "268435456"]),
    "gelu_backward_fp16": ("ch03_kernels", "optimized_gelu_backward_fp16", ["16777216", "268435456"]),
    "swish_fp16": ("ch03_kernels", "optimized_swish_fp16", ["16777216", "268435456"]),
    "swish_backward_fp16": ("ch03_kernels", "optimized_swish_backward_fp16", ["16777216", "268435456"]),
    # LayerNorm on bf16: the storage twins of optimized_layernorm and of the backward's one-pass step
    # (the TMA pipeline has no twin).
    "layernorm_bf16": ("ch03_kernels", "optimized_layernorm_bf16", ["16384x768", "8192x4096", "4096x16384"]),
    "layernorm_backward_bf16": ("ch03_kernels", "optimized_layernorm_backward_one_pass_bf16",
                                ["16384x768", "8192x4096", "4096x16384"]),
    # The same on fp16 storage (their twins _fp16).
    "layernorm_fp16": ("ch03_kernels", "optimized_layernorm_fp16", ["16384x768", "8192x4096", "4096x16384"]),
    "layernorm_backward_fp16": ("ch03_kernels", "optimized_layernorm_backward_one_pass_fp16",
                                ["16384x768", "8192x4096", "4096x16384"]),
    "cross_entropy": ("ch03_kernels", "optimized_cross_entropy", ["8192x32768", "4096x50304"]),
    "cross_entropy_backward": ("ch03_kernels", "optimized_cross_entropy_backward", ["8192x32768", "4096x50304"]),
    # bf16 logits: the storage twins (the loss, lse and count fp32; dlogits bf16).
    "cross_entropy_bf16": ("ch03_kernels", "optimized_cross_entropy_bf16", ["8192x32768", "4096x50304"]),
    "cross_entropy_backward_bf16": ("ch03_kernels", "optimized_cross_entropy_backward_bf16",
                                    ["8192x32768", "4096x50304"]),
    "cross_entropy_fp16": ("ch03_kernels", "optimized_cross_entropy_fp16", ["8192x32768", "4096x50304"]),
    "cross_entropy_backward_fp16": ("ch03_kernels", "optimized_cross_entropy_backward_fp16",
                                    ["8192x32768", "4096x50304"]),
    "attention": ("ch04_compile_vs_fused", "optimized_attention_fused", ["8x16x4096x64x0", "8x16x4096x128x0"]),
    "attention_3xtf32": ("ch04_compile_vs_fused", "optimized_attention_fused_3xtf32",
                         ["8x16x4096x64x0", "8x16x4096x128x0"]),
    # bf16 on an sm_90 GPU: the package runs the chapter's Hopper kernels at d = 64 and 128 (the
    # overlapped forward, the wgmma backward), the C++ programs named here.
    "attention_bf16": ("ch04_compile_vs_fused", "optimized_attention_fused_overlap",
                       ["8x16x4096x64x0", "8x16x4096x128x0"]),
    # issue 43's targets: causal, at GPT-2 small's shape and the large one. The package runs step 10's
    # persistent blocks at the small one (a causal grid of a few waves) and the overlap step's grid at the
    # large one (31 waves), where the two are within 1.5% (python/csrc/bridge_attention_hopper.cu).
    "attention_bf16_causal": ("ch04_compile_vs_fused", "optimized_attention_fused_persistent",
                              ["4x12x1024x64x1", "8x16x4096x128x1"]),
    # q, k, v as a GPT-2 block makes them: one (B, T, 3H, D) buffer split and transposed to (B, H, T, D).
    # The package copies them to dense tensors first; lab/C++ is what the copy costs (SDPA reads them as
    # they are). GPT-2 small's shape, causal, and the large one.
    "attention_bf16_bthd": ("ch04_compile_vs_fused", "optimized_attention_fused_overlap",
                            ["4x12x1024x64x1", "8x16x4096x64x0"]),
    "attention_backward": ("ch04_compile_vs_fused", "optimized_attention_backward_fused", ["8x16x4096x64x0"]),
    "attention_backward_3xtf32": ("ch04_compile_vs_fused", "optimized_attention_backward_fused_3xtf32",
                                  ["8x16x4096x64x0"]),
    # The backward at d = 128 is step 11's kernel and at d = 64 step 12's (the package's choice,
    # python/csrc/bridge_attention_hopper.cu's backward_choice), the two kernels step 12's program runs.
    "attention_backward_bf16": ("ch04_compile_vs_fused", "optimized_attention_backward_fused_wgmma_tall",
                                ["8x16x4096x64x0", "8x16x4096x128x0"]),
    "attention_backward_bf16_causal": ("ch04_compile_vs_fused", "optimized_attention_backward_fused_wgmma_tall",
                                       ["4x12x1024x64x1", "8x16x4096x64x1", "8x16x4096x128x1"]),
    # fp16: the bf16 kernels on their fp16 instructions (T = __half: on an sm_90 GPU the Hopper
    # steps, elsewhere flash_bf16.cuh's mma.sync), no C++ program of their own. Issue 43's causal shapes.
    "attention_fp16_causal": (None, None, ["4x12x1024x64x1", "8x16x4096x128x1"]),
    "attention_backward_fp16_causal": (None, None, ["4x12x1024x64x1", "8x16x4096x128x1"]),
    # Head size 80 (and 96), which the kernels take padded to 128 (ops.attention: a copy of q, k, v
    # with zero columns, the kernels at width 128): the front end, forward and backward (autograd)
    # against SDPA at the real head size. No C++ program of its own.
    "attention_padded_bf16_causal": (None, None, ["4x16x1024x80x1", "8x16x4096x96x1"]),
    "attention_backward_padded_bf16_causal": (None, None, ["4x16x1024x80x1", "8x16x4096x96x1"]),
    # Head size 256 (bf16 and fp16 alone; the chapter's topic takes up to 128): flash_bf16.cuh's
    # mma.sync kernels, a warp owning 16 queries, the backward's gradients in two column halves, each
    # recomputing the scores. No C++ program of its own.
    "attention_wide_bf16_causal": (None, None, ["4x8x1024x256x1", "8x16x4096x256x1"]),
    "attention_backward_wide_bf16_causal": (None, None, ["4x8x1024x256x1", "8x16x4096x256x1"]),
    # No program of its own: the fused GPT-2 step runs it (parameters: GPT-2 small's 124M, and 16M).
    "adamw": (None, None, ["16777216", "124439808"]),
}


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def cases(torch, lab, op, shape, compile_mode="default"):
    """{implementation: callable} for one op and shape (inputs made here, as the programs make them)."""
    F = torch.nn.functional
    ops = torch.ops.cuda_perf_lab
    dims = [int(v) for v in shape.split("x")]

    def compiled(f):
        return torch.compile(f, mode=compile_mode)

    def rand(*s, lo=-1.0, hi=1.0, dtype=torch.float32, grad=False):
        return torch.empty(*s, device="cuda").uniform_(lo, hi).to(dtype).requires_grad_(grad)

    base, stored = op, torch.float32  # an op on 16-bit storage ends in its storage
    for suffix, t in (("_bf16", torch.bfloat16), ("_fp16", torch.float16)):
        if op.endswith(suffix):
            base, stored = op.removesuffix(suffix), t
    if base == "layernorm":
        n, d = dims
        x, w, b = (rand(n, d, lo=-2, hi=4, dtype=stored), rand(d, lo=0.5, hi=1.5, dtype=stored),
                   rand(d, lo=-0.5, hi=0.5, dtype=stored))
        f = lambda x, w, b: F.layer_norm(x, (d,), w, b, 1e-5)  # noqa: E731
        return {"lab": lambda: ops.layernorm_forward(x, w, b, "optimized_layernorm"), "eager": lambda: f(x, w, b),
                "compile": (compiled(f), (x, w, b))}
    if base == "layernorm_backward":
        n, d = dims
        x = rand(n, d, lo=-2, hi=4, dtype=stored, grad=True)
        w, b = rand(d, lo=0.5, hi=1.5, dtype=stored, grad=True), rand(d, dtype=stored, grad=True)
        dy = rand(n, d, dtype=stored)
        y = F.layer_norm(x, (d,), w, b, 1e-5)
        _, mean, rstd = ops.layernorm_forward(x.detach(), w.detach(), b.detach(), "optimized_layernorm")
        xd, wd = x.detach(), w.detach()

        def formula(dy, x, w, mean, rstd):  # the backward written out, for torch.compile: fp32, the
            t = dy.dtype                    # results in the inputs' dtype (as PyTorch's own backward)
            dy, x, w = dy.float(), x.float(), w.float()
            xhat = (x - mean[:, None]) * rstd[:, None]
            g = dy * w
            dx = rstd[:, None] * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
            return dx.to(t), (dy * xhat).sum(0).to(t), dy.sum(0).to(t)

        variant = "optimized_layernorm_backward" + ("_one_pass" if stored != torch.float32 else "")
        return {"lab": lambda: ops.layernorm_backward(dy, xd, wd, mean, rstd, variant),
                "eager": lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True),
                "compile": (compiled(formula), (dy, xd, wd, mean, rstd))}
    if op.split("_")[0] in ("gelu", "swish"):
        name, backward = op.split("_")[0], "backward" in op
        dtype = stored  # the storage its suffix names (above)
        fn = F.gelu if name == "gelu" else F.silu
        x = rand(dims[0], lo=-6, hi=6, dtype=dtype)
        if not backward:
            return {"lab": lambda: getattr(ops, name + "_forward")(x, "optimized_" + name), "eager": lambda: fn(x),
                    "compile": (compiled(fn), (x,))}
        xg, dy = x.clone().requires_grad_(), rand(dims[0], dtype=dtype)
        y = fn(xg)

        def formula(dy, x):  # in fp32, the result in the inputs' dtype (as PyTorch's own backward)
            dy, x, t = dy.float(), x.float(), dy.dtype
            if name == "gelu":
                cdf = 0.5 * torch.erfc(-x * 0.7071067811865476)
                return (dy * (cdf + x * torch.exp(-0.5 * x * x) * 0.3989422804014327)).to(t)
            s = torch.sigmoid(x)
            return (dy * (s * (1 + x * (1 - s)))).to(t)

        return {"lab": lambda: getattr(ops, name + "_backward")(dy, x, "optimized_%s_backward" % name),
                "eager": lambda: torch.autograd.grad(y, xg, dy, retain_graph=True),
                "compile": (compiled(formula), (dy, x))}
    if base in ("cross_entropy", "cross_entropy_backward"):
        n, c = dims
        dtype = stored
        logits, labels = rand(n, c, lo=-8, hi=8, dtype=dtype), torch.randint(0, c, (n,), device="cuda")
        if base == "cross_entropy":
            return {"lab": lambda: ops.cross_entropy_forward(logits, labels, -100, "optimized_cross_entropy"),
                    "eager": lambda: F.cross_entropy(logits, labels),
                    "compile": (compiled(F.cross_entropy), (logits, labels))}
        lg = logits.clone().requires_grad_()
        loss = F.cross_entropy(lg, labels)
        _, lse, count = ops.cross_entropy_forward(logits, labels, -100, "optimized_cross_entropy")
        one = torch.ones((), device="cuda")

        def formula(g, logits, labels, lse):  # fp32, the gradient in the logits' dtype (as PyTorch's)
            p = torch.exp(logits.float() - lse[:, None])
            p[torch.arange(logits.shape[0], device=logits.device), labels] -= 1
            return (p * (g / logits.shape[0])).to(logits.dtype)

        return {"lab": lambda: ops.cross_entropy_backward(one, logits, labels, lse, count, -100,
                                                          "optimized_cross_entropy_backward"),
                "eager": lambda: torch.autograd.grad(loss, lg, retain_graph=True),
                "compile": (compiled(formula), (one, logits, labels, lse))}
    if op == "adamw":
        n = dims[0]
        p, g = rand(n), rand(n, lo=-1e-2, hi=1e-2)
        m, v = torch.zeros_like(p), torch.zeros_like(p)
        steps = iter(range(1, 1 << 30))

        def torch_step(**kw):
            q = p.clone().requires_grad_()
            q.grad = g.clone()
            return torch.optim.AdamW([q], lr=1e-3, **kw).step

        return {"lab": lambda: ops.adamw_(p, g, m, v, next(steps), 1e-3, 0.9, 0.999, 1e-8, 0.01),
                "eager": torch_step(fused=True), "compile": (compiled(torch_step(foreach=True)), ())}
    # attention
    b, h, s, d, causal = dims
    causal = bool(causal)
    strided = op.endswith("_bthd")
    base = op.removesuffix("_bthd").removesuffix("_causal")
    precision = next((p for p in ("bf16", "fp16", "3xtf32") if base.endswith(p)), "fp32")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    if strided:  # views of one (B, T, 3H, D) buffer, transposed: T's stride is 3H x D
        q, k, v = (t.transpose(1, 2) for t in rand(b, s, 3 * h, d, dtype=dtype).split(h, dim=2))
    else:
        q, k, v = (rand(b, h, s, d, dtype=dtype) for _ in range(3))
    sdpa = F.scaled_dot_product_attention
    if "_padded" in op:  # the front end, which pads; its backward through autograd, as SDPA's
        if not op.startswith("attention_backward"):
            return {"lab": lambda: lab.attention(q, k, v, causal, precision),
                    "eager": lambda: sdpa(q, k, v, is_causal=causal)}
        do = rand(b, h, s, d, dtype=dtype)
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        og, ol = sdpa(qg, kg, vg, is_causal=causal), lab.attention(qg, kg, vg, causal, precision)
        return {"lab": lambda: torch.autograd.grad(ol, (qg, kg, vg), do, retain_graph=True),
                "eager": lambda: torch.autograd.grad(og, (qg, kg, vg), do, retain_graph=True)}
    if not op.startswith("attention_backward"):
        return {"lab": lambda: ops.attention_forward(q, k, v, causal, precision),
                "eager": lambda: sdpa(q, k, v, is_causal=causal)}
    o, lse = ops.attention_forward(q, k, v, causal, precision)
    do = rand(b, h, s, d, dtype=dtype)  # the gradient in O's dtype, as autograd hands it
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    og = sdpa(qg, kg, vg, is_causal=causal)
    return {"lab": lambda: ops.attention_backward(do, q, k, v, o, lse, causal, precision),
            "eager": lambda: torch.autograd.grad(og, (qg, kg, vg), do, retain_graph=True)}


def modes_error(modes):
    """Why a --compile-modes list is refused (None: it is not): unknown or repeated modes, or none."""
    unknown = [m for m in modes if m not in COMPILE_MODES]
    if unknown:
        return "--compile-modes: unknown mode(s) %s (from: %s)" % (", ".join(unknown), ", ".join(COMPILE_MODES))
    if not modes:
        return "--compile-modes: no mode"
    if len(set(modes)) != len(modes):
        return "--compile-modes: a mode named twice"
    return None


def fastest_compile(row):
    """The row's compile time is its fastest mode's (the peer's best configuration), the mode named."""
    if row.get("compile_modes_ms"):
        row["compile_mode"] = min(row["compile_modes_ms"], key=row["compile_modes_ms"].get)
        row["compile_ms"] = row["compile_modes_ms"][row["compile_mode"]]


def markdown(rows, modes, device, version, reps):
    """The rows as the READMEs' table; with more than one compile mode, each cell names its fastest."""
    def cell(v, f):
        return f % v if v else "-"

    out = ["Measured by `tools/torch_ops_bench.py` on %s, torch %s: median of %d calls, L2 flushed before each; "
           "the C++ column is the program's own median.\n\n" % (device, version, reps)]
    named = len(modes) > 1
    if named:
        out.append("torch.compile: the fastest of the modes %s, named in its cell.\n\n" %
                   ", ".join("`%s`" % m for m in modes))
    out.append("| op | shape | lab through PyTorch | C++ program | lab / C++ | eager | torch.compile "
               "| eager / lab | compile / lab |\n|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        comp = cell(r.get("compile_ms"), "%.4g ms")
        if named and r.get("compile_mode"):
            comp += " (%s)" % r["compile_mode"]
        out.append("| %s | %s | %s ms | %s ms | %s | %s ms | %s | %s | %s |\n" % (
            r["op"], r["shape"], cell(r["lab_ms"], "%.4g"), cell(r["cpp_ms"], "%.4g"),
            cell(r["lab_over_cpp"], "%.3f"), cell(r.get("eager_ms"), "%.4g"),
            comp, cell(r["eager_over_lab"], "%.2fx"), cell(r["compile_over_lab"], "%.2fx")))
    return "".join(out)


def cpp_median_ms(build, folder, program, shape):
    """The C++ program's median (cold L2) at the shape, from its Google Benchmark JSON; None if absent."""
    path = os.path.join(build, folder, program) if program else ""
    if not os.path.exists(path):
        return None
    out = subprocess.run([path, "--shape", shape, "--no-check", "--benchmark_format=json"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        print("  %s --shape %s failed (%d): %s" % (program, shape, out.returncode, out.stderr.strip()[-300:]),
              file=sys.stderr)
        return None
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            return b["real_time"] * scale[b["time_unit"]]
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated, from: " + ", ".join(OPS))
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the CMake build folder (C++ programs)")
    p.add_argument("--reps", type=int, default=20, help="timed calls a measurement (median)")
    p.add_argument("--quick", action="store_true", help="the first shape of each op only")
    p.add_argument("--compile-modes", default="default",
                   help="torch.compile modes to time, comma-separated (default, reduce-overhead, max-autotune, "
                        "max-autotune-no-cudagraphs); the compile column is the fastest")
    p.add_argument("--kernels", type=int, default=0, metavar="K",
                   help="also profile each implementation (torch.profiler, cold L2) and print its K longest "
                        "kernels, us a call (the JSON keeps them under each row's 'kernels')")
    p.add_argument("--json", help="write the rows as JSON here")
    p.add_argument("--markdown", help="write the table as Markdown here")
    a = p.parse_args()
    ops_wanted = [o for o in a.ops.split(",") if o]
    bad = [o for o in ops_wanted if o not in OPS]
    modes = [m for m in a.compile_modes.split(",") if m]
    why = ("unknown op(s): " + ", ".join(bad) if bad else modes_error(modes) or
           ("--reps below 1" if a.reps < 1 else "--kernels below 0" if a.kernels < 0 else None))
    if why:
        print("torch_ops_bench.py: error: %s" % why, file=sys.stderr)
        return 2
    torch = torch_gpt2.cuda_torch("torch_ops_bench.py")
    lab = torch and import_bridge("torch_ops_bench.py")
    if lab is None:
        return 2
    flush = l2_flush_buffer(torch)
    rows = []
    head = "%-26s %-16s %9s %9s %9s %9s %7s %8s %8s %8s" % (
        "op", "shape", "lab ms", "C++ ms", "eager ms", "comp ms", "host_us", "lab/C++", "eager/lab", "comp/lab")
    print(torch.cuda.get_device_name(0), "| torch", torch.__version__)
    print(head, flush=True)
    for op in ops_wanted:
        folder, program, shapes = OPS[op]
        for shape in shapes[:1] if a.quick else shapes:
            row = {"op": op, "shape": shape, "program": program}
            for i, mode in enumerate(modes):  # the first mode with every implementation, the rest compile alone
                impls = cases(torch, lab, op, shape, mode)
                for name, fn in impls.items():
                    if i > 0 and name != "compile":
                        continue
                    if isinstance(fn, tuple):
                        f, args = fn
                        fn = (lambda f=f, args=args: f(*args))
                    t = time_call(torch, fn, flush, a.reps)
                    if name == "compile":
                        row.setdefault("compile_modes_ms", {})[mode] = t.median_ms
                    else:
                        row[name + "_ms"] = t.median_ms
                    if name == "lab":
                        row["host_us"] = t.host_us
                    if a.kernels:
                        key = name if name != "compile" else "compile " + mode
                        row.setdefault("kernels", {})[key] = kernel_times(torch, fn, flush, a.reps)
                has_compile = "compile" in impls
                del impls
                torch.cuda.empty_cache()
                if not has_compile:  # attention: nothing for the other modes to time
                    break
            fastest_compile(row)
            row["cpp_ms"] = cpp_median_ms(a.build, folder, program, shape)

            def ratio(x, y):
                return x / y if x and y else None

            row["lab_over_cpp"] = ratio(row["lab_ms"], row["cpp_ms"])
            row["eager_over_lab"] = ratio(row.get("eager_ms"), row["lab_ms"])
            row["compile_over_lab"] = ratio(row.get("compile_ms"), row["lab_ms"])
            rows.append(row)
            fmt = lambda v, f="%9.4g": (f % v) if v else "%9s" % "-"  # noqa: E731
            print("%-26s %-16s %s %s %s %s %7.0f %8s %8s %8s" % (
                op, shape, fmt(row["lab_ms"]), fmt(row["cpp_ms"]), fmt(row.get("eager_ms")),
                fmt(row.get("compile_ms")), row["host_us"], fmt(row["lab_over_cpp"], "%8.3f"),
                fmt(row["eager_over_lab"], "%8.2f"), fmt(row["compile_over_lab"], "%8.2f")), flush=True)
            for key, kernels in row.get("kernels", {}).items():
                for kname, us in kernels[:a.kernels]:
                    print("    %-22s %9.1f us  %s" % (key, us, kname[:110]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "reps": a.reps,
                       "compile_modes": modes, "rows": rows}, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(rows, modes, torch.cuda.get_device_name(0), torch.__version__, a.reps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
