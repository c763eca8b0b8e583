#!/usr/bin/env python3
"""Plots a compare run (compare --json FILE) with matplotlib, as PNG and SVG:

  speedup_<folder>.png/.svg   per chapter: each final optimized variant's speedup over its
                              baseline, per shape, with the 95% confidence interval
  time_<topic>.png/.svg       per topic: median time against shape, one line per variant

  tools/plot_compare.py results.json --out plots/
"""
import json
import os
import sys

import plotting


def load(path):
    with open(path) as f:
        data = json.load(f)
    if data.get("tool") != "cuda-perf-lab compare":
        raise ValueError("%s is not a compare --json file" % path)
    return data


def final_rows(data):
    """The rows of each topic's last optimized variant against its baseline."""
    last = {}
    for p in data["programs"]:
        if p["role"] == "optimized":
            key = p["topic"]
            if key not in last or p["step"] >= last[key][1]:
                last[key] = (p["program"], p["step"])
    names = {v[0] for v in last.values()}
    return [r for r in data["rows"] if r["kind"] == "vs baseline" and r["variant"] in names and r["speedup"]]


def plot(data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out, exist_ok=True)
    written = []
    title = "%s, driver %s, %s" % (data["device"]["name"], data["device"]["driver"], data["date"])
    by_chapter = {}
    for r in final_rows(data):
        folder = next(p["folder"] for p in data["programs"] if p["program"] == r["variant"])
        by_chapter.setdefault(folder, []).append(r)
    for folder, rows in by_chapter.items():
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rows) + 2), 4))
        labels = ["%s\n%s" % (r["topic"], r["shape"]) for r in rows]
        values = [r["speedup"] for r in rows]
        lo = [r["speedup"] - r["ci95"][0] for r in rows]
        hi = [r["ci95"][1] - r["speedup"] for r in rows]
        ax.bar(range(len(rows)), values, yerr=[lo, hi], capsize=3, color="#4878cf")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("speedup over baseline (x)")
        ax.set_title("%s: final optimized vs baseline\n%s" % (folder, title), fontsize=9)
        written += plotting.save(plt, fig, out, "speedup_" + folder)
    topics = {}
    for p in data["programs"]:
        pts = [(s["shape"], s["median_s"]) for s in p["shapes"] if s.get("median_s")]
        if pts:
            topics.setdefault(p["topic"], []).append((p["program"], pts))
    for topic, progs in topics.items():
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, pts in progs:
            ax.plot([s for s, _ in pts], [t * 1e6 for _, t in pts], marker="o", label=name)
        ax.set_yscale("log")
        ax.set_xlabel("shape")
        ax.set_ylabel("median time (us, log scale)")
        ax.set_title("%s\n%s" % (topic, title), fontsize=9)
        ax.legend(fontsize=8)
        written += plotting.save(plt, fig, out, "time_" + topic)
    return written


if __name__ == "__main__":
    sys.exit(plotting.main("plot_compare", __doc__, "compare --json", load, plot))
