"""ONNX shape, layout and indexing handlers: Reshape, Transpose, Concat, Split, Slice, the
gathers and scatters, Squeeze/Unsqueeze, Flatten, Expand, Tile, Pad, Shape, Size, Identity,
Constant, ConstantOfShape, Range, Trilu, CumSum, OneHot, DepthToSpace/SpaceToDepth.

Each handler is numpy on its inputs (traced arrays of `fb.jit`, or numpy arrays when constant at
import), so the same code builds prim IR and folds shape arithmetic: `Shape` of an input whose
shape is known is a numpy constant, and everything computed from it stays numpy. An input that
must be known at import (a shape, axes, pads, repeats) but is traced is a data-dependent shape:
`UnsupportedModel`. Where ONNX and numpy differ (Slice clamping, Reshape's 0, Split's
num_outputs, negative indices of the gathers and scatters, Range's length), the ONNX meaning
is built here. The scatters compute flat positions (constant strides times the traced indices)
and make one `fb.at` update of the raveled data, so every reduction is numpy's `ufunc.at`.
The helpers handlers share live in values.py.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from fusebind.onnx.registry import NodeContext, onnx_op
from fusebind.onnx.trust import MAX_INITIALIZER_BYTES, ModelTooLarge

from fusebind.onnx.values import (  # noqa: F401  (re-exported: the helpers' first home)
    _const_i64, _ones_tuple, const_array, const_inputs, const_ints, is_const, lift, norm_axis, opt)


# --------------------------------------------------------------------------- reshapes


@onnx_op("Reshape")
@const_inputs(1)
def reshape(ctx: NodeContext, x: Any, shape: Any = None) -> Any:
    if ctx.opset < 5:
        target = [int(v) for v in ctx.attr("shape", [])]
    else:
        target = const_ints(ctx, shape, "shape")
    if not ctx.attr("allowzero", 0):  # 0 copies the input's dim (allowzero=1: a literal 0)
        if any(v == 0 and i >= x.ndim for i, v in enumerate(target)):
            raise ctx.unsupported(f"a 0 in the shape {target} past the input's rank {x.ndim}")
        target = [x.shape[i] if v == 0 else v for i, v in enumerate(target)]
    return np.reshape(x, tuple(target))


@onnx_op("Flatten")
def flatten(ctx: NodeContext, x: Any) -> Any:
    axis = ctx.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return np.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@onnx_op("Squeeze")
@const_inputs(1)
def squeeze(ctx: NodeContext, x: Any, axes: Any = None) -> Any:
    ax = ctx.attr("axes") if ctx.opset < 13 else (None if axes is None else const_ints(ctx, axes, "axes"))
    if ax is None:
        return np.reshape(x, tuple(d for d in x.shape if d != 1))
    ax = sorted(norm_axis(ctx, a, x.ndim) for a in ax)
    return np.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in ax))


@onnx_op("Unsqueeze")
@const_inputs(1)
def unsqueeze(ctx: NodeContext, x: Any, axes: Any = None) -> Any:
    ax = ctx.attr("axes", []) if ctx.opset < 13 else const_ints(ctx, axes, "axes")
    rank = x.ndim + len(ax)
    ax = {norm_axis(ctx, a, rank) for a in ax}
    dims = iter(x.shape)
    return np.reshape(x, tuple(1 if i in ax else next(dims) for i in range(rank)))


@onnx_op("Transpose")
def transpose(ctx: NodeContext, x: Any) -> Any:
    perm = ctx.attr("perm")
    return np.transpose(x, None if perm is None else tuple(perm))


@onnx_op("Identity")
def identity(ctx: NodeContext, x: Any) -> Any:
    return x


def claimed(ctx: NodeContext, shape: Sequence[int], dtype: Any) -> tuple[int, ...]:
    """`shape`, when a result of that shape and `dtype` fits the import budget; else ModelTooLarge
    before anything is allocated (a shape read from the model's constants is the file's claim: a
    ConstantOfShape of [2^20, 2^20] asked numpy for 4 TiB)."""
    shape = tuple(int(n) for n in shape)
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if size > MAX_INITIALIZER_BYTES:
        raise ModelTooLarge(f"{ctx.where()}: its constant result of shape {shape} would hold {size} bytes, more than "
                            f"the import budget ({MAX_INITIALIZER_BYTES} bytes); the model's constants claim this size")
    return shape


@onnx_op("Expand")
@const_inputs(1)
def expand(ctx: NodeContext, x: Any, shape: Any) -> Any:
    target = tuple(const_ints(ctx, shape, "shape"))
    out = np.broadcast_shapes(tuple(x.shape), target)  # ONNX's Expand broadcasts both ways
    return np.array(np.broadcast_to(x, claimed(ctx, out, x.dtype))) if is_const(x) else np.broadcast_to(x, out)


@onnx_op("Tile")
@const_inputs(1)
def tile(ctx: NodeContext, x: Any, repeats: Any) -> Any:
    reps = tuple(const_ints(ctx, repeats, "repeats"))
    if is_const(x):
        full = (1,) * (len(reps) - x.ndim) + tuple(x.shape)
        claimed(ctx, [n * r for n, r in zip(full, (1,) * (len(full) - len(reps)) + reps)], x.dtype)
    return np.tile(x, reps)


@onnx_op("DepthToSpace")
def depth_to_space(ctx: NodeContext, x: Any) -> Any:
    b = ctx.attr("blocksize")
    n, c, h, w = x.shape
    if ctx.attr("mode", "DCR") == "DCR":
        t = np.transpose(np.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    else:
        t = np.transpose(np.reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    return np.reshape(t, (n, c // (b * b), h * b, w * b))


@onnx_op("SpaceToDepth")
def space_to_depth(ctx: NodeContext, x: Any) -> Any:
    b = ctx.attr("blocksize")
    n, c, h, w = x.shape
    perm = (0, 3, 5, 1, 2, 4) if ctx.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    t = np.transpose(np.reshape(x, (n, c, h // b, b, w // b, b)), perm)
    return np.reshape(t, (n, c * b * b, h // b, w // b))


# --------------------------------------------------------------------------- joins and slices


@onnx_op("Concat")
def concat(ctx: NodeContext, *xs: Any) -> Any:
    xs = tuple(x for x in xs if x is not None)
    return np.concatenate(xs, axis=ctx.attr("axis", 1))  # (the attribute is required since opset 4)


@onnx_op("Split")
@const_inputs(1)
def split(ctx: NodeContext, x: Any, sizes: Any = None) -> Any:
    axis = norm_axis(ctx, ctx.attr("axis", 0), x.ndim)
    dim = x.shape[axis]
    n = len(ctx.node.output)
    if ctx.opset < 13:
        parts = ctx.attr("split")
    else:
        parts = None if sizes is None else const_ints(ctx, sizes, "split")
    if parts is None:
        count = ctx.attr("num_outputs", n)
        if ctx.opset >= 18 and ctx.attr("num_outputs") is not None:
            step = -(-dim // count)  # ceil: the last chunk is smaller
            parts = [min(step, dim - i * step) for i in range(count)]
        else:
            if dim % count:
                raise ctx.unsupported(f"a dim of {dim} does not split evenly into {count} outputs")
            parts = [dim // count] * count
    if sum(parts) != dim or len(parts) != n:
        raise ctx.unsupported(f"split sizes {parts} do not add up to the dim {dim} over {n} outputs")
    outs, start = [], 0
    for p in parts:
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, start + p)
        outs.append(x[tuple(index)])
        start += p
    return tuple(outs)


def _clamped_slice(start: int, end: int, step: int, dim: int) -> slice:
    """ONNX's Slice bounds on one axis: negative values count from the end, then starts and
    ends clamp to [0, dim] (step > 0) or [0, dim-1] and [-1, dim-1] (step < 0; -1 is before
    the first element, which Python's slice spells None)."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


@onnx_op("Slice")
@const_inputs(1, 2, 3, 4)
def slice_(ctx: NodeContext, x: Any, starts: Any = None, ends: Any = None, axes: Any = None,
           steps: Any = None) -> Any:
    if ctx.opset < 10:
        st, en, ax = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes")
        sp = None
    else:
        st, en = const_ints(ctx, starts, "starts"), const_ints(ctx, ends, "ends")
        ax = None if axes is None else const_ints(ctx, axes, "axes")
        sp = None if steps is None else const_ints(ctx, steps, "steps")
    ax = list(range(len(st))) if ax is None else [norm_axis(ctx, a, x.ndim) for a in ax]
    sp = [1] * len(st) if sp is None else sp
    index: list[Any] = [slice(None)] * x.ndim
    for a, s, e, p in zip(ax, st, en, sp):
        if p == 0:
            raise ctx.unsupported("a Slice step of 0")
        index[a] = _clamped_slice(s, e, p, x.shape[a])
    return x[tuple(index)]


# --------------------------------------------------------------------------- gathers and scatters


def _nonneg(idx: Any, dim: Any) -> Any:
    """ONNX's negative indices count from the end of the axis."""
    idx = np.asarray(idx).astype(np.int64) if is_const(idx) else idx.astype(np.int64)
    return np.where(idx < 0, idx + dim, idx)


@onnx_op("Gather")
def gather(ctx: NodeContext, x: Any, idx: Any) -> Any:
    axis = norm_axis(ctx, ctx.attr("axis", 0), x.ndim)
    return np.take(lift(x, idx), _nonneg(idx, x.shape[axis]), axis=axis)


@onnx_op("GatherElements")
def gather_elements(ctx: NodeContext, x: Any, idx: Any) -> Any:
    axis = norm_axis(ctx, ctx.attr("axis", 0), x.ndim)
    return np.take_along_axis(lift(x, idx), _nonneg(idx, x.shape[axis]), axis=axis)


def _strides(dims: Sequence[int]) -> list[int]:
    out, s = [], 1
    for d in reversed(dims):
        out.append(s)
        s *= d
    return out[::-1]


def _nd_rows(ctx: NodeContext, x: Any, idx: Any, b: int) -> tuple[Any, Any]:
    """GatherND/ScatterND's positions: `x` reshaped to (rows, *slice dims) and, per index tuple,
    its row (batch row offset + the tuple's flat position within x.shape[b:b+k])."""
    k = idx.shape[-1]
    dims = list(x.shape[b:b + k])
    strides = _strides(dims)
    flat = None
    for j in range(k):
        term = _nonneg(idx[..., j], dims[j]) * strides[j]
        flat = term if flat is None else flat + term
    inner = math.prod(dims)
    if flat is None:
        flat = np.zeros(idx.shape[:-1], np.int64)
    if b:
        batch = math.prod(x.shape[:b])
        bidx = np.arange(batch, dtype=np.int64).reshape(tuple(idx.shape[:b]) + _ones_tuple(idx.ndim - 1 - b))
        flat = flat + bidx * inner
    rows = np.reshape(x, (math.prod(x.shape[:b]) * inner,) + tuple(x.shape[b + k:]))
    return rows, flat


@onnx_op("GatherND")
def gather_nd(ctx: NodeContext, x: Any, idx: Any) -> Any:
    rows, flat = _nd_rows(ctx, x, idx, ctx.attr("batch_dims", 0))
    return np.take(lift(rows, flat), flat, axis=0)


_REDUCTIONS = {"none": "set", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def _update(ctx: NodeContext, flat_data: Any, pos: Any, values: Any) -> Any:
    from fusebind.api.at import at

    method = _REDUCTIONS.get(ctx.attr("reduction", "none"))
    if method is None:
        raise ctx.unsupported(f"the reduction {ctx.attr('reduction')!r}")
    if is_const(flat_data) and is_const(pos) and is_const(values):
        y = np.array(flat_data, copy=True)
        if method == "set":
            y[pos] = values
        else:
            {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[method].at(y, pos, values)
        return y
    return getattr(at(flat_data)[pos], method)(values)


@onnx_op("ScatterElements", "Scatter")
def scatter_elements(ctx: NodeContext, x: Any, idx: Any, updates: Any) -> Any:
    axis = norm_axis(ctx, ctx.attr("axis", 0), x.ndim)
    strides = _strides(x.shape)
    pos = _nonneg(idx, x.shape[axis]) * strides[axis]
    for d in range(x.ndim):  # the other coordinates are the index's own position
        if d != axis:
            shape = [1] * x.ndim
            shape[d] = idx.shape[d]
            pos = pos + np.arange(idx.shape[d], dtype=np.int64).reshape(shape) * strides[d]
    pos = np.broadcast_to(pos, tuple(idx.shape))
    y = _update(ctx, np.reshape(x, (-1,)), np.reshape(pos, (-1,)), np.reshape(updates, (-1,)))
    return np.reshape(y, tuple(x.shape))


@onnx_op("ScatterND")
def scatter_nd(ctx: NodeContext, x: Any, idx: Any, updates: Any) -> Any:
    k = idx.shape[-1]
    rows, flat = _nd_rows(ctx, x, idx, 0)
    tail = math.prod(x.shape[k:])
    pos = np.reshape(flat, tuple(flat.shape) + (1,)) * tail + np.arange(tail, dtype=np.int64)
    y = _update(ctx, np.reshape(x, (-1,)), np.reshape(pos, (-1,)), np.reshape(updates, (-1,)))
    return np.reshape(y, tuple(x.shape))


# --------------------------------------------------------------------------- padding


@onnx_op("Pad")
@const_inputs(1, 3)
def pad(ctx: NodeContext, x: Any, pads: Any = None, value: Any = None, axes: Any = None) -> Any:
    mode = ctx.attr("mode", "constant")
    if ctx.opset < 11:
        p = list(ctx.attr("pads", ctx.attr("paddings", [])))
        fill = ctx.attr("value", 0.0)
    else:
        p = const_ints(ctx, pads, "pads")
        fill = 0 if value is None or (is_const(value) and np.size(value) == 0) else value
    ax = list(range(x.ndim)) if axes is None else [norm_axis(ctx, a, x.ndim) for a in const_ints(ctx, axes, "axes")]
    n = len(ax)
    width = [[0, 0] for _ in range(x.ndim)]
    for i, a in enumerate(ax):
        width[a] = [p[i], p[i + n]]
    crop = [slice(-lo if lo < 0 else None, hi if hi < 0 else None) for lo, hi in width]
    if any(lo < 0 or hi < 0 for lo, hi in width):  # negative pads crop first
        x = x[tuple(crop)]
        width = [[max(lo, 0), max(hi, 0)] for lo, hi in width]
    if not any(lo or hi for lo, hi in width):
        return x
    widths = tuple((lo, hi) for lo, hi in width)
    if mode == "constant":
        if is_const(fill):
            return np.pad(x, widths, mode="constant", constant_values=np.asarray(fill).reshape(-1)[0].astype(x.dtype))
        # a traced fill value: zeros padded, then the fill where the constant mask says padding
        inside = np.pad(np.ones(tuple(x.shape), bool), widths, mode="constant", constant_values=False)
        return np.where(inside, np.pad(x, widths, mode="constant"), np.reshape(fill, ()).astype(x.dtype))
    if mode in ("reflect", "edge", "wrap"):
        return np.pad(x, widths, mode=mode)
    raise ctx.unsupported(f"the Pad mode {mode!r}")


# --------------------------------------------------------------------------- shapes and constants


@onnx_op("Shape")
def shape(ctx: NodeContext, x: Any) -> Any:
    dims = list(x.shape)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    return _const_i64(dims[slice(start, end)])


@onnx_op("Size")
def size(ctx: NodeContext, x: Any) -> Any:
    return _const_i64(math.prod(x.shape))


_CONSTANT_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints")


@onnx_op("Constant")
def constant(ctx: NodeContext) -> Any:
    for name in _CONSTANT_ATTRS:
        if name in ctx.attrs:
            v = ctx.attrs[name]
            if name == "value":
                return np.asarray(v)
            return np.asarray(v, dtype=np.float32 if "float" in name else np.int64)
    raise ctx.unsupported(f"a Constant given as {sorted(ctx.attrs)} (sparse or string constants)")


@onnx_op("ConstantOfShape")
@const_inputs(0)
def constant_of_shape(ctx: NodeContext, shape: Any) -> Any:
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(claimed(ctx, const_ints(ctx, shape, "shape"), value.dtype), value[0], dtype=value.dtype)


@onnx_op("Range")
@const_inputs(0, 1, 2)
def range_(ctx: NodeContext, start: Any, limit: Any, delta: Any) -> Any:
    s = const_array(ctx, start, "start")
    lim, d = const_array(ctx, limit, "limit"), const_array(ctx, delta, "delta")
    if float(d) == 0:
        raise ctx.unsupported("a Range delta of 0 (no number of elements)")
    n = max(int(math.ceil((float(lim) - float(s)) / float(d))), 0)
    claimed(ctx, (n,), np.int64)  # (np.arange's own type before the cast)
    return (s + np.arange(n).astype(s.dtype) * d).astype(s.dtype)


@onnx_op("Trilu")
@const_inputs(1)
def trilu(ctx: NodeContext, x: Any, k: Any = None) -> Any:
    kk = 0 if k is None else const_ints(ctx, k, "k")[0]
    return np.triu(x, kk) if ctx.attr("upper", 1) else np.tril(x, kk)


def _scan(ctx: NodeContext, x: Any, axis: Any, fn: Any, identity: int) -> Any:
    """CumSum / CumProd: `fn` along the axis, `reverse` scanning from the end, `exclusive`
    shifting by one (the identity first: 0, x0, x0+x1, ...)."""
    a = norm_axis(ctx, const_ints(ctx, axis, "axis")[0], x.ndim)
    y = np.flip(x, a) if ctx.attr("reverse", 0) else x
    out = fn(y, axis=a, dtype=x.dtype)
    if ctx.attr("exclusive", 0):
        index = [slice(None)] * x.ndim
        index[a] = slice(0, x.shape[a] - 1)
        first = list(x.shape)
        first[a] = 1
        out = np.concatenate([np.full(tuple(first), identity, x.dtype), out[tuple(index)]], axis=a)
    return np.flip(out, a) if ctx.attr("reverse", 0) else out


@onnx_op("CumSum")
@const_inputs(1)
def cumsum(ctx: NodeContext, x: Any, axis: Any) -> Any:
    return _scan(ctx, x, axis, np.cumsum, 0)


@onnx_op("CumProd")
@const_inputs(1)
def cumprod(ctx: NodeContext, x: Any, axis: Any) -> Any:
    return _scan(ctx, x, axis, np.cumprod, 1)


@onnx_op("EyeLike")
def eye_like(ctx: NodeContext, x: Any) -> Any:
    """Depends only on the input's shape: a numpy constant."""
    from onnx.helper import tensor_dtype_to_np_dtype

    to = ctx.attr("dtype")
    dtype = x.dtype if to is None else tensor_dtype_to_np_dtype(to)
    n, m = (x.shape[0], x.shape[0]) if x.ndim == 1 else tuple(x.shape)
    return np.eye(n, m, k=ctx.attr("k", 0), dtype=dtype)


@onnx_op("CenterCropPad")
@const_inputs(1, 2)
def center_crop_pad(ctx: NodeContext, x: Any, shape: Any, axes: Any = None) -> Any:
    """Each named axis cropped or zero-padded to its size, centred (the odd element at the end)."""
    sizes = const_ints(ctx, shape, "shape")
    ax = [norm_axis(ctx, a, x.ndim) for a in (ctx.attr("axes") or range(x.ndim))]
    crop: list[Any] = [slice(None)] * x.ndim
    widths = [(0, 0)] * x.ndim
    for a, size in zip(ax, sizes):
        d = abs(size - x.shape[a])
        if size < x.shape[a]:
            crop[a] = slice(d // 2, d // 2 + size)
        elif size > x.shape[a]:
            widths[a] = (d // 2, d - d // 2)
    y = x[tuple(crop)]
    return np.pad(y, tuple(widths), mode="constant") if any(w != (0, 0) for w in widths) else y


@onnx_op("OneHot")
@const_inputs(1)
def one_hot(ctx: NodeContext, indices: Any, depth: Any, values: Any) -> Any:
    n = int(const_array(ctx, depth, "depth").reshape(-1)[0])
    rank = indices.ndim + 1
    axis = norm_axis(ctx, ctx.attr("axis", -1), rank)
    idx = _nonneg(indices, n)
    shape = [1] * rank
    shape[axis] = n
    hot = np.expand_dims(idx, axis) == np.arange(n, dtype=np.int64).reshape(tuple(shape))
    off, on = values[0], values[1]
    return np.where(hot, on, off)
