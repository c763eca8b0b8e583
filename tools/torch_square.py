#!/usr/bin/env python3
"""Seed 004's example, reproduced: a square kernel written in CUDA, built into PyTorch with
torch.utils.cpp_extension.load_inline, checked, and set against x * x, x ** 2 and torch.square with
the PyTorch profiler's table, as the GPU-mode lecture does.

  python3 tools/torch_square.py [--elements 268435456] [--build-dir DIR] [--markdown out.md]

What the lab's own square lesson (ch02_profiling: baseline_square, optimized_square) adds to it:
  - a check before any timing: the lecture prints the result; here every element is compared with
    x * x (exact in fp32: one rounding either way), and ch02's programs compare with a double
    reference;
  - a cold L2: the lecture times a hot loop over a tensor the L2 may hold (at 1M elements, 4 MB,
    it does); the timing here flushes the L2 before each call, as every lab program does;
  - a yardstick: the time as a share of the device's copy bandwidth (bytes read and written over
    the time, against a device-to-device copy of the same bytes measured here), which says how
    much faster the kernel could be, where three equal profiler rows say only that they are equal;
  - medians and spread, not one call; and the profiler's CUDA totals, which include the launch
    but not the gaps between calls.

Exit status 0; 1 when the kernel's result is wrong; 2 without PyTorch, a GPU, or a compiler.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt2  # noqa: E402  (cuda_torch)
from torch_timing import l2_flush_buffer, time_call  # noqa: E402

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void square_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
  const long i = blockIdx.x * long(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i];
}

torch::Tensor square(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "square: a contiguous float32 CUDA tensor");
  auto y = torch::empty_like(x);
  const long n = x.numel();
  const int threads = 256;
  const long blocks = (n + threads - 1) / threads;
  if (n) square_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(),
                                                                               y.data_ptr<float>(), n);
  return y;
}
"""
CPP_SOURCE = "torch::Tensor square(torch::Tensor x);"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--elements", type=int, default=1 << 28, help="elements of x (default 2^28, 1 GiB)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--build-dir", help="where load_inline builds (default: a temporary folder)")
    p.add_argument("--markdown", help="write the cold-L2 table here (for the README)")
    a = p.parse_args()
    if a.elements < 1 or a.reps < 1:
        print("torch_square.py: error: --elements and --reps at least 1", file=sys.stderr)
        return 2
    torch = torch_gpt2.cuda_torch("torch_square.py")
    if torch is None:
        return 2
    from torch.utils.cpp_extension import load_inline
    build = a.build_dir or tempfile.mkdtemp(prefix="lab_square_")
    os.makedirs(build, exist_ok=True)
    print("building the square kernel with load_inline in %s ..." % build, flush=True)
    ext = load_inline(name="lab_square_inline", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                      functions=["square"], extra_cuda_cflags=["-O2"], build_directory=build, verbose=False)
    x = torch.empty(a.elements, device="cuda").uniform_(-10, 10)
    y = ext.square(x)
    wrong = (y != x * x).sum().item()
    print("check: %s (%d of %d elements differ from x * x)" % ("PASS" if not wrong else "FAIL", wrong, x.numel()))
    if wrong:
        return 1

    fns = {"load_inline square": ext.square, "x * x": lambda t: t * t, "x ** 2": lambda t: t ** 2,
           "torch.square": torch.square}
    # The lecture's view: the profiler's table, one call each after warm-up.
    from torch.profiler import ProfilerActivity, profile
    for name, fn in fns.items():
        for _ in range(5):
            fn(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn(x)
            torch.cuda.synchronize()
        print("\n== %s ==" % name)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=6))

    # The lab's view: cold L2, medians, against the copy bandwidth measured here.
    flush = l2_flush_buffer(torch)

    def median_ms(fn):
        t = time_call(torch, fn, flush, a.reps, warmup=1)
        return t.median_ms, t.min_ms, t.max_ms

    dst = torch.empty_like(x)
    copy_ms = median_ms(lambda: dst.copy_(x))[0]
    nbytes = 2 * 4 * x.numel()
    print("cold L2, %d elements, median of %d calls; copy of the same bytes: %.3f ms (%.0f GB/s)"
          % (x.numel(), a.reps, copy_ms, nbytes / copy_ms / 1e6))
    print("%-20s %10s %10s %10s %10s %9s" % ("", "median ms", "min", "max", "GB/s", "% copy"))
    md = ["Measured by `tools/torch_square.py` on %s, torch %s: %d float32 elements, cold L2, median of %d "
          "calls; the copy rate is a device-to-device copy of the same bytes, %.3f ms (%.0f GB/s)."
          % (torch.cuda.get_device_name(0), torch.__version__, x.numel(), a.reps, copy_ms, nbytes / copy_ms / 1e6),
          "", "| square | median ms | min | max | GB/s | share of the copy rate |", "|---|---|---|---|---|---|"]
    for name, fn in fns.items():
        med, lo, hi = median_ms(lambda fn=fn: fn(x))
        print("%-20s %10.3f %10.3f %10.3f %10.0f %8.1f%%" % (name, med, lo, hi, nbytes / med / 1e6,
                                                            100 * copy_ms / med))
        md.append("| `%s` | %.3f | %.3f | %.3f | %.0f | %.1f%% |" % (name, med, lo, hi, nbytes / med / 1e6,
                                                                   100 * copy_ms / med))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
