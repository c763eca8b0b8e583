"""The bridge's tests need PyTorch built for CUDA, a GPU it sees, and the package built (in place
by `python3 setup.py build_ext --inplace` in python/, or installed by pip): without any of them
every test is skipped, with the reason."""
import glob
import os
import sys

import pytest

# python/ goes first on the path only where the package was built in place there; otherwise its
# sources (without the compiled _C) would hide the package pip installed.
_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if glob.glob(os.path.join(_PYTHON_DIR, "cuda_perf_lab", "_C*.so")):
    sys.path.insert(0, _PYTHON_DIR)


def _missing():
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    try:
        import cuda_perf_lab  # noqa: F401
    except ImportError as e:
        return "cuda_perf_lab is not built (python3 -m pip install --no-build-isolation ./python): %s" % e
    return None


MISSING = _missing()


def pytest_collection_modifyitems(config, items):
    if MISSING:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=MISSING))
