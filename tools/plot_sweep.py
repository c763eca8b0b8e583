#!/usr/bin/env python3
"""Plots a sweep report (ch03_kernels/demo_sweep_report --json FILE) with matplotlib, as PNG and
SVG: for each operation, time against tensor dimension, one line per implementation and
batch x sequence (colour: the implementation; marker: batch x seq). Shapes that ran out of
memory (status OOM) are left out of the lines.

  sweep_<operation>.png/.svg

  python3 tools/plot_sweep.py sweep.json --out plots/
"""
import json
import os
import sys

import plotting

FIELDS = ("operation", "implementation", "program", "batch_size", "sequence_length", "tensor_dimension",
          "time_ms", "memory_mb", "inference_speed", "gpu_efficiency", "throughput_gbps", "status")


def load(path):
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        raise ValueError("%s is not a sweep report (a JSON array of records from demo_sweep_report)" % path)
    for i, r in enumerate(data):
        missing = [k for k in FIELDS if k not in r]
        if missing:
            raise ValueError("%s: record %d lacks %s: not a sweep report" % (path, i, ", ".join(missing)))
    return data


def plot(data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out, exist_ok=True)
    written = []
    markers = "osD^v<>pP*X"
    for op in sorted({r["operation"] for r in data}):
        recs = [r for r in data if r["operation"] == op and r["time_ms"] is not None]
        if not recs:
            continue
        programs = sorted({r["program"] for r in recs})
        tokens = sorted({(r["batch_size"], r["sequence_length"]) for r in recs})
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for pi, prog in enumerate(programs):
            for ti, (b, s) in enumerate(tokens):
                pts = sorted((r["tensor_dimension"], r["time_ms"]) for r in recs
                             if r["program"] == prog and (r["batch_size"], r["sequence_length"]) == (b, s))
                if not pts:
                    continue
                ax.plot([d for d, _ in pts], [t for _, t in pts], color=colours[pi % len(colours)],
                        marker=markers[ti % len(markers)], markersize=4, linewidth=1,
                        label="%s, %dx%d" % (prog, b, s))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tensor dimension")
        ax.set_ylabel("median time (ms, log scale)")
        ax.set_title("%s: time against dimension (label: program, batch x seq)" % op, fontsize=9)
        ax.grid(True, which="both", lw=0.3)
        ax.legend(fontsize=6, ncol=2)
        written += plotting.save(plt, fig, out, "sweep_" + op)
    return written


if __name__ == "__main__":
    sys.exit(plotting.main("plot_sweep", __doc__, "demo_sweep_report --json", load, plot))
