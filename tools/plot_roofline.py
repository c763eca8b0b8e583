#!/usr/bin/env python3
"""Plots the roofline that ch02_profiling/demo_roofline measured (its --json file), with
matplotlib, as PNG and SVG: the memory slope, the compute ceilings (FP32 FMA, cuBLAS SGEMM, TF32
and BF16 tensor cores) with their ridge points, and every placed kernel. Kernels that move data
without arithmetic (intensity 0) cannot sit on a log axis: they are listed in the key beside it.

  tools/plot_roofline.py roofline.json --out plots/     (writes plots/roofline.png and .svg)
"""
import json
import os
import sys

import plotting


def load(path):
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("tool") != "cuda-perf-lab roofline":
        raise ValueError("%s was not written by demo_roofline --json" % path)
    c = data["ceilings"]
    if not (c.get("copy_gbs", 0) > 0 and c.get("fp32_tflops", 0) > 0):
        raise ValueError("%s has no measured ceilings" % path)
    return data


def plot(data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out, exist_ok=True)
    c = data["ceilings"]
    bw = c["copy_gbs"] * 1e9  # bytes/s
    ceilings = [("FP32 FMA", c["fp32_tflops"]), ("cuBLAS SGEMM", c.get("sgemm_tflops", 0)),
                ("TF32 tensor (cuBLAS)", c.get("tf32_tflops", 0)), ("BF16 tensor (cuBLAS)", c.get("bf16_tflops", 0))]
    ceilings = [(n, v) for n, v in ceilings if v and v > 0]
    points = [p for p in data["points"] if p["flop_per_byte"] > 0 and p["tflops"] > 0]
    flat = [p for p in data["points"] if not (p["flop_per_byte"] > 0 and p["tflops"] > 0)]
    xs = [p["flop_per_byte"] for p in points] + [v * 1e12 / bw for _, v in ceilings]
    lo, hi = min(xs + [0.05]) / 4, max(xs + [1000]) * 4
    fig = plt.figure(figsize=(14, 6.5))
    ax = fig.add_axes((0.06, 0.12, 0.5, 0.8))
    top = max(v for _, v in ceilings)
    # Memory slope up to the highest ceiling, then each ceiling from its ridge point on.
    ax.plot([lo, top * 1e12 / bw], [lo * bw / 1e12, top], color="black", lw=1.5,
            label="copy bandwidth %.0f GB/s" % c["copy_gbs"])
    for i, (name, v) in enumerate(ceilings):
        ridge = v * 1e12 / bw
        ax.plot([ridge, hi], [v, v], lw=1.5, color="C%d" % i, label="%s %.1f TFLOP/s (ridge %.1f)" % (name, v, ridge))
        ax.axvline(ridge, color="C%d" % i, lw=0.5, ls=":")
    # Points are numbered on the plot and named in the key beside it: many kernels share an
    # intensity (every reduction is at 0.25), and their names would overlap.
    seen = {}
    key = []
    for n, p in enumerate(points, 1):
        k = seen.get(round(p["flop_per_byte"], 6), 0)
        seen[round(p["flop_per_byte"], 6)] = k + 1
        ax.plot(p["flop_per_byte"], p["tflops"], "o", ms=4, color="C%d" % (len(ceilings) + 1))
        ax.annotate(str(n), (p["flop_per_byte"], p["tflops"]), textcoords="offset points", xytext=(4 + 9 * (k % 4), 2),
                    fontsize=7)
        key.append("%2d  %s: %.3g TFLOP/s, %.0f GB/s, %.0f%% of roof" % (n, p["name"], p["tflops"], p["gbs"],
                                                                      p["percent_of_roof"]))
    for p in flat:
        key.append("--  %s: no FLOPs, %.0f GB/s, %.0f%% of copy bandwidth" % (p["name"], p["gbs"], p["percent_of_roof"]))
    fig.text(0.58, 0.92, "\n".join(key), fontsize=7, va="top", family="monospace")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of memory traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("Roofline of %s" % data.get("device", "?"), fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", lw=0.3)
    return plotting.save(plt, fig, out, "roofline", dpi=130)


if __name__ == "__main__":
    sys.exit(plotting.main("plot_roofline", __doc__, "demo_roofline --json", load, plot))
