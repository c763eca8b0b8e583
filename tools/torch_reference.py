#!/usr/bin/env python3
"""PyTorch's time for the same operation and shapes as a lab program: the yardstick some targets
name (LayerNorm backward at 1.3x PyTorch eager's torch.autograd.grad, the cross-entropy against
F.cross_entropy, the fused attention against scaled_dot_product_attention in fp32 and bf16). It
reads the program's --describe (topic, timed shapes, minimal bytes), builds the PyTorch
equivalent on the GPU in fp32, and times it the lab's way (tools/torch_timing.py): CUDA events
around each call, the L2 flushed before every call and the call's CPU work queued behind a spin of
the GPU, the median of --reps calls after 3 warm-up calls. Backward topics time torch.autograd.grad alone, the graph built beforehand, as
the forward would have left it.

  python3 tools/torch_reference.py build/ch03_kernels/optimized_layernorm_backward [more programs] \\
      [--compile] [--json torch.json] [--shape S] [--shape S ...]
  python3 tools/torch_reference.py build/ch04_compile_vs_fused/baseline_gpt2_step --compile --reps 5 \\
      --shape 12x768x12x1024x4x10000x3      # the GPT-2 step (tools/torch_gpt2.py's model), peak memory too

Prints a table (topic, shape, implementation, ms, GB/s and TFLOP/s on the lab's counts) and writes it as
JSON with --json, each row with its median CPU time a call (host_us: Python, the dispatcher, the
launches, which the GPU time above leaves out). A topic with several PyTorch forms times each by its
name: the weighted sum as x @ w and (w * x).sum(-1), chapter 2's square as x * x, x ** 2 and
torch.square, its reduction as torch.mean. --compile adds torch.compile (default mode) for forward topics. For the GPT-2 step,
--modes names the configurations to time: eager, default, reduce-overhead (CUDA graphs) and
max-autotune (CUDA graphs and tuned products); each row records its first call's seconds (the
compile), and a line per shape names the fastest, the one a speedup is to be measured against:

  python3 tools/torch_reference.py build/ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_grads --bf16 \\
      --modes eager,reduce-overhead,max-autotune --reps 10 --shape 12x768x12x1024x4x10000x3

Set against the lab (no GPU needed): --from a saved --json run (repeatable: runs of one session
split over its GPUs) and --lab a compare --json run of the same session give, for every lab variant at a shape PyTorch was timed at, its time and
PyTorch's time over it for each PyTorch implementation (above 1: the lab is faster), as text, and
as a Markdown table with --markdown FILE (for tools/update_readme_results.py --section):

  python3 tools/torch_reference.py --from torch.json --lab compare.json --markdown vs_torch.md

For the GPT-2 step, --lab also takes the CSV of demo_gpt2_report (--csv) of the same session: each of
its implementations at each phase of a configuration PyTorch timed (the report's model size and
context, paired with the PyTorch shapes whose vocabulary gives its parameter count: a PyTorch run of
several vocabularies serves a report of any one of them, and a configuration PyTorch timed only at
another is refused; the CSV does not record its batch, so run the report with the batch of the
PyTorch shapes):

  python3 tools/torch_reference.py --from torch_gpt2.json --lab report.csv --markdown vs_torch.md

Exit status 0; 2 with one line for a bad argument, a topic it has no PyTorch equivalent for, no
torch/GPU, or a file it cannot read.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch_gpt2  # the GPT-2 model in PyTorch (tools/), and cuda_torch
from torch_timing import compile_for_shape, l2_flush_buffer, time_call  # cold-L2 timing, as the lab's programs time


def describe(program):
    out = subprocess.run([program, "--describe"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def builders(torch, compiled=False):
    """topic -> function(shape) returning a callable that runs the operation once (or several, by
    name). compiled (--compile): the attention's backward also through torch.compile's graph of the
    eager formula (the forward topics get theirs in main)."""
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

    # The weighted sum in both of the users' forms (seed 000): the product PyTorch sends to cuBLAS
    # (a matrix-vector product) and the manual element-wise product and sum (a temporary n x d).
    def weighted_sum(s):
        n, d = s
        x, w = rand(n, d), rand(d)
        return {"x @ w": lambda: x @ w, "(w * x).sum(-1)": lambda: (w * x).sum(-1)}

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

    # Chapter 2's reduction (the mean of n floats) and square (seed 004's three forms of x^2).
    def reduction(s):
        x = rand(s[0])
        return {"torch.mean": lambda: torch.mean(x)}

    def square(s):
        x = rand(s[0])
        return {"x * x": lambda: x * x, "x ** 2": lambda: x ** 2, "torch.square": lambda: torch.square(x)}

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
        forms = [("torch eager", naive, torch.float32), ("SDPA fp32", sdpa, torch.float32),
                 ("SDPA bf16", sdpa, torch.bfloat16)]
        if compiled:  # the forward traced and compiled with its backward (AOTAutograd): the grad runs that
            # Each timed call takes the grad of the same graph again (retain_graph), which a compiled
            # backward that donates its saved buffers to its outputs (PyTorch's default) refuses.
            torch._functorch.config.donated_buffer = False
            forms.append(("torch.compile", torch.compile(naive), torch.float32))
        for name, fn, dtype in forms:
            q, k, v = attention_inputs(s, dtype, True)
            o = fn(q, k, v, causal)
            do = torch.empty_like(o).uniform_(-1, 1)
            out[name] = (lambda o=o, q=q, k=k, v=v, do=do: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
        return out

    # The GPT-2 training step: timed by time_gpt2 (one model an implementation and configuration).
    def gpt2_step(s):
        raise AssertionError("gpt2_step shapes are timed by time_gpt2")
    return {k: v for k, v in locals().items()
            if callable(v) and k not in ("rand", "unary", "attention_inputs", "naive", "sdpa")}


def time_gpt2(torch, shapes, modes, flush, reps, bf16=False):
    """The GPT-2 training step (layers x d x heads x context x batch x vocab x phase): the lab's model
    in PyTorch (tools/torch_gpt2.py), eager and with torch.compile(model) in each of `modes` (MODES:
    "default", "reduce-overhead" with CUDA graphs, "max-autotune" with CUDA graphs and Triton's tuned
    matrix products); the optimizer stays outside the compiled model, torch.optim.AdamW with lr 1e-3
    and weight decay 0.01 (fused in bf16, as a user who wants speed runs it).
    Phase 1 is the loss under no_grad, 2 adds backward() (the gradients set to None first, as
    zero_grad does), 3 adds AdamW's step. One model an implementation and configuration, its phases
    timed in increasing order (so torch.compile compiles the inference graph and the training graph
    once each), then freed; peak memory is counted from before the model was built, as the lab counts
    its parameters, and over the phases timed so far (PeakSince): a phase's CUDA graphs and their
    memory pool are made at a phase's first call and kept by the model, so that phase 3 after phase 2
    allocates little of its own (a peak reset between them read 1096 MiB at small, context 1024,
    where phase 3 alone reads 2862). shapes: (the shape's text, its seven numbers). Yields (the shape's text,
    implementation, ms or None for OOM, peak MiB or None, the first call's seconds: the compile's).
    bf16: mixed precision as the issue's
    yardstick runs it: the forward under torch.autocast(bfloat16), the attention by
    scaled_dot_product_attention, AdamW with fused=True (the implementations named "... bf16")."""
    F = torch.nn.functional
    sdpa = {"attention": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)}

    def build(layers, d, heads, context, batch, vocab, mode):
        model = torch_gpt2.build(torch, layers, d, heads, vocab, ops=sdpa if bf16 else None)
        fwd = model if mode == "eager" else torch.compile(model, mode=None if mode == "default" else mode)
        return {"fwd": fwd, "graphs": mode in ("reduce-overhead", "max-autotune"),
                "opt": torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=bf16 or None),
                "tokens": torch.randint(0, vocab, (batch, context), device="cuda"),
                "targets": torch.randint(0, vocab, (batch, context), device="cuda")}

    configs = {}
    for text, shape in shapes:
        configs.setdefault(tuple(shape[:6]), []).append((shape[6], text))
    for config, phases in configs.items():
        for mode in modes:
            name = MODES[mode] + (" bf16" if bf16 else "")
            torch.cuda.empty_cache()
            peak = PeakSince(torch)
            state = step = None
            for phase, label in sorted(phases):
                try:
                    if state is None:
                        if mode != "eager":  # its first call compiles: minutes for large models
                            print("  (%s: torch.compile %s compiles at its first call of each phase)"
                                  % (label, mode), file=sys.stderr, flush=True)
                        state = build(*config, mode)

                    def step(phase=phase, st=state):
                        if st["graphs"]:  # a new iteration: the graphs' outputs of the last may be reused
                            torch.compiler.cudagraph_mark_step_begin()
                        if phase == 1:
                            with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=bf16):
                                return st["fwd"](st["tokens"], st["targets"])
                        st["opt"].zero_grad(set_to_none=True)
                        with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
                            loss = st["fwd"](st["tokens"], st["targets"])
                        loss.backward()
                        if phase == 3:
                            st["opt"].step()

                    t0 = time.perf_counter()
                    step()
                    torch.cuda.synchronize()
                    first_s = time.perf_counter() - t0
                    ms = time_ms(torch, step, flush, reps)
                    yield label, name, ms, peak.mib(), first_s
                except torch.cuda.OutOfMemoryError:
                    state = step = None  # what they held is freed; a later phase starts afresh
                    release_compiled(torch)
                    peak = PeakSince(torch)
                    yield label, name, None, None, None
            state = step = None
            release_compiled(torch)


def release_compiled(torch):
    """Frees what a compiled model leaves behind once the model is dropped: torch.compile's caches and
    the CUDA graphs of reduce-overhead and max-autotune, whose memory pool outlives the model (a
    configuration timed after another in the same process otherwise starts with the earlier one's
    pool allocated, and reuses it: small at vocabulary 50304 timed after xl read a peak of 652 MiB,
    where small at vocabulary 10000, alone, reads 2862)."""
    import gc
    torch._dynamo.reset()
    try:
        from torch._inductor import cudagraph_trees
        cudagraph_trees.reset_cudagraph_trees()
    except (ImportError, AttributeError):
        pass
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


class PeakSince:
    """The most device memory allocated since it was made, in MiB above what was allocated then:
    torch's peak statistic reset once, at the start (a model about to be built), and read as often
    as wanted, so that what one phase allocates for the next (a compiled model's CUDA graphs and
    their pool) counts for the phases after it too."""

    def __init__(self, torch):
        self.torch = torch
        torch.cuda.reset_peak_memory_stats()
        self.base = torch.cuda.memory_allocated()
        if self.base > 256 * 2**20:  # what an earlier model left allocated: this peak may read low
            print("  (note: %.0f MiB still allocated before this model; its peak counts from there)"
                  % (self.base / 2**20), file=sys.stderr, flush=True)

    def mib(self):
        return (self.torch.cuda.max_memory_allocated() - self.base) / 2**20


# torch.compile's modes as time_gpt2 names them ("eager": no torch.compile).
MODES = {"eager": "torch eager", "default": "torch.compile", "reduce-overhead": "torch.compile reduce-overhead",
         "max-autotune": "torch.compile max-autotune"}


def time_ms(torch, fn, flush, reps):
    return time_call(torch, fn, flush, reps).median_ms


def lab_medians(run):
    """(topic, shape, program) -> median ms, from a compare --json run."""
    out = {}
    for r in run["rows"]:
        if r.get("status", "OK") != "OK":
            continue
        key = (r["topic"], r["shape"])
        if r.get("variant_median_s"):
            out[key + (r["variant"],)] = r["variant_median_s"] * 1e3
        if r.get("against_median_s"):
            out[key + (r["against"],)] = r["against_median_s"] * 1e3
    return out


OLD_SPIN_US = 400_000 / 1980  # the fixed spin of the runs before spin_us was recorded


# demo_gpt2_report's model sizes (gpt2_model.hpp's kSizes, and the report's "tiny"): layers, d, heads.
GPT2_SIZES = {"small": (12, 768, 12), "medium": (24, 1024, 16), "large": (36, 1280, 20), "xl": (48, 1600, 25),
              "2.7B": (32, 2560, 32), "tiny": (2, 64, 4)}
GPT2_POSITIONS = 1024  # rows of the position embedding (gpt2_model.hpp's kPositions)
GPT2_PHASES = {1: "forward", 2: "fwd_bwd", 3: "full_step"}  # the report's column prefixes by phase


def gpt2_params(layers, d, vocab):
    """The parameter count as the report writes it (gpt2_model.cpp's param_count: PyTorch's)."""
    return 2 * vocab * d + GPT2_POSITIONS * d + layers * (12 * d * d + 13 * d) + 2 * d


def report_as_lab_run(path, torch_run):
    """demo_gpt2_report's --csv as compare --json's run: a row for each implementation and phase of a
    configuration, at each gpt2_step shape of the PyTorch run with that configuration's layers, width,
    heads, context and parameter count (the vocabulary); OOM and N/A cells are left out. A PyTorch run
    of several vocabularies pairs each configuration with the shapes of its own; a configuration that
    PyTorch timed only at other vocabularies is refused (the report's --vocab was another)."""
    import csv

    with open(path, newline="") as f:
        table = list(csv.DictReader(f))
    if not table or "model_size" not in table[0] or "context_length" not in table[0]:
        raise ValueError("%s was not written by demo_gpt2_report --csv (no model_size, context_length)" % path)
    names = [k[len("full_step_"):-len("_status")] for k in table[0]
             if k.startswith("full_step_") and k.endswith("_status")]
    rows = []
    paired, other_vocabulary = set(), {}  # CSV lines paired; line -> a PyTorch shape of another vocabulary
    shapes = sorted({r["shape"] for r in torch_run["results"] if r.get("topic") == "gpt2_step"})
    for shape in shapes:
        layers, d, heads, context, _, vocab, phase = (int(x) for x in shape.split("x"))
        for line, r in enumerate(table, 2):
            if GPT2_SIZES.get(r["model_size"]) != (layers, d, heads) or int(r["context_length"]) != context:
                continue
            if int(r["num_params"]) != gpt2_params(layers, d, vocab):
                other_vocabulary.setdefault(line, (r["num_params"], shape, gpt2_params(layers, d, vocab)))
                continue
            paired.add(line)
            for n in names:
                col = "%s_%s" % (GPT2_PHASES[phase], n)
                if r.get(col + "_status") == "ok" and r.get(col + "_ms"):
                    rows.append({"topic": "gpt2_step", "shape": shape, "variant": "gpt2_step_" + n,
                                 "variant_median_s": float(r[col + "_ms"]) * 1e-3, "status": "OK"})
    for line in sorted(set(other_vocabulary) - paired):
        count, shape, theirs = other_vocabulary[line]
        raise ValueError("%s line %d: %s parameters, where the PyTorch shape %s has %d (another vocabulary)"
                         % (path, line, count, shape, theirs))
    return {"tool": "demo_gpt2_report", "file": os.path.basename(path), "rows": rows}


def read_torch_runs(paths):
    """--from's files as one run: their results in order, where each was written by torch_reference
    --json with the same PyTorch on the same kind of GPU (runs split over the GPUs of one machine)."""
    run = None
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        if not isinstance(r, dict) or "results" not in r:
            raise ValueError("%s was not written by torch_reference --json" % path)
        if run is None:
            run = dict(r, results=list(r["results"]))
        elif (r.get("device"), r.get("torch")) != (run.get("device"), run.get("torch")):
            raise ValueError("%s: PyTorch %s on %s, where %s has PyTorch %s on %s" % (
                path, r.get("torch"), r.get("device"), paths[0], run.get("torch"), run.get("device")))
        else:
            run["results"] += r["results"]
    return run


def read_lab_run(path, torch_run):
    """--lab's file: a compare --json run, or a demo_gpt2_report --csv (report_as_lab_run)."""
    if path.endswith(".csv"):
        return report_as_lab_run(path, torch_run)
    with open(path) as f:
        lab_run = json.load(f)
    if not isinstance(lab_run, dict) or "rows" not in lab_run:
        raise ValueError("%s was not written by compare --json" % path)
    return lab_run


def against_lab(torch_run, lab_run):
    """Rows (topic, shape, program, lab ms, [(implementation, torch ms, torch ms / lab ms, torch host
    us a call or None, whether that host time outran the spin before the call)])."""
    lab = lab_medians(lab_run)
    torch_ms = {}
    for r in torch_run["results"]:
        if r.get("ms") is None:  # OOM
            continue
        # A call whose CPU time outran the spin before it (0.2 ms before spin_us was recorded) may
        # have counted waiting for its own launches as GPU time.
        host = r.get("host_us")
        outran = host is not None and host > r.get("spin_us", OLD_SPIN_US)
        torch_ms.setdefault((r["topic"], r["shape"]), []).append((r["implementation"], r["ms"], host, outran))
    rows = []
    for (topic, shape), impls in torch_ms.items():
        for (t, sh, program), ms in sorted(lab.items()):
            if (t, sh) == (topic, shape):
                rows.append((topic, shape, program, ms,
                             [(name, tms, tms / ms, host, outran) for name, tms, host, outran in impls]))
    return rows


def render_against(torch_run, lab_run, markdown):
    """The rows of against_lab as a text table, or as Markdown headed by a "Measured by" line."""
    rows = against_lab(torch_run, lab_run)
    if not rows:
        raise ValueError("no shape is in both runs (the PyTorch run and the compare run timed different shapes)")
    names = []
    for row in rows:
        for name, *_ in row[4]:
            if name not in names:
                names.append(name)
    # A run that recorded each call's CPU time (host_us) shows it beside the GPU time.
    hosts = any(host is not None for row in rows for _, _, _, host, _ in row[4])
    head = ["topic", "shape", "lab variant", "lab ms"] + [
        "%s ms (ratio%s)" % (n, "; CPU us a call" if hosts else "") for n in names]
    lines = []
    for topic, shape, program, ms, impls in rows:
        by = {n: (tms, ratio, host, outran) for n, tms, ratio, host, outran in impls}

        def cell(n):
            if n not in by:
                return "-"
            tms, ratio, host, outran = by[n]
            if host is None:
                return "%.4g (%.2fx%s)" % (tms, ratio, "; -" if hosts else "")
            return "%.4g (%.2fx; %.0f%s)" % (tms, ratio, host, "*" if outran else "")

        cells = [topic, shape, "`%s`" % program if markdown else program, "%.4g" % ms]
        cells += [cell(n) for n in names]
        lines.append(cells)
    if not markdown:
        widths = [max(len(c) for c in col) for col in zip(head, *lines)]
        return "".join("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() + "\n"
                       for cells in [head] + lines)
    if lab_run.get("tool") == "demo_gpt2_report":
        lab = "`demo_gpt2_report` (`%s`)" % lab_run["file"]
    else:
        lab = "`compare` (%s, %s)" % (lab_run.get("date", "?"),
                                      "commit " + lab_run["git_commit"] if lab_run.get("git_commit") else "no commit")
    out = ["Measured by `torch_reference` (PyTorch %s on %s) and %s, set side by side; "
           "ratio = PyTorch's time / the lab's (above 1: the lab is faster)."
           % (torch_run.get("torch", "?"), torch_run.get("device", "?"), lab), ""]
    out.append("| " + " | ".join(head) + " |")
    out.append("| " + " | ".join(["---"] * 3 + ["---:"] * (len(head) - 3)) + " |")
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    if any(outran for row in rows for *_, outran in row[4]):
        out += ["", "\\* The call's CPU time outran the GPU's spin before it, so its GPU time may include "
                "waiting for its own launches: PyTorch's time there is an upper bound, and the ratio "
                "leans to the lab."]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(prog="torch_reference", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("programs", nargs="*", help="lab programs whose topic and shapes to time in PyTorch")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per shape (default 20)")
    ap.add_argument("--shape", action="append", metavar="S",
                    help="time this shape (e.g. 12x768x12x1024x4x10000x3) instead of the program's sweep; repeatable")
    ap.add_argument("--compile", action="store_true",
                    help="also time torch.compile: of the eager callable for forward topics, and of the eager "
                         "attention formula with its backward for attention_backward")
    ap.add_argument("--modes", default=None, metavar="M,M",
                    help="gpt2_step: the configurations to time, of %s (default: eager, and default with "
                         "--compile); every row names its mode, and a line per shape names the fastest"
                         % ", ".join(MODES))
    ap.add_argument("--bf16", action="store_true",
                    help="gpt2_step: mixed precision (autocast bf16, SDPA attention, fused AdamW), as issue #16 measures")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--from", dest="saved", metavar="TORCH.json", action="append",
                    help="a saved --json run instead of timing (no GPU); repeatable: runs of one session on "
                         "one kind of GPU, side by side (one GPU each), as one")
    ap.add_argument("--lab", metavar="COMPARE.json", help="a compare --json run to set against PyTorch's times "
                    "(for gpt2_step, or a demo_gpt2_report --csv of the same session)")
    ap.add_argument("--markdown", metavar="FILE", help="with --from and --lab: also write the table as Markdown")
    a = ap.parse_args()
    if a.saved or a.lab or a.markdown:
        if not (a.saved and a.lab) or a.programs:
            print("torch_reference: error: --from TORCH.json and --lab COMPARE.json go together, without programs"
                  " (--markdown needs both)", file=sys.stderr)
            return 2
        try:
            torch_run = read_torch_runs(a.saved)
            lab_run = read_lab_run(a.lab, torch_run)
            text = render_against(torch_run, lab_run, False)
            if a.markdown:
                with open(a.markdown, "w") as f:
                    f.write(render_against(torch_run, lab_run, True))
        except (OSError, ValueError, KeyError) as err:
            print("torch_reference: error: %s" % err, file=sys.stderr)
            return 2
        print(text, end="")
        return 0
    if not a.programs:
        print("torch_reference: error: name at least one lab program (or --from and --lab)", file=sys.stderr)
        return 2
    modes = ["eager", "default"] if a.compile else ["eager"]
    if a.modes is not None:
        modes = [m.strip() for m in a.modes.split(",") if m.strip()]
        unknown = [m for m in modes if m not in MODES]
        if unknown or not modes:
            print("torch_reference: error: --modes takes a comma-separated list of %s, not %r"
                  % (", ".join(MODES), a.modes), file=sys.stderr)
            return 2
    if a.reps < 1:
        print("torch_reference: error: --reps must be at least 1", file=sys.stderr)
        return 2
    try:
        descs = [describe(p) for p in a.programs]
    except (OSError, subprocess.CalledProcessError, ValueError) as err:
        print("torch_reference: error: %s" % err, file=sys.stderr)
        return 2
    torch = torch_gpt2.cuda_torch("torch_reference")
    if torch is None:
        return 2
    make = builders(torch, compiled=a.compile)
    for d in descs:
        if d["topic"] not in make:
            print("torch_reference: error: no PyTorch equivalent for topic %s (known: %s)"
                  % (d["topic"], ", ".join(sorted(make))), file=sys.stderr)
            return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32, as the lab's programs
    flush = l2_flush_buffer(torch)
    results = []

    def save():
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"tool": "cuda-perf-lab torch_reference", "device": torch.cuda.get_device_name(0),
                           "torch": torch.__version__, "results": results}, f, indent=2)

    def report(topic, s, name, ms, peak, first_s=None, host_us=None, spin_us=None):
        """One measured row: printed (flushed) and saved as it comes, so a run cut short keeps it."""
        if ms is None:
            print("%-24s %-18s %-16s %10s" % (topic, s["shape"], name, "OOM"), flush=True)
            results.append({"topic": topic, "shape": s["shape"], "implementation": name, "ms": None,
                            "status": "OOM"})
        else:
            gbs = s["bytes"] / (ms * 1e-3) / 1e9 if s["bytes"] else None
            tflops = s["flops"] / (ms * 1e-3) / 1e12 if s["flops"] else None
            print("%-24s %-18s %-16s %10.4f %9s %9s%s" % (topic, s["shape"], name, ms,
                  "%.0f" % gbs if gbs else "-", "%.2f" % tflops if tflops else "-",
                  "  peak %.0f MiB" % peak if peak is not None else ""), flush=True)
            results.append({"topic": topic, "shape": s["shape"], "implementation": name, "ms": ms,
                            "gbps": gbs, "tflops": tflops, "bytes": s["bytes"], "flops": s["flops"],
                            "peak_mib": peak, "status": "OK"})
            if first_s is not None:
                results[-1]["first_call_s"] = first_s
            if host_us is not None:  # the call's CPU time: Python, the dispatcher, the launches
                results[-1]["host_us"] = host_us
                results[-1]["spin_us"] = spin_us  # the GPU's spin before each call (torch_timing)
        save()

    print("%-24s %-18s %-16s %10s %9s %9s" % ("topic", "shape", "implementation", "ms", "GB/s", "TFLOP/s"),
          flush=True)
    for d in descs:
        sweep = d["sweep"]
        if a.shape:  # the work of a shape not in the sweep is unknown here: no GB/s or TFLOP/s
            known = {s["shape"]: s for s in d["sweep"]}
            sweep = [known.get(x, {"shape": x, "bytes": None, "flops": None}) for x in a.shape]
        if d["topic"] == "gpt2_step":
            by_shape = {s["shape"]: s for s in sweep}
            shapes = [(s["shape"], [int(x) for x in s["shape"].split("x")]) for s in sweep]
            for label, name, ms, peak, first_s in time_gpt2(torch, shapes, modes, flush, a.reps, a.bf16):
                report(d["topic"], by_shape[label], name, ms, peak, first_s)
            for label, _ in shapes:
                timed = [r for r in results if r["shape"] == label and r.get("ms") is not None]
                if timed:
                    best = min(timed, key=lambda r: r["ms"])
                    print("  fastest PyTorch at %s: %s, %.4f ms" % (label, best["implementation"], best["ms"]),
                          flush=True)
            continue
        for s in sweep:
            shape = [int(x) for x in s["shape"].split("x")]
            made = make[d["topic"]](shape)  # one callable (eager), or several by name
            impls = list(made.items()) if isinstance(made, dict) else [("torch eager", made)]
            if a.compile and not d["topic"].endswith("_backward"):
                # Of the topic's several forms, the first (eager's, or x * x of the squares),
                # compiled for this shape alone (torch_timing.compile_for_shape).
                first = make[d["topic"]](shape)
                if isinstance(first, dict):
                    first = first["torch eager"] if "torch eager" in first else next(iter(first.values()))
                impls.append(("torch.compile", compile_for_shape(torch, first)))
            for name, fn in impls:
                try:
                    t = time_call(torch, fn, flush, a.reps)
                    ms, host_us, spin_us = t.median_ms, t.host_us, t.spin_us
                except torch.cuda.OutOfMemoryError:
                    ms, host_us, spin_us = None, None, None
                report(d["topic"], s, name, ms, None, host_us=host_us, spin_us=spin_us)
            torch.cuda.empty_cache()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
