"""numpy's shape functions and indexing on traced arrays.

Owns np.reshape / ravel / transpose / moveaxis / expand_dims / squeeze /
broadcast_to / atleast_*d / meshgrid (and their Tracer methods), the
creation functions that take an array (zeros_like, full_like, ...), integer
and slice indexing (`x[i]`, `x[1:, ::-1]`, `x[..., None]`) and np.take with
static indices. The other gathers (flip, roll, repeat, diagonal, ...) are
in numpy_gathers.

Shapes come from the probe (numpy run on zero-stride stand-ins: a view,
free at any size), so -1 in a reshape, the axes of expand_dims and the
result of an index are numpy's own. Basic indexing is one `prim.slice`
(`slice_axes`, also used by the splits in numpy_joins) and a reshape;
np.take gathers by static indices (numpy_kernels.take); an index that is
itself traced, boolean masks and integer-array (fancy) indexing are refused.

Implementations take the probe first, then the numpy function's arguments.
Must not: copy a stand-in's values into the trace (they are zeros).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.numpy_kernels import unsupported
from fusebind.api.numpy_probe import Probe, probe
from fusebind.api.tracer import Graph, Tracer, as_tracer

NO = np._NoValue


def tracer(graph: Graph, v: Any) -> Tracer:
    return v if isinstance(v, Tracer) else as_tracer(graph, v)


def _shape(p: Probe) -> tuple[int, ...]:
    return tuple(np.shape(p.result))


# ---------------------------------------------------------------- reshapes
def reshape(p: Probe, a: Any, /, shape: Any = None, order: str = "C", *, newshape: Any = None,
            copy: Any = None) -> Tracer:
    graph = K.graph_of(a)
    x = tracer(graph, a)
    out = _shape(p)
    if order == "F":  # column-major: reverse the axes, reshape, reverse again
        return K.transpose(K.reshape(K.transpose(x, range(x.ndim)[::-1]), out[::-1]), range(len(out))[::-1])
    if order != "C":
        raise unsupported(graph, f"numpy.reshape(order={order!r}) depends on the memory layout of the caller's "
                                 "array, which a trace does not see; use order='C' or 'F'")
    return K.reshape(x, out)


def ravel(p: Probe, a: Any, order: str = "C") -> Tracer:
    graph = K.graph_of(a)
    x = tracer(graph, a)
    if order == "F":
        return K.reshape(K.transpose(x, range(x.ndim)[::-1]), (x.size,))
    if order != "C":
        raise unsupported(graph, f"numpy.ravel(order={order!r}) depends on the memory layout of the caller's "
                                 "array, which a trace does not see; use order='C' or 'F'")
    return K.reshape(x, (x.size,))


def transpose(p: Probe, a: Any, axes: Any = None) -> Tracer:
    x = tracer(K.graph_of(a), a)
    perm = range(x.ndim)[::-1] if axes is None else np.lib.array_utils.normalize_axis_tuple(axes, x.ndim)
    return K.transpose(x, list(perm))


def matrix_transpose(p: Probe, x: Any, /) -> Tracer:
    t = tracer(K.graph_of(x), x)
    return K.transpose(t, list(range(t.ndim - 2)) + [t.ndim - 1, t.ndim - 2])


def swapaxes(p: Probe, a: Any, axis1: int, axis2: int) -> Tracer:
    x = tracer(K.graph_of(a), a)
    perm = list(range(x.ndim))
    i, j = int(axis1) % x.ndim, int(axis2) % x.ndim
    perm[i], perm[j] = perm[j], perm[i]
    return K.transpose(x, perm)


def moveaxis(p: Probe, a: Any, source: Any, destination: Any) -> Tracer:
    x = tracer(K.graph_of(a), a)
    src = np.lib.array_utils.normalize_axis_tuple(source, x.ndim, "source")
    dst = np.lib.array_utils.normalize_axis_tuple(destination, x.ndim, "destination")
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return K.transpose(x, order)


def rollaxis(p: Probe, a: Any, axis: int, start: int = 0) -> Tracer:
    x = tracer(K.graph_of(a), a)
    n = x.ndim
    axis = int(axis) % n
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    axes = [i for i in range(n) if i != axis]
    axes.insert(start, axis)
    return K.transpose(x, axes)


def _to_probed_shape(p: Probe, a: Any, *rest: Any, **kw: Any) -> Any:
    """Functions whose result is `a` reshaped to numpy's result shape (same elements, same order)."""
    return K.reshape(tracer(K.graph_of(a), a), _shape(p))


