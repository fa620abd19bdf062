"""numpy's products and norms on traced arrays: np.dot, np.inner, np.outer, np.kron,
np.tensordot, np.vdot, the matmul-family gufuncs and np.linalg.norm.

Owns numpy's shape rules for each product (np.dot of two 1-D arrays is a
0-d inner product, of N-D and M-D arrays a sum over a's last and b's
second-to-last axis; np.inner sums over both last axes; np.kron interleaves
axes) and their errors. np.dot, np.inner, np.vdot and np.tensordot label
their axes and hand the contraction to the einsum planner
(`numpy_einsum.contract`: one prim.matmul, or a multiply and a sum, between
transposes and reshapes); np.outer and np.kron are the multiply ufunc on
reshaped operands. Also the vector and Frobenius norms (matrix 2-norms need an SVD and
are refused). Python scalars are strong here: these functions make arrays
of their operands, so np.dot(2, int32_array) is int64, as in numpy.

Implementations take the probe first (`numpy_probe.Probe`, maybe None for
large operands), then the numpy function's arguments.
Must not: compute a product in another dtype than numpy's result type.
"""

from __future__ import annotations

import math
import string
from typing import Any, Sequence

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.numpy_einsum import contract
from fusebind.api.numpy_kernels import unsupported, value_error
from fusebind.api.numpy_probe import Probe
from fusebind.api.numpy_ufuncs import call
from fusebind.api.tracer import Graph, Tracer, as_tracer
from fusebind.dialect import prim

_LABELS = string.ascii_letters  # einsum labels of the axes np.tensordot and np.inner contract


def strong(graph: Graph, v: Any) -> Tracer:
    """An operand as numpy's np.asarray makes it (a Python scalar becomes int64 / float64 / bool)."""
    if isinstance(v, Tracer):
        return v
    if isinstance(v, (bool, int, float)) and not isinstance(v, np.generic):
        return K.constant(graph, v, np.asarray(v).dtype)
    return as_tracer(graph, v)


def _common(graph: Graph, *xs: Tracer, what: str) -> list[Tracer]:
    dt = K.check_dtype(graph, np.result_type(*(x.dtype for x in xs)), what)
    return [K.cast(x, dt) for x in xs]


def _multiply(a: Any, b: Any, what: str) -> Tracer:
    return call(np.multiply, (a, b), {}, what, strong=True)


def _no_out(graph: Graph, out: Any, what: str) -> None:
    if out is not None:
        raise unsupported(graph, f"{what}(..., out=...) cannot write into an array inside a traced function")


def _labels_fit(graph: Graph, x: Tracer, y: Tracer, what: str) -> None:
    if x.ndim + y.ndim > len(_LABELS):
        raise unsupported(graph, f"{what} of arrays of {x.ndim} and {y.ndim} dimensions: fusebind's contraction "
                                 f"labels cover {len(_LABELS)} in all; reshape the operands to fewer dimensions")


def dot(p: Probe | None, a: Any, b: Any, out: Any = None) -> Tracer:
    graph = K.graph_of(a, b)
    _no_out(graph, out, "numpy.dot")
    x, y = strong(graph, a), strong(graph, b)
    if x.ndim == 0 or y.ndim == 0:
        return _multiply(x, y, "numpy.dot")
    x, y = _common(graph, x, y, what="numpy.dot")
    ky = y.shape[0] if y.ndim == 1 else y.shape[-2]
    if x.shape[-1] != ky:
        raise value_error(graph, f"shapes {x.shape} and {y.shape} not aligned: {x.shape[-1]} (dim {x.ndim - 1}) "
                                 f"!= {ky} (dim {max(y.ndim - 2, 0)})")
    # a's last axis with b's second-to-last (its only one if 1-D); a's other axes, then b's, stay
    _labels_fit(graph, x, y, "numpy.dot")
    la = _LABELS[:x.ndim]
    lb = _LABELS[x.ndim:x.ndim + y.ndim - 1]
    lb = lb[:-1] + la[-1] + lb[-1:] if y.ndim >= 2 else la[-1]
    return contract([x, y], [la, lb], la[:-1] + lb.replace(la[-1], ""), "numpy.dot")


def vdot(p: Probe | None, a: Any, b: Any) -> Tracer:
    graph = K.graph_of(a, b)
    x, y = strong(graph, a), strong(graph, b)
    if x.size != y.size:
        raise value_error(graph, f"cannot reshape array of size {y.size} into shape ({x.size},)")
    x, y = _common(graph, K.reshape(x, (x.size,)), K.reshape(y, (y.size,)), what="numpy.vdot")
    return contract([x, y], ["a", "a"], "", "numpy.vdot")  # a product and a sum: it fuses


