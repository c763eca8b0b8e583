"""LayerNorm bf16 at one shape (16384x768): the C++ program under each LAB_LN_CFG (blocks.patch applied), alternated
round by round, and torch.compile (default, max-autotune-no-cudagraphs) in the same process, cold L2.
Run from the repository root: python3 ch03_kernels/results/layernorm_blocks_h100_s89/ln_sweep.py
build/ch03_kernels/optimized_layernorm_bf16 t256,t128,... ROUNDS [SHAPE]"""
import json, os, subprocess, sys, statistics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
import torch
from torch_timing import l2_flush_buffer, time_call
F = torch.nn.functional
prog = sys.argv[1]; cfgs = sys.argv[2].split(","); rounds = int(sys.argv[3]); shape = sys.argv[4] if len(sys.argv) > 4 else "16384x768"
n, d = map(int, shape.split("x"))
def cpp(cfg):
    env = dict(os.environ, LAB_LN_CFG=cfg)
    out = subprocess.run([prog, "--shape", shape, "--no-check", "--benchmark_format=json"], capture_output=True, text=True, env=env)
    sc = {"ns": 1e-6, "us": 1e-3, "ms": 1.0}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            return b["real_time"] * sc[b["time_unit"]] * 1000
flush = l2_flush_buffer(torch)
def rand(*s, lo=-1.0, hi=1.0):
    return torch.empty(*s, device="cuda").uniform_(lo, hi).to(torch.bfloat16)
x, w, b = rand(n, d, lo=-2, hi=4), rand(d, lo=0.5, hi=1.5), rand(d, lo=-0.5, hi=0.5)
f = lambda x, w, b: F.layer_norm(x, (d,), w, b, 1e-5)
comp = {m: torch.compile(f, mode=None if m == "default" else m) for m in ("default", "max-autotune-no-cudagraphs")}
res = {c: [] for c in cfgs}; tc = {m: [] for m in comp}
for r in range(rounds):
    for m, g in comp.items():
        tc[m].append(time_call(torch, lambda: g(x, w, b), flush, 50).median_ms * 1000)
    for c in (cfgs if r % 2 == 0 else cfgs[::-1]):
        res[c].append(cpp(c))
    print("round", r, {m: "%.2f" % v[-1] for m, v in tc.items()}, {c: "%.2f" % v[-1] for c, v in res.items()}, flush=True)
best = min(statistics.median(v) for v in tc.values())
print("torch.compile us (median of rounds):", {m: round(statistics.median(v), 2) for m, v in tc.items()})
for c, v in res.items():
    print("%-8s %s  median %.2f us  compile/lab %.3f" % (c, " ".join("%.2f" % t for t in v), statistics.median(v), best / statistics.median(v)))
