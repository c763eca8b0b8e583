#!/usr/bin/env python3
"""Does the harness tell the truth? Times one kernel of a lab program two ways and compares them:
the program's own median (CUDA events, cold cache) and Nsight Compute's gpu__time_duration.sum
(--clock-control none, caches flushed before every kernel, as the lab's cold mode does).

  tools/ncu_time.py PROGRAM KERNEL_REGEX SHAPE [--launches N] [--out DIR]

Example:
  tools/ncu_time.py build/ch01_basics/optimized_coalescing transpose_tiled_padded 8192x8192
"""
import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys

UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3}
GB_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def find_ncu():
    path = shutil.which("ncu")
    if path:
        return path
    for root in ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute"):
        for dirpath, _, files in os.walk(root):
            if "ncu" in files:
                return os.path.join(dirpath, "ncu")
    sys.exit("ncu_time: Nsight Compute (ncu) not found")


def program_median_seconds(program, shape, reps):
    cmd = [program, "--no-check", "--shape", shape, "--benchmark_format=json",
           f"--benchmark_repetitions={reps}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ncu_time: {' '.join(cmd)} exited {out.returncode}:\n{out.stderr}")
    data = json.loads(out.stdout)
    samples = [b["real_time"] * GB_UNITS[b["time_unit"]] for b in data["benchmarks"]
               if b.get("run_type") == "iteration"]
    return statistics.median(samples), samples


def ncu_seconds(ncu, program, kernel, shape, launches, report):
    cmd = [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "-k", f"regex:{kernel}",
           "--launch-count", str(launches), "--csv",
           program, "--no-check", "--shape", shape, f"--benchmark_repetitions={launches}",
           "--benchmark_format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if report:
        with open(report, "w") as f:
            f.write(out.stdout)
            f.write(out.stderr)
    if out.returncode != 0:
        sys.exit(f"ncu_time: ncu exited {out.returncode}:\n{out.stderr[-2000:]}")
    # ncu's CSV rows follow the program's own output; keep the lines that look like its table.
    lines = [l for l in out.stdout.splitlines() if l.startswith('"')]
    times = []
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            value = float(row["Metric Value"].replace(",", ""))
            times.append(value * UNITS[row["Metric Unit"]])
    if not times:
        sys.exit("ncu_time: ncu reported no gpu__time_duration.sum rows (kernel regex wrong?)")
    return statistics.median(times), times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("program")
    ap.add_argument("kernel", help="regular expression for the kernel's name")
    ap.add_argument("shape")
    ap.add_argument("--launches", type=int, default=20, help="kernel launches profiled by ncu (default 20)")
    ap.add_argument("--repetitions", type=int, default=5, help="program samples (default 5)")
    ap.add_argument("--out", help="folder for the raw ncu output")
    a = ap.parse_args()
    report = None
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        report = os.path.join(a.out, "ncu_" + os.path.basename(a.program) + ".txt")
    prog, samples = program_median_seconds(a.program, a.shape, a.repetitions)
    ncu, ntimes = ncu_seconds(find_ncu(), a.program, a.kernel, a.shape, a.launches, report)
    diff = (prog - ncu) / ncu * 100
    print(f"{os.path.basename(a.program)} {a.shape}: program median {prog * 1e6:.2f} us "
          f"({len(samples)} samples), ncu gpu__time_duration.sum median {ncu * 1e6:.2f} us "
          f"({len(ntimes)} launches): program is {diff:+.1f}% off ncu "
          f"({'within' if abs(diff) <= 5 else 'OUTSIDE'} 5%)")
    return 0 if abs(diff) <= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