def inner(p: Probe | None, a: Any, b: Any) -> Tracer:
    graph = K.graph_of(a, b)
    x, y = strong(graph, a), strong(graph, b)
    if x.ndim == 0 or y.ndim == 0:
        return _multiply(x, y, "numpy.inner")
    x, y = _common(graph, x, y, what="numpy.inner")
    k = x.shape[-1]
    if y.shape[-1] != k:
        raise value_error(graph, f"shapes {x.shape} and {y.shape[::-1]} not aligned: {k} (dim {x.ndim - 1}) != "
                                 f"{y.shape[-1]} (dim 0)")
    _labels_fit(graph, x, y, "numpy.inner")
    la, lb = _LABELS[:x.ndim], _LABELS[x.ndim:x.ndim + y.ndim - 1] + _LABELS[x.ndim - 1]
    return contract([x, y], [la, lb], la[:-1] + lb[:-1], "numpy.inner")


def outer(p: Probe | None, a: Any, b: Any, out: Any = None) -> Tracer:
    graph = K.graph_of(a, b)
    _no_out(graph, out, "numpy.outer")
    x, y = strong(graph, a), strong(graph, b)
    return _multiply(K.reshape(x, (x.size, 1)), K.reshape(y, (1, y.size)), "numpy.outer")


def linalg_outer(p: Probe | None, x1: Any, x2: Any) -> Tracer:
    graph = K.graph_of(x1, x2)
    x, y = strong(graph, x1), strong(graph, x2)
    if x.ndim != 1 or y.ndim != 1:
        raise value_error(graph, f"Input arrays must be one-dimensional, but they are {x.ndim=} and {y.ndim=}.")
    return outer(p, x, y)


def kron(p: Probe | None, a: Any, b: Any) -> Tracer:
    """numpy's kron: pad the ranks with leading 1s, interleave the axes, multiply, merge pairs."""
    graph = K.graph_of(a, b)
    x, y = strong(graph, a), strong(graph, b)
    if x.ndim == 0 or y.ndim == 0:
        return _multiply(x, y, "numpy.kron")
    nd = max(x.ndim, y.ndim)
    xs, ys = (1,) * (nd - x.ndim) + x.shape, (1,) * (nd - y.ndim) + y.shape
    xi = K.reshape(x, tuple(d for s in xs for d in (s, 1)))
    yi = K.reshape(y, tuple(d for s in ys for d in (1, s)))
    return K.reshape(_multiply(xi, yi, "numpy.kron"), tuple(i * j for i, j in zip(xs, ys)))


def tensordot(p: Probe | None, a: Any, b: Any, axes: Any = 2) -> Tracer:
    """numpy's tensordot, step by step: move the summed axes together, one matrix product, reshape."""
    graph = K.graph_of(a, b)
    x, y = strong(graph, a), strong(graph, b)
    try:
        iter(axes)
    except TypeError:
        axes_a, axes_b = list(range(-int(axes), 0)), list(range(0, int(axes)))
    else:
        axes_a, axes_b = axes
    axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
    axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    K.normalize_axes(graph, tuple(axes_a), x.ndim)  # numpy: out of range or repeated axes raise
    K.normalize_axes(graph, tuple(axes_b), y.ndim)
    if len(axes_a) != len(axes_b) or any(x.shape[i] != y.shape[j] for i, j in zip(axes_a, axes_b)):
        raise value_error(graph, "shape-mismatch for sum")
    axes_a, axes_b = [int(i) % x.ndim for i in axes_a], [int(j) % y.ndim for j in axes_b]
    x, y = _common(graph, x, y, what="numpy.tensordot")
    _labels_fit(graph, x, y, "numpy.tensordot")
    la = _LABELS[:x.ndim]
    fresh = iter(_LABELS[x.ndim:])
    shared = dict(zip(axes_b, (la[i] for i in axes_a)))
    lb = "".join(shared[j] if j in shared else next(fresh) for j in range(y.ndim))
    out = "".join(c for i, c in enumerate(la) if i not in axes_a) + "".join(
        c for j, c in enumerate(lb) if j not in axes_b)
    return contract([x, y], [la, lb], out, "numpy.tensordot")


