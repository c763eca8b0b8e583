"""Does the tools' L2 flush leave torch.compile's LayerNorm a warm gamma and beta? (session 97; run in session 98: run_h100_s98/)

Inductor's LayerNorm kernel loads gamma and beta with eviction_policy='evict_last'
(../layernorm_hints_s93/inductor_kernel.py). The tools' flush (tools/torch_timing.py) reads a buffer of
twice the L2 with ordinary loads, and an L2 evicts evict_last lines after the others: gamma's and beta's
3 KB may survive it, so that each timed call finds them in the L2 while the lab's kernel (ordinary loads)
does not. Nsight Compute, which empties the L2 itself, timed the two kernels alike (17.18 and 17.15 us at
16384x768 in bf16, session 94), where the tools' events time torch.compile's 2% to 3% faster.

This times, alternated round by round in one process, each under two flushes:
  "ordinary": torch_timing's (a sum over 2 x L2 with ordinary loads), as every tool flushes;
  "last":     a Triton kernel reading the same buffer with evict_last loads first, then the ordinary sum,
              so that evict_last lines left by the call before compete with as many newer ones;
the forms:
  compile_y:     torch.compile(F.layer_norm), the y alone (what torch_ops_bench times: no input needs grad);
  compile_stats: torch.compile of aten.native_layer_norm returning y, mean and rstd, the outputs the lab's
                 operator writes (as a training step's forward saves them);
  eager:         F.layer_norm;
and, when the program's path is given, the lab's C++ program (its own flush; no "last" form).
If compile_y is slower under "last" by about its lead over the lab, the tools' flush is not cold for
evict_last data, and torch_timing's flush should read with evict_last too.

Session 99 found "last" not neutral (README, "Run in session 99"): eager's forward at 8192x4096, which
loads with no hint, took 6.3% longer under it. Two more flushes (written in session 99, not run yet),
each "last" with one more pass over the buffer's 128-byte lines between its two reads:
  "discard": discard.global.L2 on each line (the line leaves the L2 unwritten), so that the flush's own
             evict_last lines leave with the ones they evicted and the ordinary sum fills an empty L2;
  "demote":  applypriority.global.L2::evict_normal on each line (the line stays, at the ordinary
             priority), so that the ordinary sum evicts it as it would any line.
The form that empties inductor's evict_last lines and leaves eager's time at 8192x4096 where "ordinary"
has it is the flush the tools should take.

Run from the repository root:
  python3 ch03_kernels/results/layernorm_flush_s97/ln_flush.py ROUNDS [SHAPE] [PROGRAM|-] [FLUSHES]
(e.g. 6 16384x768 build/ch03_kernels/optimized_layernorm_bf16 ordinary,last,discard,demote; FLUSHES is
ordinary,last unless given, the two that sessions 98 and 99 ran; "-" runs no program)."""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
import torch
import triton
import triton.language as tl
from torch_timing import l2_flush_buffer, time_call

F = torch.nn.functional
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
shape = sys.argv[2] if len(sys.argv) > 2 else "16384x768"
prog = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
wanted = sys.argv[4].split(",") if len(sys.argv) > 4 else ["ordinary", "last"]
KNOWN = ("ordinary", "last", "discard", "demote")
if any(f not in KNOWN for f in wanted) or len(set(wanted)) != len(wanted):
    sys.exit("ln_flush.py: FLUSHES is a list of distinct names from %s, not %s" % (",".join(KNOWN), sys.argv[4]))
n, d = map(int, shape.split("x"))


@triton.jit
def _read_last(src, out, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + offs, mask=offs < numel, other=0.0, eviction_policy="evict_last")
    tl.store(out + tl.program_id(0), tl.sum(v, 0))


LINE = 32  # floats in a 128-byte line (the "* 32" in the two passes below)
LINES = 128  # lines a program, in the two passes below


@triton.jit
def _discard(src, out, LINES: tl.constexpr):
    at = (src + (tl.program_id(0) * LINES + tl.arange(0, LINES)) * 32).to(tl.int64)
    r = tl.inline_asm_elementwise("discard.global.L2 [$1], 128;\n\tmov.u32 $0, 0;", "=r,l", [at],
                                  dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out + tl.program_id(0), tl.sum(r, 0).to(tl.float32))  # a use of r: the asm is kept


