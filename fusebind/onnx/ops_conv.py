"""Handlers of the convolutional ops: Conv, ConvTranspose, MaxPool (with its Indices output),
MaxUnpool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool and LRN, built on
`fusebind.api.nn` (conv, conv_transpose, max_pool, avg_pool), which owns the window arithmetic.
Importing it also registers ops_conv_variants (ConvInteger, QLinearConv, DeformConv).

What is ONNX's and not numpy's lives here: the attributes (auto_pad's SAME_UPPER/SAME_LOWER/VALID
resolved to explicit pads, kernel_shape taken from the weight when absent, ConvTranspose's
output_shape turned into pads), MaxPool's flattened argmax index (row- or column-major by
storage_order, counting batch and channel, never padding), LpPool's and LRN's decompositions into
prims (a power, a zero-padded window sum of strided slices, a root or a pow). Each handler is
numpy on its inputs, so a traced input builds prim IR and a constant one folds.

Element types: each op takes the float types its spec lists (float16, float32, float64; bfloat16
from opset 22) and MaxPool also int8/uint8 (opset 12); any other is a named refusal.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from fusebind.api import nn
from fusebind.onnx.conv_attrs import (MAXPOOL_INTS, attr_ints, auto_pads, check_dtype, conv_args, dims, explicit_pads,
                                      pool_kernel, spatial, weight_kernel)
from fusebind.onnx.registry import NodeContext, onnx_op
from fusebind.onnx.values import const_inputs, const_ints, is_const

@onnx_op("Conv")
def conv(ctx: NodeContext, x: Any, w: Any, b: Any = None) -> Any:
    check_dtype(ctx, x)
    strides, pads, dilations, group = conv_args(ctx, x, w)
    f, d = dims(w)[0], x.ndim - 2
    if group == 1 and f > 1 and is_const(w) and bool(np.all(np.asarray(w) == np.asarray(w)[:1])):
        # every filter the same (a constant-filled weight: the light models make theirs with
        # ConstantOfShape): one filter's convolution, broadcast over F. F times fewer flops, and every
        # channel bit-identical as in exact arithmetic (a BLAS gemm does not round all rows alike,
        # and a softmax over equal logits of 1e10 turns one ulp into a different answer)
        y = nn.conv(x, np.asarray(w)[:1], None, strides=strides, pads=pads, dilations=dilations)
        y = np.broadcast_to(y, (y.shape[0], f) + tuple(y.shape[2:]))
        return y if b is None else y + np.reshape(b, (1, f) + (1,) * d)
    return nn.conv(x, w, b, strides=strides, pads=pads, dilations=dilations, groups=group)


def _transpose_pads(ctx: NodeContext, ins: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                    dilations: Sequence[int], out_pad: Sequence[int]) -> list[int]:
    """ConvTranspose's pads (lo..., hi...; negative where the output is longer than the full
    transposed convolution): from output_shape or auto_pad SAME_* as the spec says (the total
    split in halves, the odd unit at the start unless SAME_UPPER), else the pads attribute."""
    d = len(ins)
    mode = ctx.attr("auto_pad", "NOTSET")
    shape = ctx.attr("output_shape")
    if mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ctx.unsupported(f"auto_pad {mode!r} (the spec has NOTSET, SAME_UPPER, SAME_LOWER, VALID)")
    if shape is None and mode in ("SAME_UPPER", "SAME_LOWER"):
        shape = [n * s for n, s in zip(ins, strides)]
    if shape is not None:
        shape = [int(v) for v in shape][-d:]  # (it may name N and C too)
        if len(shape) != d:
            raise ctx.unsupported(f"output_shape {list(ctx.attr('output_shape'))}: expected {d} spatial entries")
        lo, hi = [], []
        for i in range(d):
            total = strides[i] * (ins[i] - 1) + out_pad[i] + dilations[i] * (kernel[i] - 1) + 1 - shape[i]
            small, big = total // 2, total - total // 2
            lo.append(small if mode == "SAME_UPPER" else big)
            hi.append(big if mode == "SAME_UPPER" else small)
        return lo + hi
    if mode == "VALID" or ctx.attr("pads") is None:
        return [0] * (2 * d)
    pads = [int(p) for p in ctx.attr("pads")]
    if len(pads) != 2 * d or any(p < 0 for p in pads):
        raise ctx.unsupported(f"pads {pads}: expected {2 * d} non-negative entries")
    return pads


@onnx_op("ConvTranspose")
def conv_transpose(ctx: NodeContext, x: Any, w: Any, b: Any = None) -> Any:
    check_dtype(ctx, x)
    d = spatial(ctx, x)
    kernel = weight_kernel(ctx, w, d)
    strides, dilations = attr_ints(ctx, "strides", d, 1), attr_ints(ctx, "dilations", d, 1)
    group = int(ctx.attr("group", 1))
    c = dims(x)[1]
    if group < 1 or c % group or dims(w)[0] != c:
        raise ctx.unsupported(f"an input of {c} channels, a weight of shape {dims(w)} and group {group} do "
                              "not agree (the weight must be (C, F / group, *kernel), C divisible by group)")
    out_pad = ctx.attr("output_padding")
    out_pad = [0] * d if out_pad is None else [int(p) for p in out_pad][-d:]
    if len(out_pad) != d or any(p < 0 or (p >= s and p >= dl) for p, s, dl in zip(out_pad, strides, dilations)):
        raise ctx.unsupported(f"output_padding {list(ctx.attr('output_padding'))}: expected {d} entries, each "
                              "smaller than its stride or dilation")
    pads = _transpose_pads(ctx, dims(x)[2:], kernel, strides, dilations, out_pad)
    full = [strides[i] * (dims(x)[2 + i] - 1) + out_pad[i] + dilations[i] * (kernel[i] - 1) + 1 for i in range(d)]
    if any(full[i] - pads[i] - pads[d + i] < 1 for i in range(d)):
        raise ctx.unsupported(f"pads {pads} leave no output of the transposed convolution ({full})")
    if all(p >= 0 for p in pads):
        return nn.conv_transpose(x, w, b, strides=strides, pads=pads, dilations=dilations, groups=group,
                                 output_padding=out_pad)
    # an output longer than the full transposed convolution: the part past it has no input (zeros,
    # plus the bias)
    y = nn.conv_transpose(x, w, None, strides=strides, pads=[max(p, 0) for p in pads], dilations=dilations,
                          groups=group, output_padding=out_pad)
    y = np.pad(y, ((0, 0), (0, 0)) + tuple((max(-pads[i], 0), max(-pads[d + i], 0)) for i in range(d)))
    if b is not None:
        y = y + np.reshape(b, (1, -1) + (1,) * d)
    return y


# --------------------------------------------------------------------------- poolings


def _pool_args(ctx: NodeContext, x: Any) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], list[int], bool]:
    d = spatial(ctx, x)
    kernel = pool_kernel(ctx, d)
    strides, dilations = attr_ints(ctx, "strides", d, 1), attr_ints(ctx, "dilations", d, 1)
    pads = auto_pads(ctx, dims(x)[2:], kernel, strides, dilations)
    ceil_mode = bool(ctx.attr("ceil_mode", 0)) and ctx.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID")
    if any(nn.out_size(n, k, s, dl, lo, hi, ceil_mode) < 1 for n, k, s, dl, lo, hi in
           zip(dims(x)[2:], kernel, strides, dilations, pads[:d], pads[d:])):
        raise ctx.unsupported(f"a kernel {list(kernel)} (dilations {list(dilations)}) larger than the padded "
                              f"input {list(dims(x)[2:])}")
    if any(p >= dl * (k - 1) + 1 for p, k, dl in zip(pads, kernel * 2, dilations * 2)):
        raise ctx.unsupported(f"pads {pads} as wide as the kernel {list(kernel)}: a window of padding only")
    return kernel, strides, dilations, pads, ceil_mode


def _windows(ins: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
             pads: Sequence[int], ceil_mode: bool) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """(the output's spatial shape, the width past the hi pads each dim's last window reaches)."""
    d = len(ins)
    outs = tuple(nn.out_size(ins[i], kernel[i], strides[i], dilations[i], pads[i], pads[d + i], ceil_mode)
                 for i in range(d))
    widths = [(pads[i], max(pads[d + i], (outs[i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1
                            - ins[i] - pads[i])) for i in range(d)]
    return outs, widths


def _taps(xp: Any, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
          outs: Sequence[int]) -> Any:
    """(the tap's offsets, its strided slice of the padded `xp`, (N, C, *outs)) per kernel tap."""
    for k in itertools.product(*(range(n) for n in kernel)):
        idx = (slice(None), slice(None)) + tuple(slice(k_i * d_i, k_i * d_i + s_i * (o_i - 1) + 1, s_i)
                                                 for k_i, d_i, s_i, o_i in zip(k, dilations, strides, outs))
        yield k, xp[idx]


def _window_sum(x: Any, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
                pads: Sequence[int], ceil_mode: bool) -> Any:
    """The sum over each window, padding counting as zero."""
    outs, widths = _windows(dims(x)[2:], kernel, strides, dilations, pads, ceil_mode)
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(widths)) if any(map(any, widths)) else x
    out = None
    for _, t in _taps(xp, kernel, strides, dilations, outs):
        out = t if out is None else out + t
    return out


