"""numpy functions that pick elements by static positions, on traced arrays:
np.flip / fliplr / flipud / rot90, np.roll, np.diff / ediff1d, np.repeat,
np.tile, np.resize, np.delete, np.diagonal / diag / trace (and their
np.linalg forms).

Each computes its positions with numpy itself on an index array (np.roll of
np.arange(n), np.delete of np.arange(n), ...), so the positions and the
errors are numpy's, then reads them with index maps that fuse into their
consumer: np.flip is a reversing prim.slice, a rotation (np.roll) two slices
and a prim.concat, a few tiles a concat of x with itself, an arithmetic
progression of positions (diff, diagonal) a strided slice, anything else one
prim.gather by constant indices (numpy_kernels.take / gather). Positions
must be known when tracing: a traced shift or repeat count is refused.

Implementations take the probe first (maybe None), then the numpy function's arguments.
np.take_along_axis, np.choose and np.pad work the same way on constant
indices. Traced take_along_axis indices are one prim.take_along
(numpy_kernels.take_along): read from an argument (reshaped, transposed or
broadcast at most) they get a call-time check (Graph.checks: numpy's error,
naming the argument, before the kernel runs); computed ones are checked where
they are read, in the kernel (its error channel) or by the op's reference. A
traced np.choose chooser in mode 'raise' must be an argument's values (its
ValueError is checked at call time).

Must not: gather by traced positions whose range is not checked: an
out-of-range index must raise, not give a value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.errors import FusebindValueError
from fusebind.api.numpy_kernels import unsupported, value_error
from fusebind.api.numpy_probe import Probe
from fusebind.api.numpy_reductions import reduction
from fusebind.api.numpy_ufuncs import call
from fusebind.api.tracer import Graph, Tracer, as_tracer


def tracer(graph: Graph, v: Any) -> Tracer:
    return v if isinstance(v, Tracer) else as_tracer(graph, v)


def _static(graph: Graph, v: Any, what: str) -> None:
    if isinstance(v, Tracer):
        raise unsupported(graph, f"{what}: positions must be known when tracing (they decide the result's shape or "
                                 "the gathered positions); pass a Python value or a numpy array")


def _positions(graph: Graph, fn: Any, what: str) -> np.ndarray:
    try:
        return np.asarray(fn())
    except Exception as exc:  # noqa: BLE001 - numpy's own refusal, in its words
        raise K.from_numpy_error(graph, exc, what) from None


def flip(p: Probe | None, m: Any, axis: Any = None) -> Tracer:
    """One prim.slice with stride -1 on the flipped axes (a reversing index map, no index array)."""
    from fusebind.api.numpy_shapes import slice_axes

    graph = K.graph_of(m)
    x = tracer(graph, m)
    axes = K.normalize_axes(graph, axis, x.ndim)
    return slice_axes(x, [slice(None, None, -1 if i in axes else 1).indices(n) for i, n in enumerate(x.shape)])


def fliplr(p: Probe | None, m: Any) -> Tracer:
    return flip(p, m, 1)


def flipud(p: Probe | None, m: Any) -> Tracer:
    return flip(p, m, 0)


def rot90(p: Probe | None, m: Any, k: int = 1, axes: Any = (0, 1)) -> Tracer:
    """numpy's rot90: flips and a transpose."""
    graph = K.graph_of(m)
    x = tracer(graph, m)
    a0, a1 = (int(a) % x.ndim for a in axes)
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return flip(None, flip(None, x, a0), a1)
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return K.transpose(flip(None, x, a1), perm)
    return flip(None, K.transpose(x, perm), a1)


def roll(p: Probe | None, a: Any, shift: Any, axis: Any = None) -> Tracer:
    graph = K.graph_of(a)
    _static(graph, shift, "numpy.roll")
    x = tracer(graph, a)
    if axis is None:
        idx = _positions(graph, lambda: np.roll(np.arange(x.size), shift), "numpy.roll")
        return K.reshape(_rotated(K.reshape(x, (x.size,)), 0, idx), x.shape)
    shifts: dict[int, int] = {}
    for sh, ax in np.broadcast(shift, axis):
        (n_ax,) = K.normalize_axes(graph, int(ax), x.ndim)
        shifts[n_ax] = shifts.get(n_ax, 0) + int(sh)
    for ax, sh in shifts.items():
        x = _rotated(x, ax, np.roll(np.arange(x.shape[ax]), sh))
    return x


