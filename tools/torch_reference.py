#!/usr/bin/env python3
"""PyTorch's time for the same operation and shapes as a lab program: the yardstick some targets
name (LayerNorm backward at 1.3x PyTorch eager's torch.autograd.grad, the cross-entropy against
F.cross_entropy). It reads the program's --describe (topic, timed shapes, minimal bytes), builds
the PyTorch equivalent on the GPU in fp32, and times it the lab's way: CUDA events around each
call, the L2 flushed (by reading a buffer twice its size) before every call, the median of
--reps calls after 3 warm-up calls. Backward topics time torch.autograd.grad alone, the graph
built beforehand, as the forward would have left it.

  python3 tools/torch_reference.py build/ch03_kernels/optimized_layernorm_backward [more programs] \\
      [--compile] [--json torch.json]

Prints a table (topic, shape, implementation, ms, GB/s on the lab's byte count) and writes it as
JSON with --json. --compile adds torch.compile (default mode) for forward topics. Exit status 0;
2 with one line for a bad argument, a topic it has no PyTorch equivalent for, or no torch/GPU.
"""
import argparse
import json
import statistics
import subprocess
import sys


def describe(program):
    out = subprocess.run([program, "--describe"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def builders(torch):
    """topic -> function(shape) returning a callable that runs the operation once."""
    F = torch.nn.functional
    dev = "cuda"

    def rand(*shape, lo=-1.0, hi=1.0, grad=False):
        t = torch.empty(*shape, device=dev).uniform_(lo, hi)
        return t.requires_grad_(grad)

    def layernorm(s):
        n, d = s
        x, w, b = rand(n, d, lo=-2, hi=4), rand(d, lo=0.5, hi=1.5), rand(d, lo=-0.5, hi=0.5)
        return lambda: F.layer_norm(x, (d,), w, b, 1e-5)

    def layernorm_backward(s):
        n, d = s
        x, w, b = rand(n, d, lo=-2, hi=4, grad=True), rand(d, lo=0.5, hi=1.5, grad=True), rand(d, grad=True)
        y, dy = F.layer_norm(x, (d,), w, b, 1e-5), rand(n, d)
        return lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True)

    def weighted_sum(s):
        n, d = s
        x, w = rand(n, d), rand(d)
        return lambda: x @ w

    def weighted_sum_backward(s):
        n, d = s
        x, w = rand(n, d, grad=True), rand(d, grad=True)
        y, dy = x @ w, rand(n)
        return lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True)

    def unary(fn):
        def forward(s):
            x = rand(s[0], lo=-6, hi=6)
            return lambda: fn(x)

        def backward(s):
            x = rand(s[0], lo=-6, hi=6, grad=True)
            y, dy = fn(x), rand(s[0])
            return lambda: torch.autograd.grad(y, x, dy, retain_graph=True)

        return forward, backward

    gelu, gelu_backward = unary(F.gelu)
    swish, swish_backward = unary(F.silu)

    def cross_entropy(s):
        n, c = s
        logits, labels = rand(n, c, lo=-8, hi=8), torch.randint(0, c, (n,), device=dev)
        return lambda: F.cross_entropy(logits, labels)

    def cross_entropy_backward(s):
        n, c = s
        logits, labels = rand(n, c, lo=-8, hi=8, grad=True), torch.randint(0, c, (n,), device=dev)
        loss = F.cross_entropy(logits, labels)
        return lambda: torch.autograd.grad(loss, logits, retain_graph=True)

    def mse(s):
        p, t = rand(s[0]), rand(s[0])
        return lambda: F.mse_loss(p, t)

    def mse_backward(s):
        p, t = rand(s[0], grad=True), rand(s[0])
        loss = F.mse_loss(p, t)
        return lambda: torch.autograd.grad(loss, p, retain_graph=True)

    return {k: v for k, v in locals().items() if callable(v) and k not in ("rand", "unary")}


def time_ms(torch, fn, flush, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        flush.sum()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(start.elapsed_time(stop))
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(prog="torch_reference", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("programs", nargs="+", help="lab programs whose topic and shapes to time in PyTorch")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per shape (default 20)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile for forward topics")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    if a.reps < 1:
        print("torch_reference: error: --reps must be at least 1", file=sys.stderr)
        return 2
    try:
        descs = [describe(p) for p in a.programs]
    except (OSError, subprocess.CalledProcessError, ValueError) as err:
        print("torch_reference: error: %s" % err, file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("torch_reference: error: PyTorch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_reference: error: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    make = builders(torch)
    for d in descs:
        if d["topic"] not in make:
            print("torch_reference: error: no PyTorch equivalent for topic %s (known: %s)"
                  % (d["topic"], ", ".join(sorted(make))), file=sys.stderr)
            return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32, as the lab's programs
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(max(2 * l2, 64 << 20) // 4, device="cuda")
    results = []
    print("%-24s %-14s %-16s %10s %9s" % ("topic", "shape", "implementation", "ms", "GB/s"))
    for d in descs:
        for s in d["sweep"]:
            shape = [int(x) for x in s["shape"].split("x")]
            impls = [("torch eager", make[d["topic"]](shape))]
            if a.compile and not d["topic"].endswith("_backward"):
                impls.append(("torch.compile", torch.compile(make[d["topic"]](shape))))
            for name, fn in impls:
                try:
                    ms = time_ms(torch, fn, flush, a.reps)
                except torch.cuda.OutOfMemoryError:
                    print("%-24s %-14s %-16s %10s" % (d["topic"], s["shape"], name, "OOM"))
                    continue
                gbs = s["bytes"] / (ms * 1e-3) / 1e9
                print("%-24s %-14s %-16s %10.4f %9.0f" % (d["topic"], s["shape"], name, ms, gbs))
                results.append({"topic": d["topic"], "shape": s["shape"], "implementation": name, "ms": ms,
                                "gbps": gbs, "bytes": s["bytes"]})
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tool": "cuda-perf-lab torch_reference", "device": torch.cuda.get_device_name(0),
                       "torch": torch.__version__, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
