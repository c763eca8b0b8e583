"""cuda-perf-lab's kernels as PyTorch operators.

The operators live in torch.ops.cuda_perf_lab (registered by the compiled extension, with autograd
and fake implementations registered here, so that torch.compile traces them without a graph
break); the functions below are their autograd-aware front ends:

    layer_norm(x, weight, bias)            LayerNorm over the last dimension (eps 1e-5)
    gelu(x), swish(x)                      the erf-form GELU, and SiLU; float32, bfloat16 or float16
    cross_entropy(logits, labels, ignore_index=-100, reduction="mean", label_smoothing=0.0)
                                           F.cross_entropy over (..., C) logits (classes last)
    weighted_sum(x, w)                     x @ w: a dot product per row of x's last dimension
    attention(q, k, v, causal, scale=None) fused (flash) attention, batch x heads x seq x head_dim
                                           (head sizes up to 256 in bf16 and fp16, 128 in float32;
                                           others than 16/32/64/128/256 padded);
                                           bf16 or fp16 in, the same out (bf16 on sm_90: the Hopper kernels)
    FlatAdamW(params, lr=1e-3, ...)        torch.optim.AdamW over one flat buffer: one launch a step

Each takes `variant=` (the chapter 3 operators: the lab program whose kernels run, e.g.
"baseline_layernorm"; `variants("layernorm")` lists them) or `precision=` (attention: "fp32",
"3xtf32", "bf16" or "fp16"). Inputs are CUDA tensors, float32 (bf16 q, k, v for the bf16 attention; gelu
and swish bf16 too, through the variant's "_bf16" program), of
any strides (one that is not dense, or not 16-byte aligned, is copied first: the kernels read
dense, aligned rows; on sm_90 the 16-bit attention reads q, k and v made as a GPT-2 block makes
them, (B, T, H, D) rows transposed, as they lie); a wrong one raises ValueError or TypeError naming it.

Build and install from the repository's root: python3 -m pip install --no-build-isolation ./python
"""
import torch  # noqa: F401  (first: the extension links libc10 and libtorch, which importing torch loads)

from . import _C  # noqa: F401  (registers torch.ops.cuda_perf_lab.*)
from .ops import attention, cross_entropy, gelu, layer_norm, swish, weighted_sum  # noqa: F401
from .optim import FlatAdamW  # noqa: F401

LN_EPS = 1e-5


def variants(topic):
    """The lab programs compiled into the extension for a chapter 3 topic ("layernorm",
    "layernorm_backward", "gelu", "swish", "cross_entropy", "weighted_sum", ... and their "_backward")."""
    return list(_C.variants(topic))


def clear_cache():
    """Frees the variants' per-shape state (their scratch buffers)."""
    _C.clear_cache()


__all__ = ["FlatAdamW", "attention", "cross_entropy", "gelu", "layer_norm", "swish", "weighted_sum", "variants",
           "clear_cache", "LN_EPS"]
