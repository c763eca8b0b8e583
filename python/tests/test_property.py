"""The seeded property test (issue #43 item 7): every operator against PyTorch over random shapes
(1 to 100003 classes, sizes off every tile, empty dimensions), leading dimensions, strides (dense,
transposed, every other element, 4 bytes off alignment; attention's q, k, v as views of one
(B, T, 3H, D) buffer), dtypes (float32; bf16 for attention) and arguments (ignore_index, the three
reductions, label smoothing, int32 and int64 labels, causal or not, the three attention
precisions), forward and every gradient, plus the bad inputs (a CPU tensor, a wrong dtype or shape,
NaN, a label out of range, a head size the kernels do not take): 2050 cases from fixed seeds, the
cases and their checks in property_cases.py.

Each operator's cases run in a child process, so that a case that faults the GPU fails its test
naming the case instead of ending the run. LAB_PROPERTY_SCALE=0.1 runs a tenth of the cases (a
quick look); the test's figure is the full count.
"""
import os
import subprocess
import sys

import pytest

from conftest import MISSING

if MISSING:
    pytest.skip(MISSING, allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {"layer_norm": 300, "gelu": 200, "swish": 200, "cross_entropy": 500, "weighted_sum": 250, "attention": 400,
         "bad_inputs": 200}
SCALE = float(os.environ.get("LAB_PROPERTY_SCALE", "1"))


def run_child(args, expect_last, timeout=900):
    """Runs a child python with args; '' when it exited 0 with expect_last as its last line,
    otherwise what went wrong: its mismatch lines, or how it died and the case it was running."""
    p = subprocess.run([sys.executable] + args, capture_output=True, text=True, timeout=timeout, cwd=HERE)
    lines = p.stdout.splitlines()
    mismatches = [line for line in lines if line.startswith("MISMATCH")]
    if mismatches:
        return "%d mismatches:\n%s" % (len(mismatches), "\n".join(mismatches[:40]))
    if p.returncode != 0 or not lines or lines[-1] != expect_last:
        started = [line for line in lines if line.startswith("case ")][-1:]
        return "the child died (exit status %d) during %s\n%s" % (p.returncode, started or "its start",
                                                                   p.stderr[-4000:])
    return ""


@pytest.mark.parametrize("op", list(CASES))
def test_property(op):
    cases = max(1, round(CASES[op] * SCALE))
    why = run_child([os.path.join(HERE, "property_cases.py"), "--op", op, "--cases", str(cases)],
                    "%s: %d cases, 0 mismatches" % (op, cases))
    assert not why, why


def test_a_crashing_child_fails_naming_its_case():
    """The harness itself: a child that dies of a segmentation fault in case 3 is a failure that
    names case 3, not a pass and not a lost run."""
    crash = "import os, signal; print('case 3: gelu x (5,)', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    why = run_child(["-c", crash], "gelu: 4 cases, 0 mismatches")
    assert "died" in why and "case 3: gelu x (5,)" in why, why
    assert run_child(["-c", "print('gelu: 4 cases, 0 mismatches')"], "gelu: 4 cases, 0 mismatches") == ""