def _rotated(x: Tracer, ax: int, idx: np.ndarray) -> Tracer:
    """x at numpy's roll positions `idx` along `ax`: a rotation by `off` is the concatenation of
    two slices, x[off:] and x[:off] (index maps, no index array of the axis's length)."""
    from fusebind.api.numpy_shapes import slice_axes
    from fusebind.dialect.prim_layout import ConcatOp

    n = x.shape[ax]
    off = int(idx[0]) if n else 0
    if off == 0 or not np.array_equal(idx, (np.arange(n) + off) % n):
        return K.take(x, ax, idx, "numpy.roll")
    parts = []
    for lo, hi in ((off, n), (0, off)):
        bounds = [(0, d, 1) for d in x.shape]
        bounds[ax] = (lo, hi, 1)
        parts.append(slice_axes(x, bounds))
    return x.graph.add(ConcatOp([t.value for t in parts], ax))


def _difference(x: Tracer, ax: int, what: str) -> Tracer:
    m = x.shape[ax]
    hi = K.take(x, ax, np.arange(1, m), what)
    lo = K.take(x, ax, np.arange(0, max(m - 1, 0)), what)
    return call(np.not_equal if x.dtype == np.bool_ else np.subtract, (hi, lo), {}, what)


def diff(p: Probe | None, a: Any, n: int = 1, axis: int = -1, prepend: Any = np._NoValue,
         append: Any = np._NoValue) -> Tracer:
    graph = K.graph_of(a)
    if prepend is not np._NoValue or append is not np._NoValue:
        raise unsupported(graph, "numpy.diff with prepend= or append=: write np.diff(np.concatenate(...)) instead")
    x = tracer(graph, a)
    if n == 0:
        return x
    (ax,) = K.normalize_axes(graph, axis, x.ndim)
    for _ in range(n):
        x = _difference(x, ax, "numpy.diff")
    return x


def ediff1d(p: Probe | None, ary: Any, to_end: Any = None, to_begin: Any = None) -> Tracer:
    graph = K.graph_of(ary)
    if to_end is not None or to_begin is not None:
        raise unsupported(graph, "numpy.ediff1d with to_end= or to_begin=: concatenate the result instead")
    x = tracer(graph, ary)
    return K.cast(_difference(K.reshape(x, (x.size,)), 0, "numpy.ediff1d"), x.dtype)


def _take_positions(a: Any, static: Any, axis: Any, positions: Any, what: str) -> Tracer:
    """`a` (flattened when `axis` is None) gathered along the axis at `positions(n)`, the
    static index list numpy's own function gives for `np.arange(n)` (repeat, delete)."""
    graph = K.graph_of(a)
    _static(graph, static, what)
    x = tracer(graph, a)
    if axis is None:
        x, ax = K.reshape(x, (x.size,)), 0
    else:
        (ax,) = K.normalize_axes(graph, axis, x.ndim)
    idx = _positions(graph, lambda: positions(np.arange(x.shape[ax])), what)
    return K.take(x, ax, idx, what)


def repeat(p: Probe | None, a: Any, repeats: Any, axis: Any = None) -> Tracer:
    return _take_positions(a, repeats, axis, lambda n: np.repeat(n, repeats), "numpy.repeat")


def tile(p: Probe | None, A: Any, reps: Any) -> Tracer:
    graph = K.graph_of(A)
    _static(graph, reps, "numpy.tile")
    x = tracer(graph, A)
    try:
        tup = tuple(int(r) for r in reps)
    except TypeError:
        tup = (int(reps),)
    x = K.reshape(x, (1,) * (len(tup) - x.ndim) + x.shape)  # numpy: array(A, ndmin=len(reps))
    tup = (1,) * (x.ndim - len(tup)) + tup
    for ax, r in enumerate(tup):
        if r != 1:
            x = _copies(x, ax, r, "numpy.tile")
    return x


