"""numpy's elementwise array functions (not ufuncs) on traced arrays: np.where,
np.clip, np.nan_to_num, np.isclose, np.tril / np.triu and the real/imag family.

Owns their numpy semantics: the dtype numpy gives (from the probe: numpy
run on stand-ins, Python scalars weak as in NEP 50), numpy's order of
operations (np.isclose is numpy's own formula; np.clip is maximum then
minimum, NaN-propagating, as numpy's clip loop), and the values numpy
substitutes (np.nan_to_num's largest finite float).

Implementations take the probe first, then the numpy function's arguments.
Must not: compute in another dtype than numpy's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.promotion import is_floating
from fusebind.api.numpy_kernels import unsupported
from fusebind.api.numpy_probe import Probe
from fusebind.api.numpy_ufuncs import ELEMENTWISE, call, to_dtype
from fusebind.api.tracer import Graph, Tracer, as_tracer, weak_kind

NO = np._NoValue


def _dtype(p: Probe) -> np.dtype:
    return np.asarray(p.result).dtype


def where(p: Probe, condition: Any, x: Any = NO, y: Any = NO) -> Tracer:
    """np.where(condition, x, y): x where condition (its truth value) holds, else y, in numpy's result type."""
    graph = K.graph_of(condition, x, y)
    if x is NO and y is NO:
        raise unsupported(graph, "numpy.where(condition) with one argument (np.nonzero) has a shape that depends "
                                 "on the values; use np.where(condition, x, y)")
    R = K.check_dtype(graph, _dtype(p), "numpy.where")
    c = K.truth(condition if isinstance(condition, Tracer) else as_tracer(graph, condition))
    a, b = to_dtype(graph, x, R), to_dtype(graph, y, R)
    K.check_broadcast(graph, c.shape, a.shape, b.shape)
    return K.select(c, a, b)


def clip(p: Probe, a: Any, a_min: Any = NO, a_max: Any = NO, out: Any = None, *, min: Any = NO, max: Any = NO,
         **kwargs: Any) -> Tracer:
    """numpy's _clip: maximum with the lower bound, then minimum with the upper (None: no bound)."""
    graph = K.graph_of(a, a_min, a_max, min, max)
    if out is not None or set(kwargs) - {"dtype", "casting"}:
        raise unsupported(graph, "numpy.clip(..., out= or where=) is not supported on traced arrays")
    lo = (None if min is NO else min) if a_min is NO else a_min
    hi = (None if max is NO else max) if a_max is NO else a_max
    if lo is None and hi is None:
        return K.cast(a if isinstance(a, Tracer) else as_tracer(graph, a), _dtype(p))
    if lo is None or hi is None:
        return call(np.maximum if hi is None else np.minimum, (a, lo if hi is None else hi), kwargs, "numpy.clip")
    R = K.check_dtype(graph, _dtype(p), "numpy.clip")
    x, l, h = (to_dtype(graph, v, R) for v in (a, lo, hi))
    K.check_broadcast(graph, x.shape, l.shape, h.shape)
    return ELEMENTWISE["minimum"](ELEMENTWISE["maximum"](x, l), h)


