"""ONNX ops that place elements at data-dependent positions of a fixed count:
ReverseSequence (a gather whose time indices come from the traced lengths) and TensorScatter
(a KV-cache write at traced offsets, one `fb.put_along_axis`). (TopK is ops_math.py's.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.onnx.values import lift, norm_axis
from fusebind.onnx.registry import NodeContext, onnx_op


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
