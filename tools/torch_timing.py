"""Timing PyTorch calls the way the lab's programs time their kernels, written once for the tools
that set PyTorch beside the lab (torch_reference.py, torch_ops_bench.py, torch_square.py):

  - the L2 flushed before each call (a read of a buffer twice the L2's size, at least 64 MiB), so
    that no call finds its inputs left in the L2 by the one before;
  - then a spin of the GPU before the start event, long enough for the call's CPU work (Python, the
    dispatcher, argument checks, the launches) to be queued behind it: the events measure the GPU's
    work, not the gaps between launches (a call's host time is measured apart). The spin is at
    least 0.2 ms at H100 clocks, and twice the call's CPU time as the warm-up calls measured it:
    a fixed 0.2 ms let a backward whose CPU work took 0.31 ms count 0.11 ms of waiting for its own
    launches as GPU time (2026-11-27). Each Timing says how long its spin was (spin_us);
  - the median of `reps` calls after `warmup` calls (the first call of an op may compile or tune).

Also here: where the tools find cuda_perf_lab (the bridge package in python/).
"""
import glob
import os
import statistics
import sys
import time
from collections import namedtuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

Timing = namedtuple("Timing", "median_ms min_ms max_ms host_us spin_us")

# The spin's length in GPU clock cycles for a time: cycles at 1980 MHz (the H100 SXM's top clock;
# a GPU that runs slower spins longer, never shorter than asked).
SPIN_CYCLES_PER_US = 1980
MIN_SPIN_CYCLES = 400_000  # 0.2 ms at 1980 MHz


def spin_cycles(host_us):
    """The spin before a call whose CPU work takes host_us: twice that, and at least 0.2 ms."""
    return max(MIN_SPIN_CYCLES, int(2 * host_us * SPIN_CYCLES_PER_US))


def l2_flush_buffer(torch):
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return torch.empty(max(2 * l2, 64 << 20) // 4, device="cuda")


def time_call(torch, fn, flush, reps, warmup=3):
    """fn's GPU time, cold L2: Timing(median, min, max ms of `reps` calls; median host us a call;
    the spin before each call, us at 1980 MHz)."""
    warm = []
    for _ in range(max(1, warmup)):
        t0 = time.perf_counter()
        fn()
        warm.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    cycles = spin_cycles(max(warm[1:] or warm))  # the first call may compile: not its CPU time
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu, host = [], []
    for _ in range(reps):
        flush.sum()
        torch.cuda._sleep(cycles)  # the spin: the call is queued before it ends
        start.record()
        t0 = time.perf_counter()
        fn()
        host.append((time.perf_counter() - t0) * 1e6)
        stop.record()
        stop.synchronize()
        gpu.append(start.elapsed_time(stop))
    return Timing(statistics.median(gpu), min(gpu), max(gpu), statistics.median(host), cycles / SPIN_CYCLES_PER_US)


def kernels_per_call(with_flush, flush_alone, reps):
    """[(kernel name, us a call)], longest first: the kernels of `reps` calls each after the flush
    (with_flush: (name, us) for every kernel the profiler recorded, in launch order) less those of
    `reps` flushes alone (flush_alone, in launch order). One stream runs them in order, so when
    each of the `reps` rounds launched the same number of kernels and opens with the flush's own
    (by name), the flush's are taken out by position: its time after a call, which grows as it
    writes back the call's dirty L2 lines, is not the call's, and a kernel of the call's that shares
    a name with the flush's keeps its own time. Otherwise they are taken out by name (their time
    alone subtracted). The names left under 0.05 us a call are dropped (noise)."""
    def totals(events):
        out = {}
        for name, us in events:
            out[name] = out.get(name, 0.0) + us
        return out
    k, per = len(flush_alone) // max(reps, 1), len(with_flush) // max(reps, 1)
    flush_names = [name for name, _ in flush_alone[:k]]
    rounds = [with_flush[i * per:(i + 1) * per] for i in range(reps)]
    if (reps > 0 and k * reps == len(flush_alone) and per * reps == len(with_flush) and per >= k
            and all([name for name, _ in r[:k]] == flush_names for r in rounds)):
        per_call = ((name, us / reps) for name, us in totals([e for r in rounds for e in r[k:]]).items())
    else:
        both, flush = totals(with_flush), totals(flush_alone)
        per_call = ((name, (us - flush.get(name, 0.0)) / reps) for name, us in both.items())
    return sorted((kv for kv in per_call if kv[1] >= 0.05), key=lambda kv: (-kv[1], kv[0]))


def kernel_times(torch, fn, flush, reps, warmup=3):
    """fn's GPU kernels as torch.profiler records them, cold L2 as time_call: `reps` calls, each
    after the L2 flush, and `reps` flushes alone, whose kernels are taken out (kernels_per_call).
    What the profiler adds to a launch is in the kernels' times too (a few percent at the tens of
    microseconds); the event timing (time_call) is the one to quote."""
    for _ in range(max(1, warmup)):
        fn()
    torch.cuda.synchronize()

    def recorded(body):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                body()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        kernels.sort(key=lambda e: e.time_range.start)
        return [(e.name, e.time_range.elapsed_us()) for e in kernels]

    alone = recorded(lambda: flush.sum())
    return kernels_per_call(recorded(lambda: (flush.sum(), fn())), alone, reps)


def compile_for_shape(torch, fn, mode="default"):
    """torch.compile(fn) as PyTorch is at its best on one fixed shape: dynamo's caches reset first
    and dynamic=False, so fn is traced for this shape alone (compiled after other shapes of the same
    function it is otherwise traced again with dynamic sizes, PyTorch's automatic dynamic shapes,
    whose kernels ran up to 4x slower than the specialised ones in ch03's sweep on the H100, and past
    8 shapes dynamo falls back to eager); and the tensors fn's closure holds (its inputs) marked as
    static addresses, so that CUDA graphs (reduce-overhead, max-autotune) do not copy them into the
    graph's own buffers before each replay, a copy a model's graph does not make for the tensors it
    made itself. mode: "default", "reduce-overhead" or "max-autotune"."""
    torch._dynamo.reset()
    for cell in getattr(fn, "__closure__", None) or ():
        if isinstance(cell.cell_contents, torch.Tensor):
            torch._dynamo.mark_static_address(cell.cell_contents)
    return torch.compile(fn, mode=None if mode == "default" else mode, dynamic=False)


def import_bridge(prog):
    """cuda_perf_lab, imported; or None after printing prog's one-line error (for exit status 2)."""
    try:
        import cuda_perf_lab
    except ImportError as e:
        print("%s: error: cuda_perf_lab is not built (python3 -m pip install --no-build-isolation ./python): %s"
              % (prog, e), file=sys.stderr)
        return None
    return cuda_perf_lab


def put_bridge_on_path(sys):
    """Makes `import cuda_perf_lab` find the package: built in place in python/ (setup.py
    build_ext --inplace) it goes first; otherwise the installed one (pip) is found, and python/'s
    sources, which lack the compiled part, stay off the path."""
    folder = os.path.join(ROOT, "python")
    if glob.glob(os.path.join(folder, "cuda_perf_lab", "_C*.so")):
        sys.path.insert(0, folder)
