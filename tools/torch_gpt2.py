#!/usr/bin/env python3
"""The lab's GPT-2 model in PyTorch, and the check that the lab's training step computes what
PyTorch computes from the same weights and data (check 4 of the transformer issue).

The model is the one ch04_compile_vs_fused/gpt2/gpt2_model.hpp defines, module for module, so that its
state dict has the lab's names, shapes and order (the lab's flat parameter buffer is this model's
parameters concatenated): token and learned position embeddings (1024 positions), pre-LayerNorm
blocks (causal multi-head attention with a fused QKV projection and an output projection, both
with bias, the attention written out as softmax(QK^T / sqrt(hd)) V; an MLP d -> 4d -> d with
bias and the exact GELU), a final LayerNorm, an untied head without bias, the mean cross-entropy
of the targets. LayerNorm's eps is 1e-5; AdamW is torch.optim.AdamW with PyTorch's defaults.

  demo_gpt2_report --dump DIR --sizes small --contexts 128     (on the GPU: the lab's side)
  python3 tools/torch_gpt2.py --check DIR [--json out.json]

--check loads the inputs the lab dumped (flat fp32 parameters in the state dict's order, tokens,
targets, AdamW's moments at step 2) and runs the loss, every gradient and one AdamW step in
PyTorch twice: in float64 (the reference) and in float32 with TF32 off (PyTorch's own fp32
error). Each lab implementation then passes when, for every tensor of the gradients, the
parameters and both moments after the step, its L2 distance from the float64 result is at most
4 times PyTorch float32's (a distance over many elements is a steady statistic; the floor is half
an fp32 ulp per element, 2^-24 times the tensor's norm), and its loss is within 4 times the
largest error of a single row's loss in PyTorch float32 (the mean of the rows' losses is off by
at most its largest row's error). Prints one line per implementation and the worst tensors.

An implementation that declares bf16 products (its "precision" in the dump starts with "bf16") is
held to mixed precision's yardstick instead: the same step run by PyTorch in float32 under
torch.autocast(bfloat16) (the model's matrix products and attention products in bf16, LayerNorm,
softmax and the loss in fp32, AdamW on the fp32 parameters), with the same rule: every tensor
within 4 times autocast's own L2 error from float64, the loss within 4 times autocast's largest
row error.

Exit status 0 when every implementation passes; 1 when one does not; 2 for a bad argument or a
dump it cannot read, no PyTorch or no GPU.
"""
import argparse
import json
import math
import os
import sys

POSITIONS = 1024
LN_EPS = 1e-5


def cuda_torch(prog):
    """PyTorch, imported, with a CUDA device it can see; or None after printing prog's one-line error
    (for the tools' exit status 2)."""
    try:
        import torch
    except ImportError:
        print("%s: error: PyTorch is not installed" % prog, file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print("%s: error: no CUDA device visible to PyTorch" % prog, file=sys.stderr)
        return None
    return torch


def model_class(torch, ops=None):
    """The model's class. ops: operators to run in place of PyTorch's (tools/torch_gpt2_lab.py swaps
    in the lab's): "layer_norm"(x, weight, bias), "attention"(q, k, v) (causal, batch x heads x seq x
    head_dim, contiguous), "gelu"(x), "cross_entropy"(logits, targets) (the mean); the parameters and
    their names stay the same."""
    nn, F = torch.nn, torch.nn.functional
    ops = ops or {}

    class LayerNorm(nn.LayerNorm):
        def forward(self, x):
            if "layer_norm" in ops:
                return ops["layer_norm"](x.contiguous(), self.weight, self.bias)
            return super().forward(x)

    class Attention(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            B, T, d = x.shape
            hd = d // self.heads
            q, k, v = self.qkv(x).split(d, dim=2)
            q, k, v = (t.view(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v))
            if "attention" in ops:
                y = ops["attention"](q.contiguous(), k.contiguous(), v.contiguous())
                return self.proj(y.transpose(1, 2).contiguous().view(B, T, d))
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            return self.proj((probs @ v).transpose(1, 2).contiguous().view(B, T, d))

    class MLP(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = nn.Linear(d, 4 * d)
            self.proj = nn.Linear(4 * d, d)

        def forward(self, x):
            h = self.fc(x)
            return self.proj(ops["gelu"](h) if "gelu" in ops else F.gelu(h))

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.ln1 = LayerNorm(d, eps=LN_EPS)
            self.attn = Attention(d, heads)
            self.ln2 = LayerNorm(d, eps=LN_EPS)
            self.mlp = MLP(d)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT2(nn.Module):
        def __init__(self, layers, d, heads, vocab):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(POSITIONS, d)
            self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
            self.lnf = LayerNorm(d, eps=LN_EPS)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, tokens, targets, reduction="mean"):
            T = tokens.shape[1]
            x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.lnf(x))
            if "cross_entropy" in ops and reduction == "mean":
                return ops["cross_entropy"](logits.view(-1, logits.shape[-1]), targets.reshape(-1))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction)

    return GPT2


