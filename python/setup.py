"""Builds cuda_perf_lab, the lab's kernels as PyTorch operators, from the lab's own sources.

From the repository's root, on a machine with PyTorch (built for CUDA) and the CUDA toolkit:

    python3 -m pip install --no-build-isolation ./python

(--no-build-isolation: the build needs the PyTorch already installed, not a fresh one.) The GPU
architectures are PyTorch's choice: TORCH_CUDA_ARCH_LIST="9.0" picks them; by default, those of the
GPUs present. MAX_JOBS sets the parallel compiles.
"""
import os

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