#: the most copies of an axis written as one prim.concat of x with itself; more gather
CONCAT_COPIES = 8


def _copies(x: Tracer, ax: int, r: int, what: str) -> Tracer:
    """r copies of x one after the other along `ax`: a prim.concat of x with itself (an index
    map with no index array) for a few, else a gather by np.tile's positions."""
    from fusebind.dialect.prim_layout import ConcatOp

    if 1 < r <= CONCAT_COPIES and x.size:
        return x.graph.add(ConcatOp([x.value] * r, ax))
    return K.take(x, ax, np.tile(np.arange(x.shape[ax]), r), what)


def resize(p: Probe | None, a: Any, new_shape: Any) -> Tracer:
    graph = K.graph_of(a)
    x = tracer(graph, a)
    shape = (int(new_shape),) if isinstance(new_shape, (int, np.integer)) else tuple(int(d) for d in new_shape)
    if any(d < 0 for d in shape):
        raise value_error(graph, "all elements of `new_shape` must be non-negative")
    n = int(np.prod(shape))
    if x.size == 0 or n == 0:
        return K.full(graph, 0, x.dtype, shape)
    flat = _copies(K.reshape(x, (x.size,)), 0, -(-n // x.size), "numpy.resize")
    if flat.size != n:
        from fusebind.api.numpy_shapes import slice_axes

        flat = slice_axes(flat, [(0, n, 1)])
    return K.reshape(flat, shape)


def delete(p: Probe | None, arr: Any, obj: Any, axis: Any = None) -> Tracer:
    return _take_positions(arr, obj, axis, lambda n: np.delete(n, obj), "numpy.delete")


def _diagonal(x: Tracer, offset: int, axis1: int, axis2: int, what: str) -> Tracer:
    graph = x.graph
    if x.ndim < 2:
        raise value_error(graph, "diag requires an array of at least two dimensions")
    a1, a2 = K.normalize_axes(graph, axis1, x.ndim)[0], K.normalize_axes(graph, axis2, x.ndim)[0]
    if a1 == a2:
        raise value_error(graph, "axis1 and axis2 cannot be the same")
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    y = K.transpose(x, rest + [a1, a2])
    n, m = y.shape[-2:]
    rows = np.arange(max(0, -offset), min(n, m - offset))
    flat = K.reshape(y, y.shape[:-2] + (n * m,))
    return K.take(flat, flat.ndim - 1, rows * m + rows + offset, what)


def diagonal(p: Probe | None, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tracer:
    graph = K.graph_of(a)
    return _diagonal(tracer(graph, a), int(offset), axis1, axis2, "numpy.diagonal")


def linalg_diagonal(p: Probe | None, x: Any, /, *, offset: int = 0) -> Tracer:
    graph = K.graph_of(x)
    return _diagonal(tracer(graph, x), int(offset), -2, -1, "numpy.linalg.diagonal")


def trace(p: Probe, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: Any = None) -> Tracer:
    graph = K.graph_of(a)
    if out is not None:
        raise unsupported(graph, "numpy.trace(..., out=...) cannot write into an array inside a traced function")
    d = _diagonal(tracer(graph, a), int(offset), axis1, axis2, "numpy.trace")
    return reduction("numpy.trace", "sum", d, -1, False, np.asarray(p.result).dtype)


def linalg_trace(p: Probe, x: Any, /, *, offset: int = 0, dtype: Any = None) -> Tracer:
    return trace(p, x, offset, -2, -1, dtype)


def diag(p: Probe | None, v: Any, k: int = 0) -> Tracer:
    graph = K.graph_of(v)
    x = tracer(graph, v)
    if x.ndim == 2:
        return _diagonal(x, int(k), 0, 1, "numpy.diag")
    if x.ndim != 1:
        raise value_error(graph, "Input must be 1- or 2-d.")
    n = x.shape[0] + abs(int(k))
    idx = np.full((n, n), -1, dtype=np.int64)
    i = np.arange(x.shape[0])
    rows, cols = (i, i + k) if k >= 0 else (i - k, i)
    idx[rows, cols] = i
    # -1 (off the diagonal) reads element 0, replaced by 0 below (an empty v has nothing to read)
    picked = K.gather(x, 0, np.maximum(idx, 0), "numpy.diag") if x.shape[0] else K.take(x, 0, idx, "numpy.diag")
    return K.select(K.constant(graph, idx >= 0, np.bool_), picked, K.like(x, 0))


# ---------------------------------------------------------------- take_along_axis, choose, pad
argument_of = K.argument_of  # shared with at.py (fb.at by traced indices)
range_check = K.range_check


def _index_argument(graph: Graph, idx: Tracer, what: str) -> int:
    position = argument_of(graph, idx)
    if position is None:
        raise unsupported(graph, f"{what} with traced indices computed inside the function: fusebind cannot check "
                                 "their range inside a kernel yet, and an out-of-range index must raise rather "
                                 "than give a value; pass the indices as an argument of the jitted function "
                                 "(reshaped, transposed or broadcast at most: checked before each call) or as a "
                                 "constant")
    return position


def _traced_take_along(x: Tracer, idx: Tracer, axis: Any) -> Tracer:
    """take_along_axis by traced indices: one prim.take_along (numpy_kernels.take_along: read from
    an argument, they are checked at call time; computed ones are refused)."""
    graph = x.graph
    what = "numpy.take_along_axis"
    if idx.dtype.kind not in "iu":
        raise K.from_numpy_error(graph, IndexError("`indices` must be an integer array"), what)
    if axis is None:
        x, ax = K.reshape(x, (x.size,)), 0
    else:
        (ax,) = K.normalize_axes(graph, axis, x.ndim)
    if idx.ndim != x.ndim:
        raise value_error(graph, f"{what}: `indices` and `arr` must have the same number of dimensions")
    return K.take_along(x, ax, idx, what)


def take_along_axis(p: Probe | None, arr: Any, indices: Any, axis: Any = -1) -> Tracer:
    """numpy's positions of np.arange(size) (its broadcasting, negative indices and
    IndexError), then one gather of the flattened array. Traced indices: see _traced_take_along."""
    graph = K.graph_of(arr, indices)
    if isinstance(indices, Tracer):
        return _traced_take_along(tracer(graph, arr), indices, axis)
    idx = np.asarray(indices)
    x = tracer(graph, arr)
    pos = _positions(graph, lambda: np.take_along_axis(np.arange(x.size).reshape(x.shape), idx, axis),
                     "numpy.take_along_axis")
    return K.take(K.reshape(x, (x.size,)), 0, pos, "numpy.take_along_axis")


def choose(p: Probe | None, a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Tracer:
    """One select per choice, on the chooser normalized by numpy (its modes and errors)."""
    graph = K.graph_of(a, choices)
    if out is not None:
        raise unsupported(graph, "numpy.choose(..., out=...) cannot write into an array inside a traced function")
    if isinstance(choices, Tracer):
        choices = [choices[i] for i in range(choices.shape[0])]
    n = len(choices)
    dt = np.asarray(p.result).dtype if p is not None else np.result_type(*choices)
    cs = [K.cast(tracer(graph, c), dt) for c in choices]
    if isinstance(a, Tracer):
        return _traced_choose(a, cs, mode)
    idx = np.asarray(a)
    which = _positions(graph, lambda: np.choose(idx, [np.full(1, i) for i in range(n)], mode=mode), "numpy.choose")
    shape = K.check_broadcast(graph, idx.shape, *(c.shape for c in cs))
    result = K.broadcast_to(cs[0], shape)
    for i in range(1, n):
        hit = np.broadcast_to(which == i, shape)
        if hit.any():
            result = K.select(K.constant(graph, hit, np.bool_), K.broadcast_to(cs[i], shape), result)
    return result


def _traced_choose(a: Tracer, cs: list[Tracer], mode: str) -> Tracer:
    """np.choose by a traced chooser: clip / wrap as numpy computes them; 'raise' checks the
    argument it is read from at call time (numpy's ValueError), as take_along_axis does."""
    graph = a.graph
    what = "numpy.choose"
    n = len(cs)
    if a.dtype.kind not in "iu":
        raise unsupported(graph, f"{what}: the chooser must be an integer array (it is {a.dtype}); cast it first")
    i = K.cast(a, np.int64)
    if mode == "clip":
        i = K.select(K.compare("lt", i, K.like(i, 0)), K.like(i, 0),
                     K.select(K.compare("gt", i, K.like(i, n - 1)), K.like(i, n - 1), i))
    elif mode == "wrap":
        i = K.cast(call(np.remainder, (i, n), {}, what), np.int64)
    else:
        position = _index_argument(graph, a, what)
        prefix = K.prefix(graph)
        graph.checks.append(range_check(graph, position, 0, n, lambda v, where: FusebindValueError(
            f"{prefix}{what}: invalid entry in choice array (entry {v}, {where})")))
    shape = K.check_broadcast(graph, i.shape, *(c.shape for c in cs))
    result = K.broadcast_to(cs[0], shape)
    for j in range(1, n):
        result = K.select(K.broadcast_to(K.compare("eq", i, K.like(i, j)), shape), K.broadcast_to(cs[j], shape),
                          result)
    return result


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap", "empty")


def pad(p: Probe | None, array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Tracer:
    """Axis by axis, as numpy pads: each axis a gather at np.pad(np.arange(n), ...)'s positions
    (edge / reflect / symmetric / wrap); constant fills the padded positions with its value for
    that side (later axes write the corners, as numpy's do)."""
    graph = K.graph_of(array, pad_width, kwargs)
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise unsupported(graph, f"numpy.pad mode={mode!r} is not supported on traced arrays; fusebind has "
                                 f"{', '.join(_PAD_MODES)}")
    if K.graph_of(pad_width, kwargs) is not None:
        raise unsupported(graph, "numpy.pad: pad widths and constant values must be known when tracing (Python "
                                 "numbers or numpy arrays)")
    if kwargs.get("reflect_type", "even") != "even":
        raise unsupported(graph, "numpy.pad reflect_type='odd' is not supported on traced arrays (it computes "
                                 "values); pad with reflect_type='even' and write the odd form with operators")
    x = tracer(graph, array)
    widths = _positions(graph, lambda: np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2)),
                        "numpy.pad")
    if (widths < 0).any():
        raise value_error(graph, "index can't contain negative values")
    values = None
    if mode == "constant":
        values = _positions(graph, lambda: np.broadcast_to(np.asarray(kwargs.get("constant_values", 0)),
                                                           (x.ndim, 2)), "numpy.pad")
        values = values.astype(x.dtype)  # numpy assigns into the padded array: an unsafe cast
    for ax in range(x.ndim):
        before, after = (int(w) for w in widths[ax])
        if before == after == 0:
            continue
        n = x.shape[ax]
        if mode in ("constant", "empty"):
            idx = np.concatenate([np.full(before, -1), np.arange(n), np.full(after, -1)])
        else:
            idx = _positions(graph, lambda: np.pad(np.arange(n), (before, after), mode=mode), "numpy.pad")
        if mode in ("constant", "empty") and n:  # a padded position (-1) reads element 0, replaced below
            x = K.gather(x, ax, np.maximum(idx, 0), "numpy.pad")
        else:
            x = K.take(x, ax, idx, "numpy.pad")
        if mode in ("constant", "empty") and x.size:
            side = np.concatenate([np.zeros(before, np.int64), np.full(n, -1), np.ones(after, np.int64)])
            fill = values[ax] if values is not None else np.zeros(2, x.dtype)
            lane = [1] * x.ndim
            lane[ax] = side.size
            filled = K.constant(graph, np.where(side >= 0, fill[np.maximum(side, 0)], 0).astype(x.dtype)
                                .reshape(lane), x.dtype)
            pad_mask = K.constant(graph, (side >= 0).reshape(lane), np.bool_)
            x = K.select(K.broadcast_to(pad_mask, x.shape), K.broadcast_to(filled, x.shape), x)
    return x
