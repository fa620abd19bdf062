"""numpy's joins and splits on traced arrays: np.concatenate, np.stack and the
*stack family, np.append, np.split / array_split / hsplit / vsplit / dsplit,
np.unstack, and np.linalg.multi_dot.

A join is one `prim.concat` of the pieces that are not empty along the axis
(numpy's checks and messages first, then numpy's dtype promotion by casts):
no size limit, and in a fused region it is an index map folded into its
consumer (lowering/emit_concat.py). stack / *stack / append / column_stack
reshape their pieces first (views), as numpy does.
A split (and unstack) is one `prim.slice` per piece (numpy_shapes.slice_axes):
no size limit, and in a fused region the slice is an index map folded into
its consumer.

Implementations take the probe first (None for large inputs), then the
numpy function's arguments.
Must not: join in another dtype than numpy's result type.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.numpy_kernels import unsupported, value_error
from fusebind.api.numpy_linalg import dot, strong
from fusebind.api.numpy_probe import Probe
from fusebind.api.numpy_shapes import slice_axes
from fusebind.api.tracer import Graph, Tracer
from fusebind.dialect.prim_layout import ConcatOp


def _pieces(graph: Graph, arrays: Sequence[Any], dtype: Any, casting: str, what: str) -> list[Tracer]:
    if isinstance(arrays, Tracer):
        raise unsupported(graph, f"{what} takes a sequence of arrays; iterate a traced array with list(x) first")
    ts = [strong(graph, a) for a in arrays]
    if not ts:
        raise value_error(graph, "need at least one array to concatenate")
    dt = np.result_type(*(t.dtype for t in ts)) if dtype is None else np.dtype(dtype)
    for t in ts:
        if not np.can_cast(t.dtype, dt, casting):
            raise unsupported(graph, f"{what}: cannot cast array data from {t.dtype} to {dt} according to the rule "
                                     f"'{casting}'")
    K.check_dtype(graph, dt, what)
    return [K.cast(t, dt) for t in ts]


def _join(graph: Graph, ts: list[Tracer], axis: int, what: str) -> Tracer:
    first = ts[0]
    if first.ndim == 0:
        raise value_error(graph, "zero-dimensional arrays cannot be concatenated")
    for i, t in enumerate(ts):
        if t.ndim != first.ndim:
            raise value_error(graph, "all the input array dimensions except for the concatenation axis must match "
                                     f"exactly, but the array at index 0 has {first.ndim} dimension(s) and the "
                                     f"array at index {i} has {t.ndim} dimension(s)")
    (ax,) = K.normalize_axes(graph, axis, first.ndim)
    for i, t in enumerate(ts):
        for d in range(first.ndim):
            if d != ax and t.shape[d] != first.shape[d]:
                raise value_error(graph, "all the input array dimensions except for the concatenation axis must "
                                         f"match exactly, but along dimension {d}, the array at index 0 has size "
                                         f"{first.shape[d]} and the array at index {i} has size {t.shape[d]}")
    total = sum(t.shape[ax] for t in ts)
    live = [t for t in ts if t.shape[ax]]
    if len(live) <= 1:
        shape = first.shape[:ax] + (total,) + first.shape[ax + 1:]
        return K.reshape(live[0], shape) if live else K.full(graph, 0, first.dtype, shape)
    return graph.add(ConcatOp([t.value for t in live], ax))


def concatenate(p: Probe | None, arrays: Sequence[Any], /, axis: Any = 0, out: Any = None, *, dtype: Any = None,
                casting: str = "same_kind") -> Tracer:
    graph = K.graph_of(arrays)
    if out is not None:
        raise unsupported(graph, "numpy.concatenate(..., out=...) cannot write into an array inside a traced function")
    ts = _pieces(graph, arrays, dtype, casting, "numpy.concatenate")
    if axis is None:
        ts, axis = [K.reshape(t, (t.size,)) for t in ts], 0
    return _join(graph, ts, axis, "numpy.concatenate")


def stack(p: Probe | None, arrays: Sequence[Any], axis: int = 0, out: Any = None, *, dtype: Any = None,
          casting: str = "same_kind") -> Tracer:
    graph = K.graph_of(arrays)
    if out is not None:
        raise unsupported(graph, "numpy.stack(..., out=...) cannot write into an array inside a traced function")
    ts = _pieces(graph, arrays, dtype, casting, "numpy.stack")
    if any(t.shape != ts[0].shape for t in ts):
        raise value_error(graph, "all input arrays must have the same shape")
    (ax,) = K.normalize_axes(graph, axis, ts[0].ndim + 1)
    return _join(graph, [K.reshape(t, t.shape[:ax] + (1,) + t.shape[ax:]) for t in ts], ax, "numpy.stack")


def _at_least(t: Tracer, n: int) -> Tracer:
    if t.ndim >= n:
        return t
    if n == 3 and t.ndim == 2:
        return K.reshape(t, t.shape + (1,))
    if n == 3:
        return K.reshape(t, (1,) + (t.shape or (1,)) + (1,))
    return K.reshape(t, (1,) * (n - t.ndim) + t.shape)


def vstack(p: Probe | None, tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    graph = K.graph_of(tup)
    ts = _pieces(graph, tup, dtype, casting, "numpy.vstack")
    return _join(graph, [_at_least(t, 2) for t in ts], 0, "numpy.vstack")


def hstack(p: Probe | None, tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    graph = K.graph_of(tup)
    ts = [_at_least(t, 1) for t in _pieces(graph, tup, dtype, casting, "numpy.hstack")]
    return _join(graph, ts, 0 if ts[0].ndim == 1 else 1, "numpy.hstack")


def dstack(p: Probe | None, tup: Sequence[Any]) -> Tracer:
    graph = K.graph_of(tup)
    ts = _pieces(graph, tup, None, "same_kind", "numpy.dstack")
    return _join(graph, [_at_least(t, 3) for t in ts], 2, "numpy.dstack")


def column_stack(p: Probe | None, tup: Sequence[Any]) -> Tracer:
    graph = K.graph_of(tup)
    ts = _pieces(graph, tup, None, "same_kind", "numpy.column_stack")
    cols = [K.reshape(t, (t.size, 1)) if t.ndim < 2 else t for t in ts]
    return _join(graph, cols, 1, "numpy.column_stack")


def append(p: Probe | None, arr: Any, values: Any, axis: Any = None) -> Tracer:
    graph = K.graph_of(arr, values)
    ts = _pieces(graph, [arr, values], None, "unsafe", "numpy.append")
    if axis is None:
        ts, axis = [K.reshape(t, (t.size,)) for t in ts], 0
    return _join(graph, ts, axis, "numpy.append")


# ---------------------------------------------------------------- splits
def _split(graph: Graph, ary: Any, ios: Any, axis: int, equal: bool, what: str) -> list[Tracer]:
    if isinstance(ios, Tracer):
        raise unsupported(graph, f"{what}: the split points must be known when tracing, not a traced array")
    x = strong(graph, ary)
    (ax,) = K.normalize_axes(graph, axis, x.ndim)
    n = x.shape[ax]
    try:
        parts = (np.split if equal else np.array_split)(np.arange(n), ios)  # numpy's own split points and errors
    except Exception as exc:  # noqa: BLE001
        raise K.from_numpy_error(graph, exc, what) from None
    # each part is a contiguous run of the axis: a prim.slice (an index map that fuses into its consumer)
    whole = [(0, d, 1) for d in x.shape]
    return [slice_axes(x, [*whole[:ax], (int(idx[0]), int(idx[0]) + idx.size, 1), *whole[ax + 1:]]) if idx.size
            else K.full(graph, 0, x.dtype, x.shape[:ax] + (0,) + x.shape[ax + 1:]) for idx in parts]


def split(p: Probe | None, ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Tracer]:
    return _split(K.graph_of(ary), ary, indices_or_sections, axis, True, "numpy.split")


def array_split(p: Probe | None, ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Tracer]:
    return _split(K.graph_of(ary), ary, indices_or_sections, axis, False, "numpy.array_split")


def hsplit(p: Probe | None, ary: Any, indices_or_sections: Any) -> list[Tracer]:
    graph = K.graph_of(ary)
    x = strong(graph, ary)
    if x.ndim == 0:
        raise value_error(graph, "hsplit only works on arrays of 1 or more dimensions")
    return _split(graph, x, indices_or_sections, 1 if x.ndim > 1 else 0, True, "numpy.hsplit")


def vsplit(p: Probe | None, ary: Any, indices_or_sections: Any) -> list[Tracer]:
    graph = K.graph_of(ary)
    x = strong(graph, ary)
    if x.ndim < 2:
        raise value_error(graph, "vsplit only works on arrays of 2 or more dimensions")
    return _split(graph, x, indices_or_sections, 0, True, "numpy.vsplit")


def dsplit(p: Probe | None, ary: Any, indices_or_sections: Any) -> list[Tracer]:
    graph = K.graph_of(ary)
    x = strong(graph, ary)
    if x.ndim < 3:
        raise value_error(graph, "dsplit only works on arrays of 3 or more dimensions")
    return _split(graph, x, indices_or_sections, 2, True, "numpy.dsplit")


def unstack(p: Probe | None, x: Any, /, *, axis: int = 0) -> tuple[Tracer, ...]:
    graph = K.graph_of(x)
    t = strong(graph, x)
    if t.ndim == 0:
        raise value_error(graph, "Input array must be at least 1-d.")
    (ax,) = K.normalize_axes(graph, axis, t.ndim)
    whole = [(0, d, 1) for d in t.shape]
    rest = t.shape[:ax] + t.shape[ax + 1:]
    return tuple(K.reshape(slice_axes(t, [*whole[:ax], (i, i + 1, 1), *whole[ax + 1:]]), rest)
                 for i in range(t.shape[ax]))


def multi_dot(p: Probe | None, arrays: Sequence[Any], *, out: Any = None) -> Tracer:
    """A chain of np.dot from the left (numpy picks a cheaper order; the products agree within rounding)."""
    graph = K.graph_of(arrays)
    if out is not None:
        raise unsupported(graph, "numpy.linalg.multi_dot(..., out=...) cannot write into an array inside a traced "
                                 "function")
    ts = [strong(graph, a) for a in arrays]
    if len(ts) < 2:
        raise value_error(graph, "Expecting at least two arrays.")
    for i, t in enumerate(ts):
        if not (t.ndim == 2 or (t.ndim == 1 and i in (0, len(ts) - 1))):
            raise value_error(graph, f"{t.ndim}-dimensional array given. Array must be two-dimensional")
    r = ts[0]
    for t in ts[1:]:
        r = dot(None, r, t)
    return r
