"""The attributes the convolution and pooling handlers share (ops_conv.py, ops_conv_variants.py):
the element-type check, strides/dilations per spatial dim, auto_pad resolved to explicit pads
(SAME_UPPER/SAME_LOWER: the output is ceil(in / stride), the odd unit at the end or the start;
VALID: none), the kernel from the weight (a kernel_shape attribute must agree), and `conv_args`, a
Conv-like node's (strides, pads, dilations, group) checked against its input and weight. Each
refusal names the node (`ctx.unsupported`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fusebind.api import nn
from fusebind.onnx.registry import NodeContext

FLOATS = ("float16", "float32", "float64")
MAXPOOL_INTS = ("int8", "uint8")


def check_dtype(ctx: NodeContext, x: Any, ints: Sequence[str] = ()) -> None:
    """x's element type is one the op's spec lists (bfloat16 from opset 22, `ints` from 12)."""
    name = np.dtype(x.dtype).name
    allowed = list(FLOATS) + (["bfloat16"] if ctx.opset >= 22 else []) + (list(ints) if ctx.opset >= 12 else [])
    if name not in allowed:
        raise ctx.unsupported(f"an input of element type {name} (the op takes {', '.join(allowed)})")


def spatial(ctx: NodeContext, x: Any) -> int:
    if x.ndim < 3:
        raise ctx.unsupported(f"an input of shape {tuple(x.shape)}: the op needs (N, C, *spatial) with at "
                              "least one spatial dim")
    return x.ndim - 2


def attr_ints(ctx: NodeContext, name: str, d: int, default: int) -> tuple[int, ...]:
    v = ctx.attr(name)
    if v is None:
        return (default,) * d
    v = tuple(int(i) for i in v)
    if len(v) != d:
        raise ctx.unsupported(f"{name} {list(v)}: expected {d} entries, one per spatial dim")
    if any(i < 1 for i in v):
        raise ctx.unsupported(f"{name} {list(v)}: every entry must be at least 1")
    return v


def auto_pads(ctx: NodeContext, ins: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
               dilations: Sequence[int]) -> list[int]:
    """The explicit pads (lo..., hi...) of the node: its auto_pad resolved (SAME_*: the output is
    ceil(in / stride), the odd unit at the end for SAME_UPPER, at the start for SAME_LOWER; VALID:
    none), else its pads attribute (none when absent)."""
    d = len(ins)
    mode = ctx.attr("auto_pad", "NOTSET")
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        lo, hi = [], []
        for n, k, s, dl in zip(ins, kernel, strides, dilations):
            total = max(0, (-(-n // s) - 1) * s + dl * (k - 1) + 1 - n)
            small, big = total // 2, total - total // 2
            lo.append(small if mode == "SAME_UPPER" else big)
            hi.append(big if mode == "SAME_UPPER" else small)
        return lo + hi
    if mode == "VALID":
        return [0] * (2 * d)
    if mode != "NOTSET":
        raise ctx.unsupported(f"auto_pad {mode!r} (the spec has NOTSET, SAME_UPPER, SAME_LOWER, VALID)")
    return explicit_pads(ctx, d)


def explicit_pads(ctx: NodeContext, d: int) -> list[int]:
    """The pads attribute (lo..., hi...), none when absent."""
    pads = ctx.attr("pads")
    if pads is None:
        return [0] * (2 * d)
    pads = [int(p) for p in pads]
    if len(pads) != 2 * d:
        raise ctx.unsupported(f"pads {pads}: expected {2 * d} entries (begin and end of each spatial dim)")
    if any(p < 0 for p in pads):
        raise ctx.unsupported(f"pads {pads}: negative pads")
    return pads


def weight_kernel(ctx: NodeContext, w: Any, d: int) -> tuple[int, ...]:
    """The weight's spatial shape; a kernel_shape attribute must agree with it."""
    kernel = tuple(int(k) for k in w.shape[2:])
    given = ctx.attr("kernel_shape")
    if len(kernel) != d:
        raise ctx.unsupported(f"a weight of shape {tuple(w.shape)} for an input with {d} spatial dims")
    if given is not None and tuple(int(k) for k in given) != kernel:
        raise ctx.unsupported(f"kernel_shape {list(given)} differs from the weight's spatial shape {list(kernel)}")
    return kernel


def pool_kernel(ctx: NodeContext, d: int) -> tuple[int, ...]:
    if ctx.attr("kernel_shape") is None:
        raise ctx.unsupported("a pooling without its kernel_shape attribute")
    return attr_ints(ctx, "kernel_shape", d, 1)


def dims(x: Any) -> tuple[int, ...]:
    return tuple(int(n) for n in x.shape)


# --------------------------------------------------------------------------- convolutions


def conv_args(ctx: NodeContext, x: Any, w: Any) -> tuple[tuple[int, ...], list[int], tuple[int, ...], int]:
    """(strides, pads, dilations, group) of a Conv-like node, checked against x and w."""
    d = spatial(ctx, x)
    kernel = weight_kernel(ctx, w, d)
    strides, dilations = attr_ints(ctx, "strides", d, 1), attr_ints(ctx, "dilations", d, 1)
    group = int(ctx.attr("group", 1))
    c, f = dims(x)[1], dims(w)[0]
    if group < 1 or c % group or f % group or dims(w)[1] * group != c:
        raise ctx.unsupported(f"an input of {c} channels, a weight of shape {dims(w)} and group {group} do "
                              "not agree (the weight must be (F, C / group, *kernel), F divisible by group)")
    pads = auto_pads(ctx, dims(x)[2:], kernel, strides, dilations)
    if any(nn.out_size(n, k, s, dl, lo, hi) < 1 for n, k, s, dl, lo, hi in
           zip(dims(x)[2:], kernel, strides, dilations, pads[:d], pads[d:])):
        raise ctx.unsupported(f"a kernel {list(kernel)} (dilations {list(dilations)}) larger than the padded "
                              f"input {list(dims(x)[2:])}")
    return strides, pads, dilations, group


__all__ = ["FLOATS", "MAXPOOL_INTS", "attr_ints", "auto_pads", "check_dtype", "conv_args", "dims", "explicit_pads",
           "pool_kernel", "spatial", "weight_kernel"]
