#!/usr/bin/env python3
"""Plots the roofline that ch02_profiling/demo_roofline measured (its --json file), with
matplotlib, as PNG and SVG: the memory slope, the compute ceilings (FP32 FMA, cuBLAS SGEMM, TF32
and BF16 tensor cores) with their ridge points, and every placed kernel. Kernels that move data
without arithmetic (intensity 0) cannot sit on a log axis: they are listed under the plot.

  tools/plot_roofline.py roofline.json --out plots/     (writes plots/roofline.png and .svg)
"""
import argparse
import json
import os
import sys


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
    fig, ax = plt.subplots(figsize=(9, 6))
    top = max(v for _, v in ceilings)
    # Memory slope up to the highest ceiling, then each ceiling from its ridge point on.
    ax.plot([lo, top * 1e12 / bw], [lo * bw / 1e12, top], color="black", lw=1.5,
            label="copy bandwidth %.0f GB/s" % c["copy_gbs"])
    for i, (name, v) in enumerate(ceilings):
        ridge = v * 1e12 / bw
        ax.plot([ridge, hi], [v, v], lw=1.5, color="C%d" % i, label="%s %.1f TFLOP/s (ridge %.1f)" % (name, v, ridge))
        ax.axvline(ridge, color="C%d" % i, lw=0.5, ls=":")
    for p in points:
        ax.plot(p["flop_per_byte"], p["tflops"], "o", color="C%d" % (len(ceilings) + 1))
        ax.annotate("%s (%.0f%%)" % (p["name"], p["percent_of_roof"]), (p["flop_per_byte"], p["tflops"]),
                    textcoords="offset points", xytext=(5, -10), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of memory traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("Roofline of %s" % data.get("device", "?"), fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", lw=0.3)
    if flat:
        text = "no FLOPs (bandwidth only): " + "; ".join("%s %.0f GB/s (%.0f%%)" % (p["name"], p["gbs"], p["percent_of_roof"]) for p in flat)
        fig.text(0.01, 0.01, text, fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.04 if flat else 0, 1, 1))
    written = []
    for ext in ("png", "svg"):
        path = os.path.join(out, "roofline." + ext)
        fig.savefig(path, dpi=130)
        written.append(path)
    plt.close(fig)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="a file written by demo_roofline --json")
    ap.add_argument("--out", default="plots", help="folder for the images (default plots/)")
    a = ap.parse_args()
    try:
        data = load(a.json)
    except (OSError, ValueError, KeyError) as err:
        print("plot_roofline: error: %s" % err, file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot_roofline: error: matplotlib is not installed (apt-get install python3-matplotlib)", file=sys.stderr)
        return 2
    for path in plot(data, a.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
