#!/usr/bin/env python3
"""A Markdown table of lab programs timed by hand: each program's own Google Benchmark JSON
(PROGRAM --shape S ... --no-check --benchmark_format=json > FILE), one or more runs a program, the
mean of its runs' medians at each shape, beside PyTorch's times at the same shapes from a
tools/torch_reference.py --json run of the same session. For runs too short for compare (one
device call), where compare's statistics are not wanted; its first line names the command, so
tools/update_readme_results.py --section takes it.

  python3 tools/gbench_table.py --torch torch.json --torch-impl "SDPA bf16" \\
      --run step8=t_overlap_1.json --run step8=t_overlap_2.json --run step10=t_persistent_1.json \\
      --baseline step8 --markdown table.md

Columns: each label's microseconds (the fastest in bold), PyTorch's, the last label's speedup over
--baseline, and PyTorch's time over the last label's (above 1: the lab is faster). Exit status 2
with one line for a bad argument or an unreadable file."""
import argparse
import collections
import json
import os
import sys

UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def medians(path):
    """{shape: microseconds} of one Google Benchmark JSON run of a lab program."""
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            out[b["name"].split("/")[2]] = b["real_time"] * UNITS[b["time_unit"]]
    return out


def table(runs, torch_rows, impl, baseline, command):
    """runs: [(label, {shape: us})] in column order; torch_rows: torch_reference.py's results."""
    per = collections.OrderedDict()
    for label, m in runs:
        for shape, us in m.items():
            per.setdefault(label, collections.defaultdict(list))[shape].append(us)
    labels = list(per)
    if baseline not in per:
        raise ValueError("--baseline %s is not a --run label (%s)" % (baseline, ", ".join(labels)))
    last = labels[-1]
    ref = {r["shape"]: r["ms"] * 1000 for r in torch_rows if r["implementation"] == impl and r.get("ms")}
    shapes = sorted({s for m in per.values() for s in m}, key=lambda s: [int(x) for x in s.split("x")])
    lines = ["Measured by `%s`." % command, "",
             "| shape | %s | %s us | %s against %s | %s's time over %s's |" % (
                 " | ".join("%s us" % l for l in labels), impl, last, baseline, impl, last),
             "| --- |" + " ---: |" * (len(labels) + 3)]
    for shape in shapes:
        if not all(shape in per[l] for l in labels) or shape not in ref:
            raise ValueError("shape %s is not in every run and the PyTorch file" % shape)
        us = {l: sum(per[l][shape]) / len(per[l][shape]) for l in labels}
        best = min(us.values())
        cells = [("**%.4g**" if us[l] == best else "%.4g") % us[l] for l in labels]
        lines.append("| %s | %s | %.4g | %.2fx | %.2f |" % (shape, " | ".join(cells), ref[shape],
                                                           us[baseline] / us[last], ref[shape] / us[last]))
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="gbench_table", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=FILE",
                    help="a program's Google Benchmark JSON, under a column label (repeatable; runs of a label are averaged)")
    ap.add_argument("--torch", required=True, metavar="FILE", help="tools/torch_reference.py --json of the same session")
    ap.add_argument("--torch-impl", required=True, help='its implementation to set beside, e.g. "SDPA bf16"')
    ap.add_argument("--baseline", required=True, help="the label the last label's speedup is over")
    ap.add_argument("--markdown", metavar="FILE", help="write the table here (else print it)")
    a = ap.parse_args(argv)
    try:
        runs = []
        for r in a.run:
            label, sep, path = r.partition("=")
            if not sep or not label or not path:
                raise ValueError("--run %s: expected LABEL=FILE" % r)
            runs.append((label, medians(path)))
        torch_rows = json.load(open(a.torch))["results"]
        command = "tools/gbench_table.py " + " ".join(
            ["--run %s=%s" % (l, os.path.basename(p)) for l, _, p in (r.partition("=") for r in a.run)] +
            ["--torch %s" % os.path.basename(a.torch), '--torch-impl "%s"' % a.torch_impl, "--baseline %s" % a.baseline])
        md = table(runs, torch_rows, a.torch_impl, a.baseline, command)
    except (OSError, ValueError, KeyError) as e:
        print("gbench_table: %s" % e, file=sys.stderr)
        return 2
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)
    else:
        sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
