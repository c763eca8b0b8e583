#!/usr/bin/env python3
"""The drop-in: the lab's GPT-2 model in PyTorch (tools/torch_gpt2.py) with the lab's LayerNorm,
fused attention and cross-entropy swapped in (python/, cuda_perf_lab), trained for --steps steps
beside the unmodified model, from the same weights on the same batches; their losses compared,
and the training step of each timed, eager and under torch.compile.

  python3 tools/torch_gpt2_lab.py [--config 12x768x12x1024x4x10000] [--steps 50] [--precision fp32|bf16]
      [--attention 3xtf32|fp32] [--compile-mode reduce-overhead] [--no-compile] [--json out.json]
      [--markdown out.md]

config: layers x d x heads x context x batch x vocab (default: GPT-2 small at context 1024,
batch 4, vocabulary 10000: the transformer issue's shapes). The corpus is fixed and synthetic (a
seeded Markov chain over the vocabulary: each token is followed by its successor under a fixed
permutation 90% of the time), so that the loss falls over the steps and a wrong gradient shows.
AdamW is torch.optim.AdamW (lr 3e-4, PyTorch's other defaults) for every model, and the lab's
model runs once more with the lab's FlatAdamW (the same arithmetic over one flat buffer: one
launch a step) in its place.

The loss check. Two correct fp32 implementations do not give the same losses: their roundings
differ, and training carries the difference forward. Its size is measured in the same run: the
unmodified model is trained a second time with its attention computed by PyTorch's
scaled_dot_product_attention (another correct fp32 order of the same sums), and compiled (below). The
lab's model passes when, at every step, its loss is within 4 times the largest difference of those
PyTorch runs from the eager one (and at least 2^-20 of the loss: the floor where PyTorch's runs agree
to the last bits).

--precision bf16 trains every model under torch.autocast(dtype=bfloat16), as a mixed-precision
user does: the weights and the residual stream float32, the matrix products bf16. The lab's model
then also takes the lab's GELU (on the bf16 activations), its attention in bf16 (q, k, v bf16 from
the products; the Hopper kernels on an sm_90 GPU) and its cross-entropy on the bf16 logits
themselves (the loss float32, as autocast's; PyTorch's copies the logits to float32 first), and its
LayerNorm on the float32 stream. The loss check's yardstick is then autocast's own: the two
PyTorch runs differ by bf16's roundings, not fp32's.

torch.compile: PyTorch's model (with SDPA and the fused AdamW: its fastest configuration) and the
lab's (with FlatAdamW, and again with PyTorch's fused AdamW) are also trained compiled, in
--compile-mode (default reduce-overhead: CUDA graphs, the mode whose step is fastest), and their
step times compared; the compiled PyTorch run
is one more correct run for the loss check's spread (the largest difference of a PyTorch run from
eager's).

Step time: the median of the steps after the first 5 (forward, backward, AdamW), CUDA events.

--profile N: after each compiled run's timed steps, N more steps under torch.profiler (CUDA
activity alone), and where their GPU time goes: the kernels (and copies, memsets) by time a step,
the largest --profile-top of them with their launches a step, and the sum of all; in the JSON too.
What separates the compiled steps is read there (the lab's operators, PyTorch's fused kernels
around them, the optimizers' kernels).
Exit status 0 when the lab's losses pass; 1 when they do not; 2 for a bad argument, no PyTorch,
no GPU, or the package not built.
"""
import argparse
import copy
import functools
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_timing import import_bridge, put_bridge_on_path  # noqa: E402

put_bridge_on_path(sys)
import torch_gpt2  # noqa: E402


