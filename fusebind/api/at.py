"""Functional updates, in JAX's form: `fb.at(x)[idx].set(v) / .add(v) / .mul(v) / .min(v) / .max(v)`
and `fb.put_along_axis(x, indices, values, axis)`; each returns a new array, x is unchanged.

The values are numpy's: `.set` is `y = x.copy(); y[idx] = v` (a repeated index: the last write
wins, as numpy's assignment does), `.add` / `.mul` / `.min` / `.max` are `np.add.at` /
`np.multiply.at` / `np.minimum.at` / `np.maximum.at` on a copy (a repeated index accumulates, in
numpy's order), put_along_axis is `np.put_along_axis` on a copy. On numpy arrays (nothing traced)
they are exactly those calls.

Indices are constants (Python ints, slices, lists, numpy integer or boolean arrays), or, for .add /
.min / .max, one traced integer array that is an argument of the jitted function, indexing axis 0
(a histogram): its range is checked before each call (Graph.checks, numpy's IndexError), then each
row meets the reduction of the values whose index hits it (one-hot select and a sum / min / max).
For constant indices numpy computes the flat positions (`np.arange(x.size).reshape(x.shape)[idx]`), so its indexing rules
and errors (fb.IndexOutOfBounds) are numpy's. numpy also runs the same update on stand-ins first, so
a value that does not broadcast, or a cast numpy refuses (np.add.at of floats into ints), is numpy's
error. The update is built from existing ops, one layer per occurrence of a repeated position:
a static gather of the values (numpy_kernels.take, bounded by GATHER_LIMIT), the ufunc, and a select.

Must not: accept traced indices whose range is not checked before the call (a kernel cannot raise
yet, and an out-of-range index must raise, not give a value).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.numpy_ufuncs import call as ufunc_call
from fusebind.api.tracer import Tracer, as_tracer

#: method -> the numpy ufunc whose .at it is (None: assignment)
_UFUNCS: dict[str, np.ufunc | None] = {"set": None, "add": np.add, "mul": np.multiply, "min": np.minimum,
                                      "max": np.maximum}


def _numpy_update(method: str, x: np.ndarray, where: Callable[[np.ndarray], Any], v: Any) -> np.ndarray:
    """`method` on a copy of x, as numpy does it; where(y) gives the index into y."""
    y = np.array(x, copy=True)
    ufunc = _UFUNCS[method]
    if ufunc is None:
        y[where(y)] = v
    else:
        ufunc.at(y, where(y), v)
    return y


def _stand_in(v: Any) -> Any:
    return np.zeros(v.shape, v.dtype) if isinstance(v, Tracer) else v


def _occurrences(pos: np.ndarray, size: int) -> list[np.ndarray]:
    """Layer r: for each flat position of x, the index in `pos` of its r-th occurrence (in
    numpy's order, the order of pos), or -1."""
    order = np.argsort(pos, kind="stable")
    sorted_pos = pos[order]
    starts = np.searchsorted(sorted_pos, sorted_pos, side="left")
    rank = np.empty_like(order)
    rank[order] = np.arange(pos.size) - starts
    layers = []
    for r in range(int(rank.max()) + 1 if pos.size else 0):
        src = np.full(size, -1, np.int64)
        hit = rank == r
        src[pos[hit]] = np.nonzero(hit)[0]
        layers.append(src)
    return layers


def _update(method: str, x: Any, pos: np.ndarray, v: Any, what: str,
            check: Callable[[np.ndarray, Any], Any]) -> Tracer:
    """x (traced, or a constant) with `method` applied at the flat positions `pos` (numpy's
    positions, of the index's result shape) from v (broadcast to pos.shape as numpy does)."""
    graph = K.graph_of(x, v)
    xt = x if isinstance(x, Tracer) else as_tracer(graph, np.asarray(x))
    try:  # numpy's own checks of the values: broadcasting, casting
        with np.errstate(all="ignore"):
            check(np.zeros(xt.shape, xt.dtype), _stand_in(v))
    except Exception as exc:  # noqa: BLE001 - numpy's refusal, in its words
        raise K.from_numpy_error(graph, exc, what) from None
    m = pos.size
    flat = pos.reshape(-1)
    layers = _occurrences(flat, xt.size)
    work = len(layers) * xt.size * m
    if work > K.GATHER_LIMIT:
        raise K.unsupported(graph, f"{what} updates {m} positions of an array of {xt.size} elements, "
                                   f"{len(layers)} times at the most repeated one; fusebind has no scatter op, and "
                                   f"building it from gathers would compute {work} elements (the limit is "
                                   f"{K.GATHER_LIMIT}); update outside the jitted function instead")
    values: Any = v
    scalar = not isinstance(v, (Tracer, np.ndarray)) and np.ndim(v) == 0
    if not scalar:
        vshape = tuple(np.shape(v))
        while len(vshape) > pos.ndim and vshape[0] == 1:  # numpy's assignment drops leading 1s
            vshape = vshape[1:]
        if isinstance(v, Tracer):
            values = K.reshape(K.broadcast_to(K.reshape(v, vshape), pos.shape), (m,))
        else:
            values = np.broadcast_to(np.asarray(v).reshape(vshape), pos.shape).reshape(m)
    ufunc = _UFUNCS[method]
    out = K.reshape(xt, (xt.size,))
    for src in layers:
        if scalar:
            new: Any = v
        elif isinstance(values, Tracer):
            new = K.take(values, 0, src, what)
        else:  # constant values: picked here, the -1 lanes are masked below
            new = K.constant(graph, values[np.maximum(src, 0)], values.dtype)
        if ufunc is None and scalar:
            z = np.zeros((), xt.dtype)
            z[()] = v  # numpy's conversion of the value in an assignment
            new = K.constant(graph, z, xt.dtype)
        elif ufunc is None:
            new = K.cast(new, xt.dtype)
        else:
            new = K.cast(ufunc_call(ufunc, (out, new), {}, what), xt.dtype)
        hit = K.constant(graph, src >= 0, np.bool_)
        out = K.select(hit, K.broadcast_to(new, out.shape), out)
    return K.reshape(out, xt.shape)


def _traced_index(graph: Any, idx: Any, what: str) -> None:
    if K.graph_of(idx) is not None:
        raise K.unsupported(graph, f"{what} with traced indices: fusebind cannot check their range inside a kernel "
                                   "yet, and an out-of-range index must raise IndexError rather than give a value; "
                                   "pass the indices as constants (Python ints, slices, lists or numpy arrays), or, "
                                   "for .add / .min / .max, one integer array argument of the jitted function "
                                   "indexing axis 0 (checked before each call)")


#: the identity of each order-free update (the value a lane no index hits contributes)
_IDENTITY = {"add": lambda dt: False if dt == np.bool_ else 0,
             "min": lambda dt: True if dt == np.bool_ else np.inf if dt.kind == "f" else int(np.iinfo(dt).max),
             "max": lambda dt: K.lowest(dt)}


def _traced_reduce_update(method: str, x: Any, idx: Tracer, v: Any, what: str) -> Tracer:
    """fb.at(x)[i].add / min / max for a traced integer array i (axis 0) read from an argument: its
    range is checked at call time (numpy's IndexError), then each row of x meets the reduction
    of the values whose index hits it (a one-hot select, bounded by GATHER_LIMIT). Repeated
    indices accumulate as np.add.at does (float sums in another order: within rounding)."""
    from fusebind.api.numpy_gathers import argument_of, range_check
    from fusebind.dialect.errors import IndexOutOfBounds

    graph = idx.graph
    xt = x if isinstance(x, Tracer) else as_tracer(graph, np.asarray(x))
    if xt.ndim == 0:
        raise K.from_numpy_error(graph, IndexError("too many indices for array: array is 0-dimensional, but 1 were "
                                                   "indexed"), what)
    if idx.dtype.kind != "i":
        raise K.from_numpy_error(graph, IndexError("arrays used as indices must be of integer (or boolean) type"),
                                 what)
    position = argument_of(graph, idx)
    if position is None:
        _traced_index(graph, idx, what)
    n, rest, prefix = xt.shape[0], xt.shape[1:], K.prefix(graph)
    graph.checks.append(range_check(graph, position, -n, n, lambda i, where: IndexOutOfBounds(
        f"{prefix}{what}: index {i} is out of bounds for axis 0 with size {n} ({where})")))
    target = idx.shape + rest
    try:  # numpy's checks of the values: broadcasting to x[i]'s shape, casting
        _numpy_update(method, np.zeros(xt.shape, xt.dtype), lambda y: np.zeros(idx.shape, np.int64), _stand_in(v))
    except Exception as exc:  # noqa: BLE001
        raise K.from_numpy_error(graph, exc, what) from None
    work = math.prod(target) * n
    if work > K.GATHER_LIMIT:
        raise K.unsupported(graph, f"{what} by {idx.size} traced indices into {n} rows of {math.prod(rest)} "
                                   f"elements would compute {work} elements without a scatter op (the limit is "
                                   f"{K.GATHER_LIMIT}); update outside the jitted function instead")
    ufunc = _UFUNCS[method]
    vt = v if isinstance(v, Tracer) else as_tracer(graph, v)
    dt = np.asarray(ufunc(np.zeros(1, xt.dtype), _stand_in(v))).dtype  # numpy's loop (a Python scalar: weak)
    vt = K.cast(vt, dt)
    vshape = vt.shape
    while len(vshape) > len(target) and vshape[0] == 1:
        vshape = vshape[1:]
    vt = K.broadcast_to(K.reshape(vt, vshape), target)
    k = idx.ndim
    i = K.cast(idx, np.int64)
    i = K.select(K.compare("lt", i, K.like(i, 0)), ufunc_call(np.add, (i, n), {}, what), i)
    hit = K.compare("eq", K.reshape(i, idx.shape + (1,) + (1,) * len(rest)),
                    K.constant(graph, np.arange(n, dtype=np.int64).reshape((n,) + (1,) * len(rest)), np.int64))
    ve = K.reshape(vt, idx.shape + (1,) + rest)
    lanes = K.select(hit, ve, K.constant(graph, _IDENTITY[method](dt), dt))
    lanes = K.broadcast_to(lanes, idx.shape + (n,) + rest)
    kind = {"add": "any" if dt == np.bool_ else "sum", "min": "all" if dt == np.bool_ else "min",
            "max": "any" if dt == np.bool_ else "max"}[method]
    contrib = K.reduce(kind, lanes, tuple(range(k))) if k else lanes
    return K.cast(ufunc_call(ufunc, (K.cast(xt, dt) if dt != xt.dtype else xt, contrib), {}, what), xt.dtype)


def _positions(graph: Any, fn: Callable[[], Any], what: str) -> np.ndarray:
    try:
        return np.asarray(fn())
    except Exception as exc:  # noqa: BLE001 - numpy's own indexing errors
        raise K.from_numpy_error(graph, exc, what) from None


class _Indexed:
    """`fb.at(x)[idx]`: the updates at that index."""

    def __init__(self, x: Any, idx: Any) -> None:
        self._x, self._idx = x, idx

    def _apply(self, method: str, v: Any) -> Any:
        x, idx = self._x, self._idx
        what = f"fusebind.at(x)[...].{method}"
        graph = K.graph_of(x, v, idx)
        if graph is None:
            return _numpy_update(method, np.asarray(x), lambda y: idx, v)
        if isinstance(idx, Tracer) and method in ("add", "min", "max"):
            return _traced_reduce_update(method, x, idx, v, what)
        _traced_index(graph, idx, what)
        shape = x.shape if isinstance(x, Tracer) else np.shape(x)
        pos = _positions(graph, lambda: np.arange(math.prod(shape)).reshape(shape)[idx], what)
        return _update(method, x, pos, v, what, lambda sx, sv: _numpy_update(method, sx, lambda y: idx, sv))

    def set(self, v: Any) -> Any:
        return self._apply("set", v)

    def add(self, v: Any) -> Any:
        return self._apply("add", v)

    def mul(self, v: Any) -> Any:
        return self._apply("mul", v)

    def min(self, v: Any) -> Any:
        return self._apply("min", v)

    def max(self, v: Any) -> Any:
        return self._apply("max", v)


class at:  # noqa: N801 - numpy-style lower-case name, as JAX's x.at
    """`fb.at(x)[idx]`: functional updates of x at idx (.set / .add / .mul / .min / .max)."""

    def __init__(self, x: Any) -> None:
        self._x = x

    def __getitem__(self, idx: Any) -> _Indexed:
        return _Indexed(self._x, idx)


def put_along_axis(arr: Any, indices: Any, values: Any, axis: Any) -> Any:
    """np.put_along_axis on a copy of arr, returned (numpy's mutates arr and returns None)."""
    what = "fusebind.put_along_axis"
    graph = K.graph_of(arr, indices, values)

    def numpy_put(x: np.ndarray, v: Any) -> np.ndarray:
        y = np.array(x, copy=True)
        np.put_along_axis(y, np.asarray(indices), v, axis)
        return y

    if graph is None:
        return numpy_put(np.asarray(arr), values)
    _traced_index(graph, indices, what)
    shape = arr.shape if isinstance(arr, Tracer) else np.shape(arr)
    idx = np.asarray(indices)
    pos = _positions(graph, lambda: np.take_along_axis(np.arange(math.prod(shape)).reshape(shape), idx, axis),
                     what)
    return _update("set", arr, pos, values, what, numpy_put)
