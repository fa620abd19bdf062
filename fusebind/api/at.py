"""Functional updates, in JAX's form: `fb.at(x)[idx].set(v) / .add(v) / .mul(v) / .min(v) / .max(v)`
and `fb.put_along_axis(x, indices, values, axis)`; each returns a new array, x is unchanged.

The values are numpy's: `.set` is `y = x.copy(); y[idx] = v` (a repeated index: the last write
wins, as numpy's assignment does), `.add` / `.mul` / `.min` / `.max` are `np.add.at` /
`np.multiply.at` / `np.minimum.at` / `np.maximum.at` on a copy (a repeated index accumulates, in
numpy's order), put_along_axis is `np.put_along_axis` on a copy. On numpy arrays (nothing traced)
they are exactly those calls.

Every update is one `prim.scatter` (dialect/prim_scatter.py: put_along_axis positions along one
axis, numpy's update order and casts):
- constant indices (Python ints, slices, lists, numpy integer or boolean arrays, any mix numpy
  accepts): numpy computes the flat positions (`np.arange(x.size).reshape(x.shape)[idx]`), so its
  indexing rules and errors (fb.IndexOutOfBounds) are numpy's; the scatter runs on x raveled;
- one traced integer array indexing one axis (`fb.at(x)[i]`, `fb.at(x)[:, i]`): the scatter runs
  along that axis with i repeated over the other dims; `fb.put_along_axis` with traced indices is
  the scatter itself (indices broadcast against x as numpy's).
A traced index read from an argument of the jitted function is range-checked before each call
(numpy's IndexError as fb.IndexOutOfBounds, naming the argument; the op is marked `in_bounds`);
a computed one is checked by the op (in the kernel, or by its reference on arm 0).
numpy also runs the same update on stand-ins first, so a value that does not broadcast, or a cast
numpy refuses, is numpy's error. The values are cast to numpy's loop type (x's dtype for .set).

Must not: accept a traced index whose range nobody checks, or a traced boolean mask (its number
of True elements is data: refused, pointing to fb.where).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.tracer import Tracer, as_tracer
from fusebind.dialect.errors import FusebindError, IndexOutOfBounds
from fusebind.dialect.prim_scatter import MODES, ScatterOp


def _numpy_update(method: str, x: np.ndarray, where: Callable[[np.ndarray], Any], v: Any) -> np.ndarray:
    """`method` on a copy of x, as numpy does it; where(y) gives the index into y."""
    y = np.array(x, copy=True)
    ufunc = MODES[method]
    if ufunc is None:
        y[where(y)] = v
    else:
        ufunc.at(y, where(y), v)
    return y


def _stand_in(v: Any) -> Any:
    return np.zeros(v.shape, v.dtype) if isinstance(v, Tracer) else v


def _probe(graph: Any, what: str, check: Callable[[], Any]) -> None:
    try:  # numpy's own checks of the values: broadcasting, casting
        with np.errstate(all="ignore"):
            check()
    except FusebindError:  # a traced value where numpy needed one: already in fusebind's words
        raise
    except Exception as exc:  # noqa: BLE001 - numpy's refusal, in its words
        raise K.from_numpy_error(graph, exc, what) from None


def _values(graph: Any, method: str, x: Tracer, v: Any, target: tuple[int, ...], what: str) -> Tracer:
    """v as the scatter's values: numpy's loop type (x's dtype for .set, as numpy's assignment
    casts), of a shape that broadcasts to `target` (the index result's shape; numpy checked it)
    and has at most its rank (numpy's assignment drops leading 1s). Not broadcast here: the
    scatter broadcasts, so a scalar update stays one element."""
    ufunc = MODES[method]
    if ufunc is None:
        dt = x.dtype
    else:
        try:  # numpy's loop for (x's dtype, v): a Python scalar is weak
            with np.errstate(all="ignore"):
                dt = np.asarray(ufunc(np.zeros(1, x.dtype), _stand_in(v))).dtype
        except Exception as exc:  # noqa: BLE001
            raise K.from_numpy_error(graph, exc, what) from None
    if isinstance(v, Tracer):
        vt = K.cast(v, dt) if v.dtype != dt else v
    else:
        arr = np.asarray(v)
        if ufunc is None and arr.ndim == 0:
            z = np.zeros((), x.dtype)
            z[()] = v  # numpy's conversion of the value in an assignment
            arr = z
        vt = _dense_constant(graph, arr.astype(dt))
    vshape = vt.shape
    while len(vshape) > len(target) and vshape[0] == 1:
        vshape = vshape[1:]
    return K.reshape(vt, vshape)


def _as_updates(values: Tracer, result: tuple[int, ...], k: int, n: int) -> Tracer:
    """`values` (broadcasting to the index result shape `result`, whose dims k..k+n are the
    index's) as values broadcasting to the update shape, where those n dims are one: kept
    unbroadcast when they are 1 there (or n == 1), else broadcast and reshaped."""
    if values.ndim == 0:  # one value for every update: read once by the kernel (emit_scatter)
        return K.broadcast_to(values, result[:k] + (math.prod(result[k:k + n]),) + result[k + n:])
    vr = K.reshape(values, (1,) * (len(result) - values.ndim) + values.shape)
    mid = vr.shape[k:k + n]
    if all(d == 1 for d in mid):
        return K.reshape(vr, vr.shape[:k] + (1,) + vr.shape[k + n:])
    if n == 1:
        return vr
    full = K.broadcast_to(vr, result)
    return K.reshape(full, result[:k] + (math.prod(result[k:k + n]),) + result[k + n:])


def _scatter(method: str, x: Tracer, idx: Tracer, values: Tracer, axis: int, in_bounds: bool) -> Tracer:
    return x.graph.add(ScatterOp(x.value, idx.value, values.value, method, axis, in_bounds))


def _flat_update(method: str, x: Any, pos: np.ndarray, v: Any, what: str,
                 check: Callable[[np.ndarray, Any], Any]) -> Tracer:
    """x (traced, or a constant) with `method` applied at the flat positions `pos` (numpy's
    positions, of the index's result shape) from v (broadcast to pos.shape as numpy does)."""
    graph = K.graph_of(x, v)
    xt = x if isinstance(x, Tracer) else as_tracer(graph, np.asarray(x))
    _probe(graph, what, lambda: check(np.zeros(xt.shape, xt.dtype), _stand_in(v)))
    values = _values(graph, method, xt, v, tuple(pos.shape), what)
    if pos.size == 0:
        return xt
    m = pos.size
    itype = np.int32 if xt.size < 2 ** 31 else np.int64
    idx = _dense_constant(graph, pos.reshape(m).astype(itype))
    updates = _as_updates(values, tuple(pos.shape), 0, pos.ndim)
    out = _scatter(method, K.reshape(xt, (xt.size,)), idx, updates, 0, True)
    return K.reshape(out, xt.shape)


def _dense_constant(graph: Any, arr: np.ndarray) -> Tracer:
    """`arr` (the positions, constant values) as a `prim.constant` made from its bytes
    (ConstantOp.from_array converts element by element, ~15 us each: seconds for the 10^5-10^6
    positions of a slice update). A bool array goes through from_array (xDSL packs i1 itself)."""
    from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr

    from fusebind.dialect.prim import ConstantOp
    from fusebind.dialect.types import name_of_numpy_dtype, tensor_type

    if arr.dtype == np.bool_:
        return K.constant(graph, arr, arr.dtype)
    t = tensor_type(arr.shape, name_of_numpy_dtype(arr.dtype))
    data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
    return graph.add(ConstantOp(DenseIntOrFPElementsAttr(t, BytesAttr(data))))


def _traced_positions(graph: Any, x: Tracer, axis: int, idx: Tracer, what: str) -> tuple[Tracer, bool]:
    """A traced index of x's `axis` as i32 / i64, and whether a call-time check covers it (read
    from an argument: checked before each call, the error names the argument)."""
    if idx.dtype == np.bool_:
        raise K.unsupported(graph, f"{what} with a traced boolean mask: the number of updated elements would depend "
                                   "on the data; use fb.where(mask, value, x) for one value (or a constant mask)")
    if idx.dtype.kind not in "iu":
        raise K.from_numpy_error(graph, IndexError("arrays used as indices must be of integer (or boolean) type"),
                                 what)
    if idx.dtype not in (np.int32, np.int64):
        idx = K.cast(idx, np.int64)
    position = K.argument_of(graph, idx)
    if position is None:
        return idx, False  # computed: the op checks (kernel error channel, or its reference)
    n, pre = x.shape[axis], K.prefix(graph)
    graph.checks.append(K.range_check(graph, position, -n, n, lambda i, where: IndexOutOfBounds(
        f"{pre}{what}: index {i} is out of bounds for axis {axis} with size {n} ({where})")))
    return idx, True


def _traced_axis(idx: Any) -> tuple[int, Tracer] | None:
    """`(axis, i)` for an index that is one traced array `i` at `axis`, all before it full slices
    (`i`, `(i,)`, `(:, i)`, `(:, i, ...)` ...); None for any other index."""
    key = idx if isinstance(idx, tuple) else (idx,)
    traced = [k for k, item in enumerate(key) if isinstance(item, Tracer)]
    if len(traced) != 1:
        return None
    k = traced[0]
    full = slice(None)
    if any(not (isinstance(item, slice) and item == full) for item in key[:k]):
        return None
    if any(not (item is Ellipsis or isinstance(item, slice) and item == full) for item in key[k + 1:]):
        return None
    return k, key[k]


def _traced_update(method: str, x: Any, idx: Any, v: Any, what: str) -> Tracer:
    """fb.at(x)[..., i, ...] with one traced integer array i at `axis`: the scatter along `axis`
    with i over the updates (x[a..., i[j...], b...] for every a, j, b, in numpy's order)."""
    graph = K.graph_of(x, v, idx)
    xt = x if isinstance(x, Tracer) else as_tracer(graph, np.asarray(x))
    key = idx if isinstance(idx, tuple) else (idx,)
    if sum(item is Ellipsis for item in key) == 1 and xt.ndim >= len(key) - 1:
        at_dots = key.index(Ellipsis)  # numpy's: as many full slices as the other items leave dims
        key = key[:at_dots] + (slice(None),) * (xt.ndim - len(key) + 1) + key[at_dots + 1:]
    found = _traced_axis(key)
    if found is None:
        raise K.unsupported(graph, f"{what}: a traced index is taken as one integer array indexing one axis, after "
                                   "full slices only (fb.at(x)[i], fb.at(x)[:, i]); combine it with other indices "
                                   "by computing flat positions, or pass the indices as constants")
    axis, it = found
    if axis >= xt.ndim:
        raise K.from_numpy_error(graph, IndexError(f"too many indices for array: array is {xt.ndim}-dimensional, "
                                                   f"but {axis + 1} were indexed"), what)
    key = (slice(None),) * axis + (np.zeros(it.shape, np.int64),)
    _probe(graph, what, lambda: _numpy_update(method, np.zeros(xt.shape, xt.dtype), lambda y: key, _stand_in(v)))
    it, in_bounds = _traced_positions(graph, xt, axis, it, what)
    before, after = xt.shape[:axis], xt.shape[axis + 1:]
    m = it.size
    result = before + it.shape + after
    values = _values(graph, method, xt, v, result, what)
    if m == 0 or xt.size == 0:
        return xt
    ib = K.reshape(it, (1,) * len(before) + (m,) + (1,) * len(after))  # the scatter repeats it off axis
    return _scatter(method, xt, ib, _as_updates(values, result, axis, it.ndim), axis, in_bounds)


def _positions(graph: Any, fn: Callable[[], Any], what: str) -> np.ndarray:
    try:
        return np.asarray(fn())
    except FusebindError:  # a traced value inside the index (a list of them, a traced slice bound)
        raise
    except Exception as exc:  # noqa: BLE001 - numpy's own indexing errors
        raise K.from_numpy_error(graph, exc, what) from None


def _has_tracer(idx: Any) -> bool:
    return any(isinstance(i, Tracer) for i in (idx if isinstance(idx, tuple) else (idx,)))


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
        if _has_tracer(idx):
            return _traced_update(method, x, idx, v, what)
        shape = x.shape if isinstance(x, Tracer) else np.shape(x)
        pos = _positions(graph, lambda: np.arange(math.prod(shape)).reshape(shape)[idx], what)
        return _flat_update(method, x, pos, v, what, lambda sx, sv: _numpy_update(method, sx, lambda y: idx, sv))

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


def _traced_put(arr: Any, indices: Tracer, values: Any, axis: Any, what: str) -> Tracer:
    """np.put_along_axis with traced indices: the scatter ("set") along `axis`, the indices and
    values broadcast to numpy's fancy-index shape."""
    graph = indices.graph
    xt = arr if isinstance(arr, Tracer) else as_tracer(graph, np.asarray(arr))
    if indices.dtype.kind not in "iu":
        raise K.from_numpy_error(graph, IndexError("`indices` must be an integer array"), what)
    stand = np.zeros(indices.shape, np.int64)
    _probe(graph, what, lambda: np.put_along_axis(np.zeros(xt.shape, xt.dtype), stand, _stand_in(values), axis))
    flat_shape = None
    if axis is None:  # numpy's: the array raveled (the indices are 1-d, numpy checked)
        xt, axis, flat_shape = K.reshape(xt, (xt.size,)), 0, xt.shape
    axis = int(axis) % xt.ndim
    target = tuple(np.broadcast_shapes(indices.shape, xt.shape[:axis] + (1,) + xt.shape[axis + 1:]))
    if any(t != n for d, (t, n) in enumerate(zip(target, xt.shape)) if d != axis):
        raise K.unsupported(graph, f"{what}: indices of shape {indices.shape} broadcast past the array's shape "
                                   f"{xt.shape} off axis {axis} (numpy writes the size-1 dims repeatedly); give "
                                   "the array those dims")
    it, in_bounds = _traced_positions(graph, xt, axis, indices, what)
    vals = _values(graph, "set", xt, values, target, what)
    if vals.ndim == 0:  # one value: read once by the kernel (emit_scatter)
        vals = K.broadcast_to(vals, target)
    else:  # at the update shape's rank (numpy's broadcast, right-aligned)
        vals = K.reshape(vals, (1,) * (len(target) - vals.ndim) + vals.shape)
    if math.prod(target) == 0:
        out = xt
    else:
        out = _scatter("set", xt, it, vals, axis, in_bounds)  # both broadcast by the scatter
    return K.reshape(out, flat_shape) if flat_shape is not None else out


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
    if isinstance(indices, Tracer):
        return _traced_put(arr, indices, values, axis, what)
    shape = arr.shape if isinstance(arr, Tracer) else np.shape(arr)
    idx = np.asarray(indices)
    pos = _positions(graph, lambda: np.take_along_axis(np.arange(math.prod(shape)).reshape(shape), idx, axis),
                     what)
    return _flat_update("set", arr, pos, values, what, numpy_put)
