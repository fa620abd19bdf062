"""ONNX ops that select or place elements by data-dependent positions of a fixed count:
TopK (ranks by pairwise comparison: fusebind has no sort), ReverseSequence (a gather whose
time indices come from the traced lengths) and TensorScatter (a KV-cache write at traced
offsets, one `fb.put_along_axis`).

TopK's rank of an element is the number of elements that precede it (greater, or equal at a
lower index, for largest=1), so the r-th output is the element of rank r: ties keep the
lower index first, as the spec says. It costs n^2 comparisons along the axis (fine for the
sizes TopK sees in models; a sort would be the op to add for long axes). NaN is not ordered
(the reference sorts it last): inputs with NaN are out of contract here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.onnx.values import const_inputs, const_ints, lift, norm_axis
from fusebind.onnx.registry import NodeContext, onnx_op


@onnx_op("TopK")
@const_inputs(1)
def top_k(ctx: NodeContext, x: Any, k: Any = None) -> Any:
    kk = ctx.attr("k") if ctx.opset < 10 else const_ints(ctx, k, "k")[0]
    axis = norm_axis(ctx, ctx.attr("axis", -1), x.ndim)
    n = x.shape[axis]
    if not 0 <= kk <= n:
        raise ctx.unsupported(f"k = {kk} for an axis of {n}")
    xt = np.moveaxis(x, axis, -1)
    xi, xj = np.expand_dims(xt, -1), np.expand_dims(xt, -2)  # (..., i, 1) and (..., 1, j)
    before = (xj > xi) if ctx.attr("largest", 1) else (xj < xi)
    lower = np.arange(n).reshape(1, n) < np.arange(n).reshape(n, 1)  # j < i
    rank = np.sum(np.logical_or(before, np.logical_and(xj == xi, lower)), axis=-1).astype(np.int64)
    hit = np.expand_dims(rank, -2) == np.arange(kk, dtype=np.int64).reshape(kk, 1)  # (..., r, i)
    idx = np.sum(np.where(hit, np.arange(n, dtype=np.int64), np.zeros((), np.int64)), axis=-1)
    values = np.take_along_axis(lift(xt, idx), idx, axis=-1)
    return np.moveaxis(values, -1, axis), np.moveaxis(idx, -1, axis)


@onnx_op("ReverseSequence")
def reverse_sequence(ctx: NodeContext, x: Any, lens: Any) -> Any:
    """Per batch entry b, its first lens[b] time steps reversed: source t' = lens[b] - 1 - t."""
    batch, time = ctx.attr("batch_axis", 1), ctx.attr("time_axis", 0)
    t = np.arange(x.shape[time], dtype=np.int64)
    shape = [1] * x.ndim
    shape[time] = x.shape[time]
    t = t.reshape(tuple(shape))
    lshape = [1] * x.ndim
    lshape[batch] = x.shape[batch]
    sl = np.reshape(lens, tuple(lshape)).astype(np.int64)
    src = np.where(t < sl, sl - 1 - t, t)
    return np.take_along_axis(lift(x, src), np.broadcast_to(src, tuple(x.shape)), axis=time)


@onnx_op("TensorScatter", since=24)
def tensor_scatter(ctx: NodeContext, cache: Any, update: Any, write: Any = None) -> Any:
    """The update written into the cache along `axis` at each batch entry's write index
    (`circular`: modulo the cache length)."""
    from fusebind.api.at import put_along_axis

    axis = norm_axis(ctx, ctx.attr("axis", -2), cache.ndim)
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.unsupported(f"the mode {mode!r}")
    seq = np.arange(update.shape[axis], dtype=np.int64).reshape((-1,) + (1,) * (cache.ndim - axis - 1))
    start = np.zeros((cache.shape[0],), np.int64) if write is None else write.astype(np.int64)
    pos = np.reshape(start, (-1,) + (1,) * (cache.ndim - 1)) + seq
    if mode == "circular":
        pos = pos % cache.shape[axis]
    pos = np.broadcast_to(pos, tuple(update.shape))
    if all(isinstance(v, np.ndarray) for v in (cache, update, pos)):
        out = np.array(cache, copy=True)
        np.put_along_axis(out, pos, update, axis)
        return out
    return put_along_axis(cache, pos, update, axis)