def linalg_tensordot(p: Probe | None, x1: Any, x2: Any, *, axes: Any = 2) -> Tracer:
    return tensordot(p, x1, x2, axes)


def linalg_vecdot(p: Probe | None, x1: Any, x2: Any, *, axis: int = -1) -> Tracer:
    return call(np.vecdot, (x1, x2), {"axis": axis}, "numpy.linalg.vecdot")


def linalg_matmul(p: Probe | None, x1: Any, x2: Any) -> Tracer:
    return call(np.matmul, (x1, x2), {}, "numpy.linalg.matmul")


# ---------------------------------------------------------------- norms
def _sum(x: Tracer, axes: Sequence[int], keepdims: bool) -> Tracer:
    return K.reduce("sum", x, axes, keepdims)


def norm(p: Probe | None, x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tracer:
    """numpy.linalg.norm, following numpy's code path for each ord."""
    graph = K.graph_of(x)
    t = strong(graph, x)
    if t.dtype.kind != "f":
        t = K.cast(t, np.float64)
    nd = t.ndim
    if axis is None and (ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1)):
        v = K.reshape(t, (t.size,))
        r = K.op(prim.SqrtOp, _sum(K.op(prim.MulOp, v, v), (0,), False))
        return K.reshape(r, (1,) * nd) if keepdims else r
    axes = tuple(range(nd)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    norm_axes = [a % nd if -nd <= a < nd else a for a in axes]
    K.normalize_axes(graph, tuple(axes), nd)
    absx = K.op(prim.AbsOp, t)
    if len(axes) == 1:
        ax = tuple(norm_axes)
        if isinstance(ord, str):
            raise value_error(graph, f"Invalid norm order '{ord}' for vectors")
        if ord == np.inf:
            return K.reduce("max", absx, ax, keepdims)
        if ord == -np.inf:
            return K.reduce("min", absx, ax, keepdims)
        if ord == 0:
            return _sum(K.cast(K.compare("ne", t, K.like(t, 0)), t.dtype), ax, keepdims)
        if ord == 1:
            return _sum(absx, ax, keepdims)
        if ord is None or ord == 2:
            return K.op(prim.SqrtOp, _sum(K.op(prim.MulOp, t, t), ax, keepdims))
        powered = call(np.power, (absx, ord), {}, "numpy.linalg.norm")
        ret = _sum(K.cast(powered, t.dtype), ax, keepdims)
        return call(np.power, (ret, np.reciprocal(ord, dtype=ret.dtype)), {}, "numpy.linalg.norm")
    if len(axes) != 2:
        raise value_error(graph, "Improper number of dimensions to norm.")
    row, col = norm_axes
    if ord in (None, "fro", "f"):
        r = K.op(prim.SqrtOp, _sum(K.op(prim.MulOp, t, t), (row, col), False))
    elif ord in (1, -1, np.inf, -np.inf):
        over, then = (row, col) if ord in (1, -1) else (col, row)
        if then > over:
            then -= 1
        s = _sum(absx, (over,), False)
        r = K.reduce("max" if ord > 0 else "min", s, (then,), False)
    else:
        raise unsupported(graph, f"numpy.linalg.norm(ord={ord!r}) of a matrix needs a singular value "
                                 "decomposition, which fusebind does not have; compute it outside the jitted function")
    if keepdims:
        shape = list(t.shape)
        shape[row] = shape[col] = 1
        r = K.reshape(r, shape)
    return r


def vector_norm(p: Probe | None, x: Any, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Tracer:
    graph = K.graph_of(x)
    t = strong(graph, x)
    shape = list(t.shape)
    if axis is None:
        t, ax = K.reshape(t, (t.size,)), 0
    elif isinstance(axis, tuple):
        K.normalize_axes(graph, axis, t.ndim)
        norm_axes = [int(a) % t.ndim for a in axis]
        rest = [i for i in range(t.ndim) if i not in norm_axes]
        t = K.reshape(K.transpose(t, norm_axes + rest), (math.prod(shape[i] for i in norm_axes),
                                                          *[shape[i] for i in rest]))
        ax = 0
    else:
        ax = axis
    r = norm(None, t, ord, ax)
    if keepdims:
        for i in K.normalize_axes(graph, None if axis is None else axis, len(shape)):
            shape[i] = 1
        r = K.reshape(r, shape)
    return r


def matrix_norm(p: Probe | None, x: Any, *, keepdims: bool = False, ord: Any = "fro") -> Tracer:
    return norm(p, x, ord, (-2, -1), keepdims)
