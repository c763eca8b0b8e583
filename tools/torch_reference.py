#!/usr/bin/env python3
"""PyTorch's time for the same operation and shapes as a lab program: the yardstick some targets
name (LayerNorm backward at 1.3x PyTorch eager's torch.autograd.grad, the cross-entropy against
F.cross_entropy, the fused attention against scaled_dot_product_attention in fp32 and bf16). It reads the program's --describe (topic, timed shapes, minimal bytes), builds
the PyTorch equivalent on the GPU in fp32, and times it the lab's way: CUDA events around each
call, the L2 flushed (by reading a buffer twice its size) before every call, the median of
--reps calls after 3 warm-up calls. Backward topics time torch.autograd.grad alone, the graph
built beforehand, as the forward would have left it.

  python3 tools/torch_reference.py build/ch03_kernels/optimized_layernorm_backward [more programs] \\
      [--compile] [--json torch.json]

Prints a table (topic, shape, implementation, ms, GB/s and TFLOP/s on the lab's counts) and writes it as
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

    # Attention (batch x heads x seq x d x causal): the textbook formula as eager mode runs it, and
    # scaled_dot_product_attention (PyTorch picks its fused kernel) in fp32 and with bf16 inputs:
    # the yardsticks of the fused variants.
    def attention_inputs(s, dtype, grad):
        b, h, n, d, _ = s
        return [rand(b, h, n, d).to(dtype).requires_grad_(grad) for _ in range(3)]

    def naive(q, k, v, causal):
        sc = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
        if causal:
            mask = torch.ones(sc.shape[-2:], dtype=torch.bool, device=dev).triu(1)
            sc = sc.masked_fill(mask, float("-inf"))
        return torch.softmax(sc, dim=-1) @ v

    def sdpa(q, k, v, causal):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def attention(s):
        causal = bool(s[4])
        out = {}
        for name, fn, dtype in (("torch eager", naive, torch.float32), ("SDPA fp32", sdpa, torch.float32),
                                ("SDPA bf16", sdpa, torch.bfloat16)):
            q, k, v = attention_inputs(s, dtype, False)
            out[name] = (lambda fn=fn, q=q, k=k, v=v: fn(q, k, v, causal))
        return out

    def attention_backward(s):
        causal = bool(s[4])
        out = {}
        for name, fn, dtype in (("torch eager", naive, torch.float32), ("SDPA fp32", sdpa, torch.float32),
                                ("SDPA bf16", sdpa, torch.bfloat16)):
            q, k, v = attention_inputs(s, dtype, True)
            o = fn(q, k, v, causal)
            do = torch.empty_like(o).uniform_(-1, 1)
            out[name] = (lambda o=o, q=q, k=k, v=v, do=do: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
        return out

    return {k: v for k, v in locals().items()
            if callable(v) and k not in ("rand", "unary", "attention_inputs", "naive", "sdpa")}


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
    print("%-24s %-18s %-16s %10s %9s %9s" % ("topic", "shape", "implementation", "ms", "GB/s", "TFLOP/s"))
    for d in descs:
        for s in d["sweep"]:
            shape = [int(x) for x in s["shape"].split("x")]
            made = make[d["topic"]](shape)  # one callable (eager), or several by name
            impls = list(made.items()) if isinstance(made, dict) else [("torch eager", made)]
            if a.compile and not d["topic"].endswith("_backward"):
                first = make[d["topic"]](shape)
                impls.append(("torch.compile", torch.compile(first["torch eager"] if isinstance(first, dict) else first)))
            for name, fn in impls:
                try:
                    ms = time_ms(torch, fn, flush, a.reps)
                except torch.cuda.OutOfMemoryError:
                    print("%-24s %-18s %-16s %10s" % (d["topic"], s["shape"], name, "OOM"))
                    continue
                gbs = s["bytes"] / (ms * 1e-3) / 1e9
                tflops = s["flops"] / (ms * 1e-3) / 1e12
                print("%-24s %-18s %-16s %10.4f %9.0f %9.2f" % (d["topic"], s["shape"], name, ms, gbs, tflops))
                results.append({"topic": d["topic"], "shape": s["shape"], "implementation": name, "ms": ms,
                                "gbps": gbs, "tflops": tflops, "bytes": s["bytes"], "flops": s["flops"]})
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tool": "cuda-perf-lab torch_reference", "device": torch.cuda.get_device_name(0),
                       "torch": torch.__version__, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