def _wants(ctx: NodeContext, i: int) -> bool:
    return i < len(ctx.node.output) and ctx.node.output[i] != ""


@onnx_op("MaxPool")
def max_pool(ctx: NodeContext, x: Any) -> Any:
    check_dtype(ctx, x, MAXPOOL_INTS)
    kernel, strides, dilations, pads, ceil_mode = _pool_args(ctx, x)
    d = len(kernel)
    if not _wants(ctx, 1):
        return nn.max_pool(x, kernel, strides=strides, pads=pads, dilations=dilations, ceil_mode=ceil_mode)
    order = int(ctx.attr("storage_order", 0))
    if order not in (0, 1):
        raise ctx.unsupported(f"storage_order {order} (0: row major, 1: column major)")
    return _max_pool_with_indices(x, kernel, strides, dilations, pads, ceil_mode, order)


def _max_pool_with_indices(x: Any, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
                           pads: Sequence[int], ceil_mode: bool, order: int) -> tuple[Any, Any]:
    """The maxima and ONNX's index of each: the position of the first maximum in the window's order
    (C order of the taps, a later tap wins only when strictly greater), in the input raveled row
    major (storage_order 0) or with its spatial dims column major (1), plus (n * C + c) times the
    spatial size. Which taps fall in the padding is known at import: a padded tap never wins."""
    ins = dims(x)[2:]
    d = len(ins)
    outs, widths = _windows(ins, kernel, strides, dilations, pads, ceil_mode)
    fill = -np.inf if np.dtype(x.dtype).kind == "f" else np.iinfo(np.dtype(x.dtype)).min
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(widths), constant_values=fill) if any(map(any, widths)) else x
    place = [math.prod(ins[i + 1:]) if order == 0 else math.prod(ins[:i]) for i in range(d)]
    grids = np.meshgrid(*(np.arange(o, dtype=np.int64) for o in outs), indexing="ij")
    seen = np.zeros(outs, bool)
    best = index = None
    for k, t in _taps(xp, kernel, strides, dilations, outs):
        pos = [grids[i] * strides[i] + k[i] * dilations[i] - pads[i] for i in range(d)]
        valid = np.logical_and.reduce([(p >= 0) & (p < n) for p, n in zip(pos, ins)])
        flat = sum(p * m for p, m in zip(pos, place)).astype(np.int64)
        if best is None:
            best, index, seen = t, np.where(valid, flat, 0), valid
            continue
        first = valid & ~seen  # (the first valid tap of a window wins over the padding before it)
        take = np.logical_or(t > best, first[None, None]) if first.any() else t > best
        take = np.logical_and(take, valid[None, None]) if not valid.all() else take
        best = np.where(take, t, best)
        index = np.where(take, flat[None, None], index)
        seen = seen | valid
    n, c = dims(x)[:2]
    base = (np.arange(n * c, dtype=np.int64) * math.prod(ins)).reshape((n, c) + (1,) * d)
    return best, index + base