def nan_to_num(p: Probe, x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Tracer:
    graph = K.graph_of(x)
    t = x if isinstance(x, Tracer) else as_tracer(graph, x)
    if not is_floating(t.dtype):
        return t  # numpy returns integers and bools unchanged
    if any(isinstance(v, Tracer) for v in (nan, posinf, neginf)):
        raise unsupported(graph, "numpy.nan_to_num: nan=, posinf= and neginf= must be numbers, not traced arrays")
    info = np.finfo(t.dtype)
    big = info.max if posinf is None else posinf
    small = info.min if neginf is None else neginf
    inf = K.like(t, np.inf)
    with np.errstate(over="ignore"):
        nan_v, big_v, small_v = (K.like(t, np.asarray(v).astype(t.dtype)) for v in (nan, big, small))
    out = K.select(K.compare("eq", t, K.like(t, -np.inf)), small_v, t)
    out = K.select(K.compare("eq", t, inf), big_v, out)
    return K.select(K.isnan(t), nan_v, out)


def isclose(p: Probe, a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Tracer:
    """numpy's own code, line by line: Python scalars stay Python scalars (weak), y is made inexact,
    and the operators are the traced ones."""
    graph = K.graph_of(a, b, rtol, atol)
    if isinstance(rtol, Tracer) or isinstance(atol, Tracer):
        raise unsupported(graph, "numpy.isclose: rtol= and atol= must be numbers, not traced arrays")
    x, y = (v if isinstance(v, (int, float, complex)) or isinstance(v, Tracer) else np.asanyarray(v) for v in (a, b))
    if weak_kind(y) is None and getattr(y, "dtype", None) is not None:
        dt = np.result_type(y.dtype, 1.0)
        y = K.cast(y, dt) if isinstance(y, Tracer) else np.asanyarray(y, dtype=dt)
    elif weak_kind(y) is int:
        y = float(y) if not isinstance(y, Tracer) else y * 1.0  # numpy: float(y), a Python float
    result = (np.less_equal(abs(x - y), atol + rtol * abs(y)) & np.isfinite(y) | (x == y))
    if equal_nan:
        result = result | (np.isnan(x) & np.isnan(y))
    return result


def _tri(lower: bool) -> Any:
    def f(p: Probe, m: Any, k: int = 0) -> Tracer:
        """numpy: where(mask, m, 0) with mask = tri(rows, cols, k) (or its complement for triu)."""
        graph = K.graph_of(m)
        t = m if isinstance(m, Tracer) else as_tracer(graph, m)
        mask = np.tri(*t.shape[-2:], k=k if lower else k - 1, dtype=bool)  # 1-D m: an (n, n) mask, as numpy
        keep = K.constant(graph, mask if lower else ~mask, np.bool_)
        return K.select(keep, t, K.like(t, 0))
    return f


tril, triu = _tri(True), _tri(False)


def _as(graph: Graph, v: Any) -> Tracer:
    return v if isinstance(v, Tracer) else as_tracer(graph, v)


def real(p: Probe, val: Any) -> Tracer:
    return _as(K.graph_of(val), val)


def imag(p: Probe, val: Any) -> Tracer:
    t = _as(K.graph_of(val), val)
    return K.full(t.graph, 0, t.dtype, t.shape)


def iscomplex(p: Probe, x: Any) -> Tracer:
    t = _as(K.graph_of(x), x)
    return K.full(t.graph, False, np.bool_, t.shape)


def isreal(p: Probe, x: Any) -> Tracer:
    t = _as(K.graph_of(x), x)
    return K.full(t.graph, True, np.bool_, t.shape)


def real_if_close(p: Probe, a: Any, tol: Any = 100) -> Tracer:
    return _as(K.graph_of(a), a)


def _isinf_signed(sign: float) -> Any:
    def f(p: Probe, x: Any, out: Any = None) -> Tracer:
        t = _as(K.graph_of(x), x)
        if out is not None:
            raise unsupported(t.graph, "out= cannot write into an array inside a traced function")
        if not is_floating(t.dtype):
            return K.full(t.graph, False, np.bool_, t.shape)  # numpy: never infinite
        return K.compare("eq", t, K.like(t, sign * np.inf))
    return f


isposinf, isneginf = _isinf_signed(1.0), _isinf_signed(-1.0)


def select(p: Probe, condlist: Any, choicelist: Any, default: Any = 0) -> Tracer:
    """numpy's select: the first choice whose condition holds, else default, in numpy's result dtype."""
    graph = K.graph_of(condlist, choicelist, default)
    R = K.check_dtype(graph, _dtype(p), "numpy.select")
    conds = [_as(graph, c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != np.bool_:
            raise unsupported(graph, f"invalid entry {i} in condlist: should be boolean ndarray")
    choices = [to_dtype(graph, c, R) for c in choicelist]
    out = to_dtype(graph, default, R)
    shape = K.check_broadcast(graph, *(t.shape for t in conds + choices + [out]))
    for c, v in reversed(list(zip(conds, choices))):
        out = K.select(c, v, out)
    return K.broadcast_to(out, shape)


def polyval(p: Probe, coeffs: Any, x: Any) -> Tracer:
    """numpy's Horner loop: y = zeros_like(x); y = y * x + c for each coefficient (numpy scalars, strong)."""
    graph = K.graph_of(coeffs, x)
    xt = _as(graph, x)
    y = K.full(graph, 0, xt.dtype, xt.shape)
    cs = coeffs if isinstance(coeffs, Tracer) else np.asarray(coeffs)
    for c in cs:
        y = y * xt + c
    return y