def build(torch, layers, d, heads, vocab, dtype=None, device="cuda", ops=None):
    """The model on the device, its weights left as PyTorch initialises them (timing needs no more)."""
    GPT2 = model_class(torch, ops)
    m = GPT2(layers, d, heads, vocab).to(device)
    return m.to(dtype) if dtype is not None else m


def num_params(torch, layers, d, heads, vocab):
    return sum(p.numel() for p in build(torch, layers, d, heads, vocab, device="meta").parameters())


def load_flat(torch, model, flat):
    """Copies a flat buffer (the lab's layout) into the model's parameters, in order."""
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            p.copy_(flat[offset:offset + n].view_as(p))
            offset += n
    if offset != flat.numel():
        raise ValueError("the dump holds %d parameters, the model %d" % (flat.numel(), offset))


def flat_of(torch, tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


def torch_step(torch, dump, inputs, dtype, autocast=False):
    """Loss, per-row losses, gradients, and the parameters and moments after one AdamW step; with
    autocast, the forward under torch.autocast(bfloat16) (dtype float32: mixed precision)."""
    import contextlib
    c, a = dump["config"], dump["adamw"]
    model = build(torch, c["layers"], c["d_model"], c["heads"], c["vocab"], dtype)
    load_flat(torch, model, inputs["params"].to(dtype))
    tokens, targets = inputs["tokens"], inputs["targets"]
    mixed = torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    with torch.no_grad(), mixed:
        rows = model(tokens, targets, reduction="none")
    with mixed:
        loss = model(tokens, targets)
    loss.backward()
    params = list(model.parameters())
    grads = flat_of(torch, [p.grad for p in params])
    opt = torch.optim.AdamW(params, lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"],
                            weight_decay=a["weight_decay"])
    offset = 0
    for p in params:  # the moments as after step - 1 steps
        n = p.numel()
        opt.state[p] = {"step": torch.tensor(float(a["step"] - 1)),
                        "exp_avg": inputs["m"][offset:offset + n].to(dtype).view_as(p).clone(),
                        "exp_avg_sq": inputs["v"][offset:offset + n].to(dtype).view_as(p).clone()}
        offset += n
    opt.step()
    return {"loss": loss.item(), "rows": rows, "grads": grads,
            "params": flat_of(torch, [p.detach() for p in params]),
            "m": flat_of(torch, [opt.state[p]["exp_avg"] for p in params]),
            "v": flat_of(torch, [opt.state[p]["exp_avg_sq"] for p in params])}


def read(torch, directory, name, dtype):
    import numpy as np
    path = os.path.join(directory, name)
    arr = np.fromfile(path, dtype=np.float32 if dtype == "f32" else np.int32)
    return torch.from_numpy(arr).cuda()


def judge(torch, dump, ref, yard, lab, yard_name="PyTorch fp32"):
    """(passed, worst lines) for one implementation's outputs against the reference, allowed 4 times
    the yardstick's (PyTorch float32's, or autocast bf16's) error."""
    layout = dump["layout"]
    worst, passed = [], True
    row_err = (yard["rows"].double() - ref["rows"]).abs().max().item()
    loss_err, loss_allowed = abs(lab["loss"] - ref["loss"]), 4 * row_err
    if not loss_err <= loss_allowed:
        passed = False
    worst.append((loss_err / loss_allowed if loss_allowed > 0 else math.inf, "loss: |lab - fp64| %.3g, allowed %.3g "
                  "(4 x %s's largest row error)" % (loss_err, loss_allowed, yard_name)))
    for what in ("grads", "params", "m", "v"):
        for t in layout:
            s = slice(t["offset"], t["offset"] + t["size"])
            r = ref[what][s]
            e_lab = (lab[what][s].double() - r).norm().item()
            e_torch = (yard[what][s].double() - r).norm().item()
            allowed = 4 * max(e_torch, 2.0 ** -24 * r.norm().item())
            ratio = e_lab / allowed if allowed > 0 else (0.0 if e_lab == 0 else math.inf)
            if not ratio <= 1:
                passed = False
            worst.append((ratio, "%s %s: L2 error %.3g, %s's %.3g (ratio %.2f of the allowed 4x)"
                          % (what, t["name"], e_lab, yard_name, e_torch, ratio)))
    worst.sort(key=lambda w: -w[0])
    return passed, worst


def check(directory, as_json):
    try:
        with open(os.path.join(directory, "gpt2_dump.json")) as f:
            dump = json.load(f)
        if dump.get("format") != 1 or "inputs" not in dump:
            raise ValueError("%s/gpt2_dump.json was not written by demo_gpt2_report --dump" % directory)
    except (OSError, ValueError) as err:
        print("torch_gpt2: error: %s" % err, file=sys.stderr)
        return 2
    torch = cuda_torch("torch_gpt2")
    if torch is None:
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    c = dump["config"]
    shape = (c["batch"], c["context"])
    try:
        inputs = {k: read(torch, directory, dump["inputs"][k], "f32") for k in ("params", "m", "v")}
        for k in ("tokens", "targets"):
            inputs[k] = read(torch, directory, dump["inputs"][k], "i32").long().view(shape)
    except (OSError, ValueError, RuntimeError) as err:
        print("torch_gpt2: error: reading the inputs: %s" % err, file=sys.stderr)
        return 2
    print("model: %s (L=%d d=%d h=%d), context %d, batch %d, vocabulary %d, %d parameters"
          % (c["model_size"], c["layers"], c["d_model"], c["heads"], c["context"], c["batch"], c["vocab"],
             inputs["params"].numel()))
    ref = torch_step(torch, dump, inputs, torch.float64)
    fp32 = torch_step(torch, dump, inputs, torch.float32)
    print("PyTorch: loss %.9g (float64), %.9g (float32)" % (ref["loss"], fp32["loss"]))
    bf16 = None  # autocast's step, run when an implementation declares bf16 products
    status, results = 0, {}
    for name, v in dump["variants"].items():
        if "not_applicable" in v:
            print("%-10s N/A (%s)" % (name, v["not_applicable"]))
            continue
        lab = {"loss": v["loss"]}
        for what in ("grads", "params", "m", "v"):
            lab[what] = read(torch, directory, v[what], "f32")
        if v.get("precision", "fp32").startswith("bf16"):
            if bf16 is None:
                bf16 = torch_step(torch, dump, inputs, torch.float32, autocast=True)
                print("PyTorch: loss %.9g (autocast bf16)" % bf16["loss"])
            passed, worst = judge(torch, dump, ref, bf16, lab, "PyTorch autocast bf16")
        else:
            passed, worst = judge(torch, dump, ref, fp32, lab)
        print("%-10s %s: loss %.9g; worst: %s" % (name, "PASS" if passed else "FAIL", lab["loss"], worst[0][1]))
        for _, line in worst[1:4]:
            print("%-10s   then %s" % ("", line))
        results[name] = {"passed": passed, "loss": lab["loss"], "precision": v.get("precision", "fp32"),
                         "worst": [w[1] for w in worst[:10]]}
        status = status or (0 if passed else 1)
    if as_json:
        with open(as_json, "w") as f:
            json.dump({"config": c, "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                       "loss_fp64": ref["loss"], "loss_fp32": fp32["loss"],
                       "loss_autocast_bf16": bf16["loss"] if bf16 else None, "variants": results}, f, indent=1)
    return status


def main():
    ap = argparse.ArgumentParser(prog="torch_gpt2", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="DIR", required=True, help="a folder demo_gpt2_report --dump wrote")
    ap.add_argument("--json", help="write the verdicts here")
    a = ap.parse_args()
    return check(a.check, a.json)


if __name__ == "__main__":
    sys.exit(main())