@onnx_op("MaxUnpool", since=9)
@const_inputs(2)
def max_unpool(ctx: NodeContext, x: Any, idx: Any, output_shape: Any = None) -> Any:
    """MaxPool's inverse as the reference and the node suite have it: each value of x written at its
    index, a flat position in the tensor of the pooling's inferred input shape, (in - 1) * stride +
    kernel - pads per dim (zeros elsewhere); an output_shape larger than that pads it with zeros at
    the end of each dim."""
    check_dtype(ctx, x)
    d = spatial(ctx, x)
    kernel, strides = pool_kernel(ctx, d), attr_ints(ctx, "strides", d, 1)
    pads = explicit_pads(ctx, d)
    if tuple(idx.shape) != tuple(x.shape) or np.dtype(idx.dtype).name != "int64":
        raise ctx.unsupported(f"indices of {np.dtype(idx.dtype).name} {tuple(idx.shape)} for an input of shape "
                              f"{tuple(x.shape)} (MaxUnpool takes int64 indices of the input's shape)")
    inferred = dims(x)[:2] + tuple((n - 1) * s + k - pads[i] - pads[d + i] for i, (n, k, s) in
                                     enumerate(zip(dims(x)[2:], kernel, strides)))
    from fusebind.api.at import at  # (the api's indexed update: numpy's `y[pos] = v` on traced arrays)

    flat = np.zeros(math.prod(inferred), np.dtype(x.dtype))
    values, pos = np.reshape(x, (-1,)), np.reshape(idx, (-1,))
    if is_const(x) and is_const(idx):
        p = np.asarray(pos)
        if p.size and (p.min() < 0 or p.max() >= flat.size):
            raise ctx.unsupported(f"indices outside [0, {flat.size}), the inferred shape {list(inferred)}")
        flat[p] = np.asarray(values)
        y = np.reshape(flat, inferred)
    else:
        y = np.reshape(at(flat)[pos].set(values), inferred)
    if output_shape is None:
        return y
    shape = const_ints(ctx, output_shape, "output_shape")
    if len(shape) != x.ndim or any(s < i for s, i in zip(shape, inferred)) or shape[:2] != list(inferred[:2]):
        raise ctx.unsupported(f"output_shape {shape} smaller than the inferred shape {list(inferred)} (or of "
                              "another batch, channels or rank)")
    widths = tuple((0, s - i) for s, i in zip(shape, inferred))
    return np.pad(y, widths) if any(w for _, w in widths) else y


