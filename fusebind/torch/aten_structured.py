"""aten's shape, matmul, normalisation, convolution and pooling ops on traced values.

Registered into rules.RULES. A shape op whose result is its operand's elements in order (view,
reshape, squeeze, unsqueeze, flatten) is one reshape to the node's result shape, so torch's own
rules (`squeeze` ignoring dims that are not 1, `-1` sizes) never need restating. Convolution and
pooling go through `fusebind.api.nn` (channels first, as torch); a geometry torch itself rejects
(a pool padding beyond half its kernel, `divisor_override`, unbatched input) stays in eager
torch so that torch raises its own error.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch
from torch.fx import Node

import fusebind as fb
from fusebind.torch.rules import FLOATS, aten, cast, floats_only, meta, np_dtype, out_shape, rule, wide


def _floats(node: Node) -> str | None:
    return floats_only(node)


# -- shapes -----------------------------------------------------------------------------------------

@rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.squeeze.dims, aten.squeeze.dim,
      aten.squeeze.default, aten.unsqueeze.default, aten.flatten.using_ints)
def _reshape(node: Node, x: Any, *args: Any) -> Any:
    return np.reshape(x, out_shape(node))


@rule(aten.permute.default)
def _permute(node: Node, x: Any, dims: Any) -> Any:
    return np.transpose(x, tuple(int(d) % max(x.ndim, 1) for d in dims)) if x.ndim else x


@rule(aten.transpose.int)
def _transpose(node: Node, x: Any, a: int, b: int) -> Any:
    return np.swapaxes(x, a, b) if x.ndim else x


@rule(aten.t.default)
def _t(node: Node, x: Any) -> Any:
    return np.transpose(x) if x.ndim == 2 else x


@rule(aten.expand.default)
def _expand(node: Node, x: Any, sizes: Any, implicit: bool = False) -> Any:
    return np.broadcast_to(x, out_shape(node))


@rule(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default, aten.contiguous.default)
def _identity(node: Node, x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


def _positive_step(node: Node) -> str | None:
    step = node.args[4] if len(node.args) > 4 else node.kwargs.get("step", 1)
    return None if isinstance(step, int) and step > 0 else f"aten.slice with step {step!r}"


@rule(aten.slice.Tensor, check=_positive_step)
def _slice(node: Node, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Any:
    n = x.shape[dim]  # torch clamps start/end into [0, n] as Python slicing does (INT64_MAX included)
    start = None if start is None else max(min(start, n), -n)
    end = None if end is None else max(min(end, n), -n - 1)
    return x[(slice(None),) * (dim % x.ndim) + (slice(start, end, step),)]


@rule(aten.select.int)
def _select(node: Node, x: Any, dim: int, index: int) -> Any:
    return x[(slice(None),) * (dim % x.ndim) + (int(index),)]


@rule(aten.split_with_sizes.default, aten.split.Tensor)
def _split(node: Node, x: Any, sizes: Any, dim: int = 0) -> Any:
    dim %= x.ndim
    pieces, start = [], 0
    for m in meta(node):
        n = int(m.shape[dim])
        pieces.append(x[(slice(None),) * dim + (slice(start, start + n),)])
        start += n
    return tuple(pieces)


@rule(aten.cat.default)
def _cat(node: Node, xs: Any, dim: int = 0) -> Any:
    dt = meta(node).dtype  # torch promotes the pieces; a (0,)-shaped legacy piece is skipped, as torch
    parts = [cast(x, dt) for x, n in zip(xs, node.args[0]) if not (meta(n).dim() == 1 and meta(n).shape[0] == 0)]
    return np.concatenate(parts, axis=dim % meta(node).dim())


@rule(aten._to_copy.default)
def _to_copy(node: Node, x: Any, **kwargs: Any) -> Any:
    return cast(x, meta(node).dtype)


@rule(operator.getitem)
def _getitem(node: Node, xs: Any, i: int) -> Any:
    return xs[i]


# -- constants --------------------------------------------------------------------------------------

@rule(aten.full.default, aten.full_like.default, aten.scalar_tensor.default, aten.zeros_like.default,
      aten.ones_like.default, aten.zeros.default, aten.ones.default)
def _full(node: Node, *args: Any, **kwargs: Any) -> Any:
    t = node.target
    if t in (aten.full.default, aten.full_like.default):
        value = args[1]
    elif t is aten.scalar_tensor.default:
        value = args[0]
    else:
        value = 1 if t in (aten.ones_like.default, aten.ones.default) else 0
    return fb.full(out_shape(node), value, dtype=np_dtype(node))


# -- matmul -----------------------------------------------------------------------------------------

@rule(aten.mm.default, aten.bmm.default, check=_floats)
def _mm(node: Node, a: Any, b: Any) -> Any:
    return np.matmul(a, b)


@rule(aten.addmm.default, check=_floats)
def _addmm(node: Node, bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    ab = np.matmul(a, b)
    if alpha != 1:
        ab = ab * alpha
    if beta == 0:  # torch ignores the bias (NaN included) when beta is 0
        return ab
    return ab + (bias if beta == 1 else bias * beta)


# -- normalisation ----------------------------------------------------------------------------------

@rule(aten._softmax.default, check=_floats)
def _softmax(node: Node, x: Any, dim: int, half_to_float: bool) -> Any:
    return cast(fb.softmax(wide(x), axis=dim), meta(node).dtype)


@rule(aten._log_softmax.default, check=_floats)
def _log_softmax(node: Node, x: Any, dim: int, half_to_float: bool) -> Any:
    x = wide(x)
    m = np.max(x, axis=dim, keepdims=True)
    s = x - m
    return cast(s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True)), meta(node).dtype)


def _layer_norm_check(node: Node) -> str | None:
    return floats_only(node) or (None if all(isinstance(m, torch.Tensor) and m.dtype in FLOATS
                                            for m in meta(node)) else "native_layer_norm's statistics")


@rule(aten.native_layer_norm.default, check=_layer_norm_check)
def _layer_norm(node: Node, x: Any, shape: Any, w: Any, b: Any, eps: float) -> Any:
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    x, w, b = wide(x), wide(w), wide(b)
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = d * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return tuple(cast(v, m.dtype) for v, m in zip((y, mean, rstd), meta(node)))


def _first_output_only(node: Node) -> str | None:
    """Only getitem 0 is used (the other outputs are indices or empty statistics fusebind does not make)."""
    for u in node.users:
        if u.target is not operator.getitem or u.args[1] != 0:
            return f"{node.target}: output {u.args[1] if u.target is operator.getitem else '?'} is used"
    return floats_only(node.args[0]) if isinstance(node.args[0], Node) else None


def _channel(v: Any, ndim: int) -> Any:
    return np.reshape(v, (-1,) + (1,) * (ndim - 2))


@rule(aten._native_batch_norm_legit_no_training.default, check=_first_output_only)
def _batch_norm(node: Node, x: Any, w: Any, b: Any, mean: Any, var: Any, momentum: float, eps: float) -> Any:
    x, w, b, mean, var = wide(x), wide(w), wide(b), wide(mean), wide(var)
    scale = 1.0 / np.sqrt(var + eps)  # as torch's CPU kernel: x * (w / sqrt(var + eps)) + (b - mean * that)
    if w is not None:
        scale = scale * w
    shift = -mean * scale if b is None else b - mean * scale
    return (cast(x * _channel(scale, x.ndim) + _channel(shift, x.ndim), meta(node)[0].dtype),)


# -- convolution and pooling ------------------------------------------------------------------------

def _conv_check(node: Node) -> str | None:
    x = meta(node.args[0])
    if x.dim() not in (3, 4, 5):
        return "convolution of an unbatched input"
    return floats_only(node)


@rule(aten.convolution.default, check=_conv_check)
def _convolution(node: Node, x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any,
                 transposed: bool, output_padding: Any, groups: int) -> Any:
    d = x.ndim - 2
    pads = [int(p) for p in padding] * 2 if len(padding) == d else [int(padding[0])] * 2 * d
    if transposed:
        return fb.nn.conv_transpose(x, w, b, strides=list(stride), pads=pads, dilations=list(dilation),
                                    groups=groups, output_padding=list(output_padding))
    return fb.nn.conv(x, w, b, strides=list(stride), pads=pads, dilations=list(dilation), groups=groups)


def _per_dim(v: Any, d: int, default: Any) -> list[int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    v = [int(i) for i in (v if isinstance(v, (list, tuple)) else [v])]
    return v * d if len(v) == 1 else v


def _pool_check(node: Node, d: int) -> str | None:
    x = meta(node.args[0])
    if x.dim() != d + 2:
        return f"{node.target} of an unbatched input"
    kernel = _per_dim(node.args[1], d, None)
    padding = _per_dim(node.args[3] if len(node.args) > 3 else 0, d, 0)
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        return f"{node.target}: padding {padding} beyond half the kernel {kernel} (torch raises)"
    return None


def _max_pool_check(node: Node) -> str | None:
    return _first_output_only(node) or _pool_check(node, len(meta(node.args[0]).shape) - 2)


@rule(aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default, check=_max_pool_check)
def _max_pool(node: Node, x: Any, kernel: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1,
              ceil_mode: bool = False) -> Any:
    d = x.ndim - 2
    k = _per_dim(kernel, d, None)
    return (fb.nn.max_pool(x, k, strides=_per_dim(stride, d, k), pads=_per_dim(padding, d, 0) * 2,
                           dilations=_per_dim(dilation, d, 1), ceil_mode=ceil_mode),)


def _avg_pool_check(node: Node) -> str | None:
    if len(node.args) > 6 and node.args[6] is not None or node.kwargs.get("divisor_override") is not None:
        return "avg_pool with divisor_override"
    return floats_only(node) or _pool_check(node, len(meta(node.args[0]).shape) - 2)


@rule(aten.avg_pool2d.default, aten.avg_pool3d.default, check=_avg_pool_check)
def _avg_pool(node: Node, x: Any, kernel: Any, stride: Any = (), padding: Any = 0, ceil_mode: bool = False,
              count_include_pad: bool = True, divisor_override: Any = None) -> Any:
    d = x.ndim - 2
    k = _per_dim(kernel, d, None)
    y = fb.nn.avg_pool(wide(x), k, strides=_per_dim(stride, d, k), pads=_per_dim(padding, d, 0) * 2,
                       ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    return cast(y, meta(node).dtype)


def _adaptive_check(node: Node) -> str | None:
    x, out = meta(node.args[0]), node.args[1]
    if x.dim() != 4 or any(int(n) % int(o) for n, o in zip(x.shape[2:], out)):
        return "adaptive_avg_pool2d whose windows are not all equal"
    return floats_only(node)


@rule(aten._adaptive_avg_pool2d.default, check=_adaptive_check)
def _adaptive_avg_pool(node: Node, x: Any, out: Any) -> Any:
    n, c, h, w = x.shape
    oh, ow = int(out[0]), int(out[1])
    if oh == 1 and ow == 1:
        return cast(fb.nn.global_avg_pool(wide(x)), meta(node).dtype)
    return cast(np.mean(np.reshape(wide(x), (n, c, oh, h // oh, ow, w // ow)), axis=(3, 5)), meta(node).dtype)


@rule(aten.native_group_norm.default, check=_layer_norm_check)
def _group_norm(node: Node, x: Any, w: Any, b: Any, n: int, c: int, hw: int, groups: int, eps: float) -> Any:
    shape = x.shape
    x, w, b = wide(x), wide(w), wide(b)
    g = np.reshape(x, (int(n), int(groups), -1))
    mean = np.mean(g, axis=2, keepdims=True)
    d = g - mean
    rstd = 1.0 / np.sqrt(np.mean(d * d, axis=2, keepdims=True) + eps)
    y = np.reshape(d * rstd, shape)
    if w is not None:
        y = y * _channel(w, len(shape))
    if b is not None:
        y = y + _channel(b, len(shape))
    stats = (np.reshape(mean, (int(n), int(groups))), np.reshape(rstd, (int(n), int(groups))))
    return tuple(cast(v, m.dtype) for v, m in zip((y, *stats), meta(node)))


def _pad_check(node: Node) -> str | None:
    if any(int(p) < 0 for p in node.args[1]):
        return "constant_pad_nd with a negative pad (a crop)"
    return None


@rule(aten.constant_pad_nd.default, check=_pad_check)
def _constant_pad(node: Node, x: Any, pad: Any, value: Any = 0) -> Any:
    widths = [(0, 0)] * x.ndim  # torch's pad list runs from the last dim backwards: (lo, hi) pairs
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    return np.pad(x, widths, constant_values=value)


@rule(aten.flip.default)
def _flip(node: Node, x: Any, dims: Any) -> Any:
    return np.flip(x, axis=tuple(int(d) for d in dims)) if x.ndim else x
