"""Shared by the lab's plotting scripts (plot_compare.py, plot_roofline.py, plot_sweep.py): the
command line, the checks before anything is drawn, the error lines, and saving a figure as PNG and
SVG. Not a program of its own."""
import argparse
import os
import sys


def save(plt, fig, out, stem, dpi=None):
    """Writes fig as out/stem.png and out/stem.svg, closes it, returns the two paths."""
    fig.tight_layout()
    paths = [os.path.join(out, "%s.%s" % (stem, ext)) for ext in ("png", "svg")]
    for path in paths:
        fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return paths


def main(prog, doc, what, load, plot):
    """Reads the JSON named on the command line with load(path), draws it with plot(data, out),
    prints the files written; exit status 0, or 2 with one line naming the problem."""
    ap = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="a file written by %s" % what)
    ap.add_argument("--out", default="plots", help="folder for the images (default plots/)")
    a = ap.parse_args()
    try:
        data = load(a.json)
    except (OSError, ValueError, KeyError) as err:
        print("%s: error: %s" % (prog, err), file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("%s: error: matplotlib is not installed (apt-get install python3-matplotlib)" % prog, file=sys.stderr)
        return 2
    for path in plot(data, a.out):
        print(path)
    return 0
