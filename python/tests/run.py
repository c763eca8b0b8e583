#!/usr/bin/env python3
"""Runs the bridge's tests (pytest) for CTest (bridge.pytest), from any directory. Where something
they need is missing, says so on one line that CTest reads as a skip, naming everything missing
(pytest, PyTorch, a CUDA device PyTorch sees, the built package); the tests themselves also skip
without them (conftest.py)."""
import glob
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def missing():
    """What the bridge's tests need and this machine lacks, in words (empty: nothing)."""
    out = []
    if importlib.util.find_spec("pytest") is None:
        out.append("pytest is not installed (python3 -m pip install pytest)")
    if importlib.util.find_spec("torch") is None:
        out.append("PyTorch is not installed")
    else:
        import torch

        if not torch.cuda.is_available():
            out.append("PyTorch sees no CUDA device")
    python_dir = os.path.dirname(HERE)
    built_in_place = glob.glob(os.path.join(python_dir, "cuda_perf_lab", "_C*.so"))
    if not built_in_place:
        spec = importlib.util.find_spec("cuda_perf_lab")
        installed = spec is not None and spec.origin and not spec.origin.startswith(python_dir)
        if not installed:
            out.append("cuda_perf_lab is not built (python3 -m pip install --no-build-isolation ./python)")
    return out


def main():
    lacking = missing()
    if lacking:
        print("bridge tests skipped: " + "; ".join(lacking))
        return 0
    import pytest

    rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", HERE])
    # 5: nothing collected, which is what a module-level skip leaves; its reason is printed above,
    # and CTest reads the closing line as a skip.
    return 0 if rc == 5 else int(rc)


if __name__ == "__main__":
    sys.exit(main())
