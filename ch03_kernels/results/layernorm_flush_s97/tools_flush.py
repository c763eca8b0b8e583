"""Does the tools' flush, with flush_last.patch applied (tools/l2_flush_last.py: the evict_last read, then
every line set back to evict_normal, then the ordinary sum), time as ln_flush.py's "demote" form did in
session 100? Run from the repository root with the patch applied (session 100):
  python3 ch03_kernels/results/layernorm_flush_s97/tools_flush.py [ROUNDS]
It times, alternated round by round, torch.compile's y-only LayerNorm at 16384x768 and eager's F.layer_norm
at 8192x4096 (bf16; the latter loads with no hint: the control) under torch_timing's flush (l2_flush_buffer)
and under the ordinary sum alone of the same buffer. Expected from run_h100_s100/: compile 17.06 against
16.78 us; eager as under the ordinary sum (59.87 against 60.20)."""
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
from torch_timing import l2_flush_buffer, time_call  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
tools = l2_flush_buffer(torch)
if not hasattr(tools, "buffer"):
    sys.exit("tools_flush.py: apply flush_last.patch first (torch_timing has no L2Flush)")


class Ordinary:
    def sum(self):
        return tools.buffer.sum()


def rand(*s, lo=-1.0, hi=1.0):
    return torch.empty(*s, device="cuda").uniform_(lo, hi).to(torch.bfloat16)


forms = {}
for n, d in ((16384, 768), (8192, 4096)):
    x, w, b = rand(n, d, lo=-2, hi=4), rand(d, lo=0.5, hi=1.5), rand(d, lo=-0.5, hi=0.5)
    compiled = torch.compile(lambda x, w, b, d=d: F.layer_norm(x, (d,), w, b, 1e-5), dynamic=False)
    forms["compile %dx%d" % (n, d)] = lambda c=compiled, x=x, w=w, b=b: c(x, w, b)
    forms["eager %dx%d" % (n, d)] = lambda x=x, w=w, b=b, d=d: F.layer_norm(x, (d,), w, b, 1e-5)
flushes = {"tools": tools, "ordinary": Ordinary()}
res = {(f, fl): [] for f in forms for fl in flushes}
print(torch.cuda.get_device_name(), torch.__version__, "rounds", rounds, flush=True)
for r in range(rounds):
    for fl in (list(flushes) if r % 2 == 0 else list(flushes)[::-1]):
        for f, fn in forms.items():
            res[(f, fl)].append(time_call(torch, fn, flushes[fl], 50).median_ms * 1000)
    print("round", r, " ".join("%s/%s %.2f" % (f, fl, v[-1]) for (f, fl), v in res.items()), flush=True)
print("medians of the rounds, us:")
for (f, fl), v in res.items():
    print("  %-18s %-9s %.2f" % (f, fl, statistics.median(v)))
