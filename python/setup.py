"""Builds cuda_perf_lab, the lab's kernels as PyTorch operators, from the lab's own sources.

From the repository's root, on a machine with PyTorch (built for CUDA) and the CUDA toolkit:

    python3 -m pip install --no-build-isolation ./python

(--no-build-isolation: the build needs the PyTorch already installed, not a fresh one.) The GPU
architectures are PyTorch's choice: TORCH_CUDA_ARCH_LIST="8.0;9.0" picks them; by default, those of
the GPUs present, except that a machine whose GPUs are all sm_90 (H100, H200) gets "9.0a": the
bf16 attention's Hopper kernels (python/csrc/bridge_attention_hopper.cu) use sm_90a's own
instructions (wgmma, setmaxnreg), so they are built, and defined LAB_SM90A, only when every
architecture listed is 9.0a; otherwise the package runs its mma.sync kernels there.
MAX_JOBS sets the parallel compiles.
"""
import os
import re

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sources():
    with open(os.path.join(HERE, "sources.txt")) as f:
        lines = (line.strip() for line in f)
        return [os.path.join(ROOT, line) for line in lines if line and not line.startswith("#")]


# C++20 as the lab is written; PyTorch's defaults turn off the implicit bf16 and half conversions,
# which the lab's kernels use, so they are turned back on.
NVCC = ["-O3", "-std=c++20", "-lineinfo", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
        "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__"]


def arch_list():
    """TORCH_CUDA_ARCH_LIST as set, or "9.0a" on a machine whose GPUs are all sm_90 (set for
    PyTorch's builder too), or None (PyTorch's default)."""
    given = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if given:
        return given
    import torch

    if torch.cuda.is_available():
        caps = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
        if caps == {(9, 0)}:
            os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
            return "9.0a"
    return None


ARCHS = arch_list()
if ARCHS and all(a.replace("+PTX", "") == "9.0a" for a in re.split(r"[ ;]+", ARCHS) if a):
    NVCC.append("-DLAB_SM90A")

setup(
    name="cuda_perf_lab",
    version="0.1.0",
    description="cuda-perf-lab's kernels (LayerNorm, GELU, Swish, cross-entropy, the weighted sum, fused attention) as "
                "PyTorch operators",
    packages=["cuda_perf_lab"],
    ext_modules=[
        CUDAExtension(
            name="cuda_perf_lab._C",
            sources=sources(),
            include_dirs=[os.path.join(ROOT, d) for d in ("common", "jit", "ch03_kernels", "ch04_compile_vs_fused",
                                                          "python/csrc")],
            extra_compile_args={"cxx": ["-O3", "-std=c++20"], "nvcc": NVCC},
            libraries=["cublas"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
)