@triton.jit
def _demote(src, out, LINES: tl.constexpr):
    at = (src + (tl.program_id(0) * LINES + tl.arange(0, LINES)) * 32).to(tl.int64)
    r = tl.inline_asm_elementwise("applypriority.global.L2::evict_normal [$1], 128;\n\tmov.u32 $0, 0;", "=r,l",
                                  [at], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out + tl.program_id(0), tl.sum(r, 0).to(tl.float32))


buf = l2_flush_buffer(torch)
BLOCK = 4096
partial = torch.empty(triton.cdiv(buf.numel(), BLOCK), device="cuda")
assert buf.numel() % (LINE * LINES) == 0, "the flush buffer is a whole number of the line passes' programs"
line_grid = (buf.numel() // (LINE * LINES),)
line_out = torch.empty(line_grid[0], device="cuda")


class Ordinary:
    def sum(self):
        return buf.sum()


class Last:
    """The evict_last read, then (line_pass: one of the two passes above, or none) a pass over the
    buffer's lines, then the ordinary sum."""

    def __init__(self, line_pass=None):
        self.line_pass = line_pass

    def sum(self):
        _read_last[(partial.numel(),)](buf, partial, buf.numel(), BLOCK=BLOCK)
        if self.line_pass is not None:
            self.line_pass[line_grid](buf, line_out, LINES=LINES)
        return buf.sum()


def rand(*s, lo=-1.0, hi=1.0):
    return torch.empty(*s, device="cuda").uniform_(lo, hi).to(torch.bfloat16)


x, w, b = rand(n, d, lo=-2, hi=4), rand(d, lo=0.5, hi=1.5), rand(d, lo=-0.5, hi=0.5)
y_only = torch.compile(lambda x, w, b: F.layer_norm(x, (d,), w, b, 1e-5), dynamic=False)
stats = torch.compile(lambda x, w, b: torch.ops.aten.native_layer_norm(x, (d,), w, b, 1e-5), dynamic=False)
forms = {"compile_y": lambda: y_only(x, w, b), "compile_stats": lambda: stats(x, w, b),
         "eager": lambda: F.layer_norm(x, (d,), w, b, 1e-5)}
for f in forms.values():  # compile before timing
    f()
y, mean, rstd = stats(x, w, b)
assert mean.numel() == n and rstd.numel() == n, "native_layer_norm's statistics: one a row"


def cpp():
    out = subprocess.run([prog, "--shape", shape, "--no-check", "--benchmark_format=json"], capture_output=True,
                         text=True)
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}
    for bm in json.loads(out.stdout)["benchmarks"]:
        if bm.get("aggregate_name") == "median":
            return bm["real_time"] * scale[bm["time_unit"]]
    raise RuntimeError("no median in the program's output")


known = {"ordinary": Ordinary, "last": lambda: Last(), "discard": lambda: Last(_discard),
         "demote": lambda: Last(_demote)}
flushes = {f: known[f]() for f in wanted}
res = {(f, fl): [] for f in forms for fl in flushes}
lab = []
print(torch.cuda.get_device_name(), torch.__version__, shape, "rounds", rounds, flush=True)
for r in range(rounds):
    order = list(flushes) if r % 2 == 0 else list(flushes)[::-1]
    for fl in order:
        for f, fn in forms.items():
            res[(f, fl)].append(time_call(torch, fn, flushes[fl], 50).median_ms * 1000)
    if prog:
        lab.append(cpp())
    print("round", r, " ".join("%s/%s %.2f" % (f, fl, v[-1]) for (f, fl), v in res.items()),
          ("lab %.2f" % lab[-1]) if lab else "", flush=True)
print("medians of the rounds, us:")
for (f, fl), v in res.items():
    print("  %-14s %-9s %.2f" % (f, fl, statistics.median(v)))
if lab:
    print("  %-14s %-9s %.2f" % ("lab program", "its own", statistics.median(lab)))