expand_dims = squeeze = _to_probed_shape


def broadcast_to(p: Probe, array: Any, shape: Any, subok: bool = False) -> Tracer:
    return K.broadcast_to(tracer(K.graph_of(array), array), _shape(p))


def _each(p: Probe, arys: tuple, fn: Any) -> Any:
    graph = K.graph_of(arys)
    results = p.result if isinstance(p.result, tuple) else (p.result,)
    outs = tuple(fn(tracer(graph, a), tuple(np.shape(r))) for a, r in zip(arys, results))
    return outs if isinstance(p.result, tuple) else outs[0]


def atleast_nd(p: Probe, *arys: Any) -> Any:
    return _each(p, arys, K.reshape)


def broadcast_arrays(p: Probe, *args: Any, subok: bool = False) -> Any:
    return _each(p, args, K.broadcast_to)


def meshgrid(p: Probe, *xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> Any:
    """numpy's meshgrid: each input reshaped to its own axis, then broadcast (unless sparse)."""
    graph = K.graph_of(xi)
    ts = [tracer(graph, x) for x in xi]
    nd = len(ts)
    shapes = [[1] * nd for _ in ts]
    for i, t in enumerate(ts):
        shapes[i][i] = t.size
    if indexing == "xy" and nd > 1:
        shapes[0][0], shapes[0][1] = 1, ts[0].size
        shapes[1][0], shapes[1][1] = ts[1].size, 1
    out = [K.reshape(t, s) for t, s in zip(ts, shapes)]
    if not sparse:
        full = K.check_broadcast(graph, *(o.shape for o in out))
        out = [K.broadcast_to(o, full) for o in out]
    return tuple(out)


def copy(p: Probe, a: Any, order: str = "K", subok: bool = False) -> Tracer:
    return tracer(K.graph_of(a), a)


def astype(p: Probe, x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Tracer:
    graph = K.graph_of(x)
    return K.cast(tracer(graph, x), K.check_dtype(graph, np.dtype(dtype), "numpy.astype"))


def min_scalar_type(p: Probe, a: Any, /) -> Any:
    """Static for an array of rank >= 1 (its dtype); a 0-d array's answer depends on its value."""
    graph = K.graph_of(a)
    if isinstance(a, Tracer) and a.ndim == 0:
        raise unsupported(graph, "numpy.min_scalar_type of a 0-d traced array depends on its value, which a trace "
                                 "does not have")
    return p.result


# ---------------------------------------------------------------- values from a shape
def _like(value: Any) -> Any:
    def f(p: Probe | None, a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None, *,
          device: Any = None) -> Tracer:
        graph = K.graph_of(a)
        x = tracer(graph, a)
        dt = K.check_dtype(graph, np.dtype(dtype) if dtype is not None else x.dtype, "numpy.zeros_like")
        out = x.shape if shape is None else tuple(np.atleast_1d(shape).tolist()) if np.ndim(shape) else (int(shape),)
        return K.full(graph, value, dt, out)
    return f


zeros_like, ones_like, empty_like = _like(0), _like(1), _like(0)  # empty_like: any values are numpy's answer


def full_like(p: Probe | None, a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
              shape: Any = None, *, device: Any = None) -> Tracer:
    graph = K.graph_of(a, fill_value)
    x = tracer(graph, a)
    dt = K.check_dtype(graph, np.dtype(dtype) if dtype is not None else x.dtype, "numpy.full_like")
    out = x.shape if shape is None else tuple(np.atleast_1d(shape).tolist()) if np.ndim(shape) else (int(shape),)
    if isinstance(fill_value, Tracer):  # copyto with casting='unsafe': astype, then broadcast
        K.check_broadcast(graph, fill_value.shape, out)
        return K.broadcast_to(K.cast(fill_value, dt), out)
    value = np.full_like(np.zeros((), dt), fill_value)  # numpy's own conversion of the fill value
    return K.full(graph, value, dt, out)


# ---------------------------------------------------------------- indexing
def take(p: Probe | None, a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tracer:
    graph = K.graph_of(a, indices)
    if out is not None:
        raise unsupported(graph, "numpy.take(..., out=...) cannot write into an array inside a traced function")
    x = tracer(graph, a)
    if axis is None:
        x, ax = K.reshape(x, (x.size,)), 0
    else:
        (ax,) = K.normalize_axes(graph, axis, x.ndim)
    if isinstance(indices, Tracer):
        if mode != "raise":
            raise unsupported(graph, f"numpy.take(mode={mode!r}) with traced indices is not supported; use "
                                     "mode='raise' (the default), or clip / wrap the indices with np.clip or %")
        if not np.issubdtype(indices.dtype, np.integer):
            raise K.from_numpy_error(graph, TypeError(f"Cannot cast array data from dtype('{indices.dtype}') to "
                                                      "dtype('int64') according to the rule 'safe'"), "numpy.take")
        return K.gather(x, ax, indices, "numpy.take")
    try:
        idx = np.take(np.arange(x.shape[ax]), indices, mode=mode)  # numpy's wrap / clip / raise, and its errors
    except Exception as exc:  # noqa: BLE001
        raise K.from_numpy_error(graph, exc, "numpy.take") from None
    return K.take(x, ax, idx, "numpy.take")


def slice_axes(x: Tracer, bounds: Sequence[tuple[int, int, int]]) -> Tracer:
    """`x` sliced by normalized `(start, limit, stride)` per axis (`slice.indices`): one
    `prim.slice`, or `x` itself when every axis is taken whole."""
    from fusebind.dialect.prim import SliceOp

    bounds = [(int(s), int(lim), int(k)) for s, lim, k in bounds]
    if all(b == (0, n, 1) for b, n in zip(bounds, x.shape)):
        return x
    starts, limits, strides = zip(*bounds)
    return x.graph.add(SliceOp(x.value, starts, limits, strides))


def getitem(x: Tracer, key: Any) -> Tracer:
    """`x[key]` for integers, slices (any step), Ellipsis and None: numpy's basic indexing, as
    one `prim.slice` (ints are length-1 slices) and a `prim.reshape` that drops the int axes and
    inserts the None axes (the probe gives numpy's result shape)."""
    graph = x.graph
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, Tracer):
            raise unsupported(graph, "indexing with a traced array needs a gather op, which fusebind does not have; "
                                     "use fb.where(mask, x, other) to select elements")
        if isinstance(k, (bool, np.bool_)) or not (k is None or k is Ellipsis or isinstance(k, (slice, int,
                                                                                               np.integer))):
            raise unsupported(graph, f"indexing with {type(k).__name__} (boolean or integer-array indexing) is not "
                                     "supported on traced arrays; use integers, slices, ... and None, or "
                                     "np.take(x, indices, axis)")
    p = probe(lambda s: s[key], (x,), {}, "full", graph, "indexing")  # numpy's IndexErrors and result shape
    spec = list(items)
    if Ellipsis in spec:
        at = spec.index(Ellipsis)
        used = sum(1 for k in spec if k is not None and k is not Ellipsis)
        spec[at:at + 1] = [slice(None)] * (x.ndim - used)
    axis_items = [k for k in spec if k is not None]
    axis_items += [slice(None)] * (x.ndim - len(axis_items))
    bounds = []
    for ax, k in enumerate(axis_items):
        n = x.shape[ax]
        if isinstance(k, slice):
            bounds.append(k.indices(n))
        else:  # an int (the probe has range-checked it): a length-1 slice, its dim dropped by the reshape
            i = int(k) + n if int(k) < 0 else int(k)
            bounds.append((i, i + 1, 1))
    y = slice_axes(x, bounds)
    return K.reshape(y, _shape(p))
