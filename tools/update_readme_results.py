#!/usr/bin/env python3
"""Puts a results table that compare wrote (--markdown FILE) into a chapter README, between the
markers <!-- results:begin --> and <!-- results:end -->, so that no number in a README is typed
by hand. --section NAME uses the markers <!-- results:NAME:begin --> and <!-- results:NAME:end -->
instead, for a second table a chapter's demo or another tool wrote (its file starts "Measured by `").
--section programs takes the chapter's table of programs that `compare --list --chapter N --markdown
FILE` wrote (its file starts "Listed by `compare --list"); a CPU test fails when it is stale.

  tools/update_readme_results.py ch01_basics/README.md results.md
  tools/update_readme_results.py ch04_compile_vs_fused/attention/README.md attention.md --section attention
  tools/update_readme_results.py ch01_basics/README.md programs.md --section programs
"""
import argparse
import sys

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
STAMP = "Measured by `compare`"


def update(readme_text: str, results_text: str, section: str = "") -> str:
    begin, end = (BEGIN, END) if not section else ("<!-- results:%s:begin -->" % section,
                                                   "<!-- results:%s:end -->" % section)
    stamp = STAMP if not section else "Listed by `compare --list" if section == "programs" else "Measured by `"
    if stamp not in results_text:
        writer = ("compare --markdown" if not section else "compare --list --markdown" if section == "programs"
                  else "a demo's or a tool's --markdown")
        raise ValueError("the results file was not written by %s (no '%s' line)" % (writer, stamp))
    if "UNFINISHED:" in results_text.split("\n", 1)[0]:
        raise ValueError("the results file is from a run that had not finished (its first line says UNFINISHED: "
                         "compare wrote it after a round, and the run never rewrote it whole); run it again")
    b, e = readme_text.find(begin), readme_text.find(end)
    if b < 0 or e < 0 or e < b:
        raise ValueError("the README has no %s ... %s markers" % (begin, end))
    return readme_text[: b + len(begin)] + "\n" + results_text.strip() + "\n" + readme_text[e:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("readme")
    ap.add_argument("results", help="Markdown written by compare --markdown (or a demo's or a tool's, with --section)")
    ap.add_argument("--section", default="", help="the markers' name: <!-- results:NAME:begin -->")
    a = ap.parse_args()
    try:
        with open(a.readme) as f:
            readme = f.read()
        with open(a.results) as f:
            results = f.read()
        new = update(readme, results, a.section)
    except (OSError, ValueError) as err:
        print("update_readme_results: error: %s" % err, file=sys.stderr)
        return 2
    with open(a.readme, "w") as f:
        f.write(new)
    print("update_readme_results: %s updated from %s" % (a.readme, a.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