def corpus(torch, steps, batch, ctx, vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(vocab, generator=g)
    seqs = torch.empty(steps, batch, ctx + 1, dtype=torch.long)
    seqs[:, :, 0] = torch.randint(0, vocab, (steps, batch), generator=g)
    noise = torch.randint(0, vocab, (steps, batch, ctx + 1), generator=g)
    keep = torch.rand(steps, batch, ctx + 1, generator=g) < 0.9
    for t in range(1, ctx + 1):
        seqs[:, :, t] = torch.where(keep[:, :, t], perm[seqs[:, :, t - 1]], noise[:, :, t])
    return seqs.cuda()


def profile_steps(torch, step, batches, top):
    """Runs step(seq) for each of `batches` under torch.profiler (CUDA activity) and returns the
    kernels by GPU time a step: [(name, ms a step, launches a step)], the largest `top` and a last
    row "(all)" for the sum over every kernel, copy and memset."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for seq in batches:
            step(seq)
        torch.cuda.synchronize()
    n = len(batches)
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:
            us = e.cuda_time_total
        if us > 0:
            rows.append((e.key, us / n / 1000.0, e.count / n))
    rows.sort(key=lambda r: -r[1])
    return rows[:top] + [("(all)", sum(r[1] for r in rows), sum(r[2] for r in rows))]


def train(torch, model, data, label, optimizer=None, bf16=False, profile=0, top=20):
    opt = (optimizer or torch.optim.AdamW)(model.parameters(), lr=3e-4)
    # The peak is training's, from here: the model built, AdamW's moments made at its first step.
    torch.cuda.reset_peak_memory_stats()
    losses, times = [], []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i, seq in enumerate(data):
        start.record()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        stop.record()
        losses.append(loss.item())  # synchronizes
        times.append(start.elapsed_time(stop))
        if i == 0 or (i + 1) % 10 == 0:
            print("  %-28s step %3d  loss %.6f  %.2f ms" % (label, i + 1, losses[-1], times[-1]), flush=True)
    median = statistics.median(times[5:]) if len(times) > 5 else statistics.median(times)
    if not profile:
        return losses, median, None

    def step(seq):  # as above, untimed and its loss not kept
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    rows = profile_steps(torch, step, [data[i % len(data)] for i in range(profile)], top)
    print("  %s: GPU time a step by kernel (torch.profiler, %d steps)" % (label, profile))
    for name, ms, launches in rows:
        print("    %9.4f ms %6.1f  %s" % (ms, launches, name[:110]))
    return losses, median, rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="12x768x12x1024x4x10000", help="layers x d x heads x context x batch x vocab")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="fp32, or bf16 autocast for every model (the lab's attention then bf16)")
    p.add_argument("--attention", default="3xtf32", choices=["3xtf32", "fp32"],
                   help="the lab's fp32 attention kernels: 3xTF32 on the tensor cores, or SIMT (fp32 only)")
    p.add_argument("--compile-mode", default="reduce-overhead",
                   choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                   help="torch.compile's mode for the compiled runs")
    p.add_argument("--no-compile", action="store_true", help="skip the compiled runs")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="profile N more steps of each compiled run (torch.profiler): GPU time by kernel")
    p.add_argument("--profile-top", type=int, default=20, metavar="K", help="the K largest kernels (default 20)")
    p.add_argument("--json", help="write losses and times here")
    p.add_argument("--markdown", help="write the table of step times and the loss check here (for the README)")
    a = p.parse_args()
    try:
        layers, d, heads, ctx, batch, vocab = (int(v) for v in a.config.split("x"))
    except ValueError:
        print("torch_gpt2_lab.py: error: --config wants layers x d x heads x context x batch x vocab", file=sys.stderr)
        return 2
    if a.profile < 0 or a.profile_top < 1:
        print("torch_gpt2_lab.py: error: --profile at least 0, --profile-top at least 1", file=sys.stderr)
        return 2
    if a.steps < 6 or d % heads or ctx > torch_gpt2.POSITIONS:
        print("torch_gpt2_lab.py: error: --steps at least 6, heads dividing d, context at most %d"
              % torch_gpt2.POSITIONS, file=sys.stderr)
        return 2
    torch = torch_gpt2.cuda_torch("torch_gpt2_lab.py")
    if torch is None:
        return 2
    lab = import_bridge("torch_gpt2_lab.py")
    if lab is None:
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    F = torch.nn.functional
    bf16 = a.precision == "bf16"
    attention = "bf16" if bf16 else a.attention
    lab_ops = {"layer_norm": lab.layer_norm, "cross_entropy": lab.cross_entropy,
               "attention": lambda q, k, v: lab.attention(q, k, v, causal=True, precision=attention)}
    if bf16:
        lab_ops["gelu"] = lab.gelu
    sdpa_ops = {"attention": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
    torch.manual_seed(0)
    ref = torch_gpt2.build(torch, layers, d, heads, vocab)
    state = copy.deepcopy(ref.state_dict())
    data = corpus(torch, a.steps, batch, ctx, vocab)
    print("GPT-2 %s, %d steps, %s, %s | torch %s" % (a.config, a.steps, a.precision, torch.cuda.get_device_name(0),
                                                     torch.__version__))
    runs = {}
    for name, ops, optimizer in (("pytorch eager", None, None), ("pytorch eager, SDPA", sdpa_ops, None),
                                 ("lab ops", lab_ops, None), ("lab ops + FlatAdamW", lab_ops, lab.FlatAdamW)):
        model = torch_gpt2.build(torch, layers, d, heads, vocab, ops=ops)
        model.load_state_dict(state)
        losses, ms, _ = train(torch, model, data, name, optimizer, bf16)
        runs[name] = {"losses": losses, "step_ms": ms, "peak_MiB": torch.cuda.max_memory_allocated() / 2**20}
        del model
        torch.cuda.empty_cache()
    compiled_names = []
    if not a.no_compile:
        # PyTorch's compiled run is its fastest configuration: SDPA and the fused AdamW.
        fused_adamw = functools.partial(torch.optim.AdamW, fused=True)
        # The lab's operators compiled twice: with FlatAdamW, and with PyTorch's fused AdamW, which
        # separates what the operators cost from what the optimizer does (the steps zero the
        # gradients with set_to_none, so both optimizers read the tensors backward made).
        for name, ops, optimizer in (("pytorch torch.compile", sdpa_ops, fused_adamw),
                                     ("lab ops + FlatAdamW, compiled", lab_ops, lab.FlatAdamW),
                                     ("lab ops + fused AdamW, compiled", lab_ops, fused_adamw)):
            model = torch_gpt2.build(torch, layers, d, heads, vocab, ops=ops)
            model.load_state_dict(state)
            losses, ms, prof = train(torch, torch.compile(model, mode=a.compile_mode), data, name, optimizer, bf16,
                                     a.profile, a.profile_top)
            runs[name] = {"losses": losses, "step_ms": ms, "peak_MiB": torch.cuda.max_memory_allocated() / 2**20}
            if prof:
                runs[name]["profile"] = [{"kernel": k, "ms_a_step": ms_, "launches_a_step": n} for k, ms_, n in prof]
            compiled_names.append(name)
            del model
            torch.cuda.empty_cache()
    base = runs["pytorch eager"]["losses"]
    spread = max(abs(x - y) for name in ("pytorch eager, SDPA", "pytorch torch.compile") if name in runs
                 for x, y in zip(base, runs[name]["losses"]))
    floor = 2.0 ** -20 * max(abs(x) for x in base)
    allowed = 4 * max(spread, floor)
    print("\nloss: step 1 %.4f -> step %d %.4f (eager)" % (base[0], a.steps, base[-1]))
    print("PyTorch's %s runs differ from eager by at most %.3g; allowed the lab's runs: %.3g"
          % (a.precision, spread, allowed))
    worst, ok = {}, True
    for name in ["lab ops", "lab ops + FlatAdamW"] + compiled_names[1:]:
        worst[name] = max(abs(x - y) for x, y in zip(base, runs[name]["losses"]))
        ok = ok and worst[name] <= allowed
        print("  %-22s differs from eager by at most %.3g: %s" % (name, worst[name],
                                                                  "PASS" if worst[name] <= allowed else "FAIL"))
    print("\n%-30s %10s %10s %10s %12s" % ("step (median)", "ms", "eager/x", "compile/x", "peak MiB"))
    compiled_ms = runs["pytorch torch.compile"]["step_ms"] if compiled_names else float("nan")
    for name, r in runs.items():
        print("%-30s %10.2f %10.2f %10.2f %12.0f" % (name, r["step_ms"], runs["pytorch eager"]["step_ms"] / r["step_ms"],
                                                     compiled_ms / r["step_ms"], r["peak_MiB"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": a.config, "steps": a.steps, "precision": a.precision, "attention": attention,
                       "compile_mode": None if a.no_compile else a.compile_mode, "runs": runs,
                       "spread": spread, "worst": worst, "allowed": allowed, "pass": ok,
                       "device": torch.cuda.get_device_name(0), "torch": torch.__version__}, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(a, runs, spread, worst, allowed, torch))
    return 0 if ok else 1


def markdown(a, runs, spread, worst, allowed, torch):
    eager = runs["pytorch eager"]
    out = ["Measured by `tools/torch_gpt2_lab.py` on %s, torch %s: GPT-2 %s (layers x d x heads x context x "
           "batch x vocab), %s, %d steps, the lab's attention %s, compiled runs in torch.compile's mode %s; step "
           "time the median of steps 6-%d (CUDA events), peak the training's (`torch.cuda.max_memory_allocated`)."
           % (torch.cuda.get_device_name(0), torch.__version__, a.config,
              "bf16 autocast" if a.precision == "bf16" else "fp32", a.steps,
              "bf16" if a.precision == "bf16" else a.attention, "-" if a.no_compile else a.compile_mode, a.steps), "",
           "| model | step ms | eager / it | compiled PyTorch / it | peak MiB | loss: largest difference from eager |",
           "|---|---|---|---|---|---|"]
    compiled = runs.get("pytorch torch.compile")
    for name, r in runs.items():
        check = ("%.3g (allowed %.3g): %s" % (worst[name], allowed, "PASS" if worst[name] <= allowed else "FAIL")
                 if name in worst else "%.3g: one correct run's difference (the spread: the largest, %.3g)" % (
                     max(abs(x - y) for x, y in zip(eager["losses"], r["losses"])), spread)
                 if name in ("pytorch eager, SDPA", "pytorch torch.compile") else "-")
        vs_compiled = "%.2fx" % (compiled["step_ms"] / r["step_ms"]) if compiled else "-"
        out.append("| %s | %.2f | %.2fx | %s | %.0f | %s |" % (name, r["step_ms"], eager["step_ms"] / r["step_ms"],
                                                               vs_compiled, r["peak_MiB"], check))
    out += ["", "The loss falls from %.4f (step 1) to %.4f (step %d), eager." % (eager["losses"][0],
                                                                               eager["losses"][-1], a.steps)]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
