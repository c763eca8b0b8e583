#!/usr/bin/env python3
"""The drop-in: the lab's GPT-2 model in PyTorch (tools/torch_gpt2.py) with the lab's LayerNorm,
fused attention and cross-entropy swapped in (python/, cuda_perf_lab), trained for --steps steps
beside the unmodified model, from the same weights on the same batches; their losses compared,
and the training step of each timed, with torch.compile's of the unmodified model.

  python3 tools/torch_gpt2_lab.py [--config 12x768x12x1024x4x10000] [--steps 50]
      [--attention 3xtf32|fp32] [--no-compile] [--json out.json] [--markdown out.md]

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
scaled_dot_product_attention (another correct fp32 order of the same sums). The lab's model passes
when, at every step, its loss is within 4 times the largest difference between those two PyTorch
runs (and at least 2^-20 of the loss: the floor where both PyTorch runs agree to the last bits).

Step time: the median of the steps after the first 5 (forward, backward, AdamW), CUDA events.
Exit status 0 when the lab's losses pass; 1 when they do not; 2 for a bad argument, no PyTorch,
no GPU, or the package not built.
"""
import argparse
import copy
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


def train(torch, model, data, label, optimizer=None):
    opt = (optimizer or torch.optim.AdamW)(model.parameters(), lr=3e-4)
    # The peak is training's, from here: the model built, AdamW's moments made at its first step.
    torch.cuda.reset_peak_memory_stats()
    losses, times = [], []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i, seq in enumerate(data):
        start.record()
        loss = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        stop.record()
        losses.append(loss.item())  # synchronizes
        times.append(start.elapsed_time(stop))
        if i == 0 or (i + 1) % 10 == 0:
            print("  %-28s step %3d  loss %.6f  %.2f ms" % (label, i + 1, losses[-1], times[-1]), flush=True)
    return losses, statistics.median(times[5:]) if len(times) > 5 else statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="12x768x12x1024x4x10000", help="layers x d x heads x context x batch x vocab")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--attention", default="3xtf32", choices=["3xtf32", "fp32"],
                   help="the lab's fp32 attention kernels: 3xTF32 on the tensor cores, or SIMT")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile's step time")
    p.add_argument("--json", help="write losses and times here")
    p.add_argument("--markdown", help="write the table of step times and the loss check here (for the README)")
    a = p.parse_args()
    try:
        layers, d, heads, ctx, batch, vocab = (int(v) for v in a.config.split("x"))
    except ValueError:
        print("torch_gpt2_lab.py: error: --config wants layers x d x heads x context x batch x vocab", file=sys.stderr)
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
    lab_ops = {"layer_norm": lab.layer_norm, "cross_entropy": lab.cross_entropy,
               "attention": lambda q, k, v: lab.attention(q, k, v, causal=True, precision=a.attention)}
    sdpa_ops = {"attention": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
    torch.manual_seed(0)
    ref = torch_gpt2.build(torch, layers, d, heads, vocab)
    state = copy.deepcopy(ref.state_dict())
    data = corpus(torch, a.steps, batch, ctx, vocab)
    print("GPT-2 %s, %d steps, %s | torch %s" % (a.config, a.steps, torch.cuda.get_device_name(0), torch.__version__))
    runs = {}
    for name, ops, optimizer in (("pytorch eager", None, None), ("pytorch eager, SDPA", sdpa_ops, None),
                                 ("lab ops", lab_ops, None), ("lab ops + FlatAdamW", lab_ops, lab.FlatAdamW)):
        model = torch_gpt2.build(torch, layers, d, heads, vocab, ops=ops)
        model.load_state_dict(state)
        losses, ms = train(torch, model, data, name, optimizer)
        runs[name] = {"losses": losses, "step_ms": ms, "peak_MiB": torch.cuda.max_memory_allocated() / 2**20}
        del model
        torch.cuda.empty_cache()
    if not a.no_compile:
        model = torch_gpt2.build(torch, layers, d, heads, vocab)
        model.load_state_dict(state)
        compiled = torch.compile(model)
        losses, ms = train(torch, compiled, data, "pytorch torch.compile")
        runs["pytorch torch.compile"] = {"losses": losses, "step_ms": ms,
                                         "peak_MiB": torch.cuda.max_memory_allocated() / 2**20}
    base, other = runs["pytorch eager"]["losses"], runs["pytorch eager, SDPA"]["losses"]
    spread = max(abs(x - y) for x, y in zip(base, other))
    floor = 2.0 ** -20 * max(abs(x) for x in base)
    allowed = 4 * max(spread, floor)
    print("\nloss: step 1 %.4f -> step %d %.4f (eager)" % (base[0], a.steps, base[-1]))
    print("two PyTorch fp32 runs differ by at most %.3g; allowed the lab's runs: %.3g" % (spread, allowed))
    worst, ok = {}, True
    for name in ("lab ops", "lab ops + FlatAdamW"):
        worst[name] = max(abs(x - y) for x, y in zip(base, runs[name]["losses"]))
        ok = ok and worst[name] <= allowed
        print("  %-22s differs from eager by at most %.3g: %s" % (name, worst[name],
                                                                  "PASS" if worst[name] <= allowed else "FAIL"))
    print("\n%-24s %10s %10s %12s" % ("step (median)", "ms", "eager/x", "peak MiB"))
    for name, r in runs.items():
        print("%-24s %10.2f %10.2f %12.0f" % (name, r["step_ms"], runs["pytorch eager"]["step_ms"] / r["step_ms"],
                                              r["peak_MiB"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": a.config, "steps": a.steps, "attention": a.attention, "runs": runs,
                       "spread": spread, "worst": worst, "allowed": allowed, "pass": ok,
                       "device": torch.cuda.get_device_name(0), "torch": torch.__version__}, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(a, runs, spread, worst, allowed, torch))
    return 0 if ok else 1


def markdown(a, runs, spread, worst, allowed, torch):
    eager = runs["pytorch eager"]
    out = ["Measured by `tools/torch_gpt2_lab.py` on %s, torch %s: GPT-2 %s (layers x d x heads x context x "
           "batch x vocab), fp32, %d steps, the lab's attention %s; step time the median of steps 6-%d (CUDA "
           "events), peak the training's (`torch.cuda.max_memory_allocated`)."
           % (torch.cuda.get_device_name(0), torch.__version__, a.config, a.steps, a.attention, a.steps), "",
           "| model | step ms | eager / it | peak MiB | loss: largest difference from eager |",
           "|---|---|---|---|---|"]
    for name, r in runs.items():
        check = ("%.3g (allowed %.3g): %s" % (worst[name], allowed, "PASS" if worst[name] <= allowed else "FAIL")
                 if name in worst else "%.3g: the spread of two correct runs" % spread
                 if name == "pytorch eager, SDPA" else "-")
        out.append("| %s | %.2f | %.2fx | %.0f | %s |" % (name, r["step_ms"], eager["step_ms"] / r["step_ms"],
                                                          r["peak_MiB"], check))
    out += ["", "The loss falls from %.4f (step 1) to %.4f (step %d), eager." % (eager["losses"][0],
                                                                               eager["losses"][-1], a.steps)]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
