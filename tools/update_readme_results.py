#!/usr/bin/env python3
"""Puts a results table that compare wrote (--markdown FILE) into a chapter README, between the
markers <!-- results:begin --> and <!-- results:end -->, so that no number in a README is typed
by hand.

  tools/update_readme_results.py ch01_basics/README.md results.md
"""
import argparse
import sys

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
STAMP = "Measured by `compare`"


def update(readme_text: str, results_text: str) -> str:
    if STAMP not in results_text:
        raise ValueError("the results file was not written by compare --markdown (no '%s' line)" % STAMP)
    b, e = readme_text.find(BEGIN), readme_text.find(END)
    if b < 0 or e < 0 or e < b:
        raise ValueError("the README has no %s ... %s markers" % (BEGIN, END))
    return readme_text[: b + len(BEGIN)] + "\n" + results_text.strip() + "\n" + readme_text[e:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("readme")
    ap.add_argument("results", help="Markdown written by compare --markdown")
    a = ap.parse_args()
    try:
        with open(a.readme) as f:
            readme = f.read()
        with open(a.results) as f:
            results = f.read()
        new = update(readme, results)
    except (OSError, ValueError) as err:
        print("update_readme_results: error: %s" % err, file=sys.stderr)
        return 2
    with open(a.readme, "w") as f:
        f.write(new)
    print("update_readme_results: %s updated from %s" % (a.readme, a.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