@onnx_op("AveragePool")
def average_pool(ctx: NodeContext, x: Any) -> Any:
    check_dtype(ctx, x)
    kernel, strides, dilations, pads, ceil_mode = _pool_args(ctx, x)
    return nn.avg_pool(x, kernel, strides=strides, pads=pads, dilations=dilations, ceil_mode=ceil_mode,
                       count_include_pad=bool(ctx.attr("count_include_pad", 0)))


def _p(ctx: NodeContext) -> float:
    p = ctx.attr("p", 2 if ctx.opset >= 2 else 2.0)
    if not p > 0:
        raise ctx.unsupported(f"p = {p} (the norm needs p > 0)")
    return p


def _abs_pow(x: Any, p: float) -> Any:
    if p == 1:
        return np.abs(x)
    if p == 2:
        return x * x
    return np.power(np.abs(x), float(p))


def _root(s: Any, p: float) -> Any:
    if p == 1:
        return s
    if p == 2:
        return np.sqrt(s)
    return np.power(s, 1.0 / float(p))


@onnx_op("LpPool")
def lp_pool(ctx: NodeContext, x: Any) -> Any:
    check_dtype(ctx, x)
    p = _p(ctx)
    kernel, strides, dilations, pads, ceil_mode = _pool_args(ctx, x)
    return _root(_window_sum(_abs_pow(x, p), kernel, strides, dilations, pads, ceil_mode), p)


def _global_axes(ctx: NodeContext, x: Any) -> tuple[int, ...]:
    check_dtype(ctx, x)
    return tuple(range(2, 2 + spatial(ctx, x)))


@onnx_op("GlobalAveragePool")
def global_average_pool(ctx: NodeContext, x: Any) -> Any:
    return np.mean(x, axis=_global_axes(ctx, x), keepdims=True)


@onnx_op("GlobalMaxPool")
def global_max_pool(ctx: NodeContext, x: Any) -> Any:
    return np.max(x, axis=_global_axes(ctx, x), keepdims=True)


@onnx_op("GlobalLpPool")
def global_lp_pool(ctx: NodeContext, x: Any) -> Any:
    axes, p = _global_axes(ctx, x), _p(ctx)
    return _root(np.sum(_abs_pow(x, p), axis=axes, keepdims=True), p)


# --------------------------------------------------------------------------- LRN


@onnx_op("LRN")
def lrn(ctx: NodeContext, x: Any) -> Any:
    """y = x / (bias + alpha / size * square_sum) ** beta, square_sum over the channels
    c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2) (zero past the ends): the squares,
    zero-padded along C, summed over `size` shifted slices."""
    check_dtype(ctx, x)
    if x.ndim < 3:
        raise ctx.unsupported(f"an input of shape {tuple(x.shape)}: LRN needs (N, C, D1, ...)")
    size = ctx.attr("size")
    if size is None or int(size) < 1:
        raise ctx.unsupported(f"size {size} (LRN needs a positive size)")
    size = int(size)
    alpha, beta, bias = ctx.attr("alpha", 1e-4), ctx.attr("beta", 0.75), ctx.attr("bias", 1.0)
    c = dims(x)[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = x * x
    padded = np.pad(sq, ((0, 0), (lo, hi)) + ((0, 0),) * (x.ndim - 2)) if size > 1 else sq
    total = None
    for j in range(size):
        t = padded[:, j:j + c]
        total = t if total is None else total + t
    base = bias + (alpha / size) * total
    return x / np.power(base, float(beta))


__all__ = ["average_pool", "conv", "conv_transpose", "global_average_pool", "global_lp_pool", "global_max_pool",
           "lp_pool", "lrn", "max_pool", "max_unpool"]


from fusebind.onnx import ops_conv_variants  # noqa: E402,F401  (registers ConvInteger, QLinearConv, DeformConv)
