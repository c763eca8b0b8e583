#!/usr/bin/env python3
"""Runs the bridge's tests (pytest) for CTest (bridge.pytest), from any directory. Without pytest,
says so on one line that CTest reads as a skip; the tests themselves skip without PyTorch, CUDA
or the built package (conftest.py), naming what is missing."""
import os
import sys

try:
    import pytest
except ImportError:
    print("bridge tests skipped: pytest is not installed (python3 -m pip install pytest)")
    sys.exit(0)

rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", os.path.dirname(os.path.abspath(__file__))])
# 5: nothing collected, which is what a module-level skip (no PyTorch, no GPU) leaves; its reason is
# printed above, and CTest reads the closing line as a skip.
sys.exit(0 if rc == 5 else int(rc))
