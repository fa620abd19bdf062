"""numpy's reductions on traced arrays: np.sum, np.max, np.mean, np.var, np.argmax, np.nanargmax, ufunc.reduce, ...

Owns the numpy reduction functions (and the `Tracer` methods of the same
names, which call them): their `axis`, `keepdims`, `dtype`, `initial` and
`where` arguments, numpy's accumulation dtype (taken from the probe: numpy
itself run on stand-ins, so int32 sums in int64 and integer means in
float64, as numpy does), numpy's identities for empty axes, and the
ufunc.reduce of the reorderable ufuncs (add, multiply, maximum, minimum, fmax, fmin,
logical_and, logical_or, and bitwise_and / bitwise_or on bools).

Each implementation takes the probe first (`numpy_probe.Probe`), then the
numpy function's own arguments.
Must not: reduce in a dtype other than numpy's (the probe says which).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.numpy_kernels import unsupported
from fusebind.api.numpy_probe import Probe, check, probe
from fusebind.api.numpy_ufuncs import call
from fusebind.api.promotion import is_floating
from fusebind.api.tracer import Graph, Tracer, as_tracer
from fusebind.dialect import prim
from fusebind.dialect.prim_checks import CheckOp

NO = np._NoValue


def _prod(x: Tracer, axes: tuple[int, ...], keepdims: bool) -> Tracer:
    """prim.reduce_prod of x over normalized axes in x's dtype; an empty axis gives 1."""
    axes = tuple(sorted(axes))
    if not axes:
        return x
    out_shape = K.reduced_shape(x.shape, axes, keepdims)
    if math.prod(x.shape[a] for a in axes) == 0 or math.prod(out_shape) == 0:
        return K.full(x.graph, 1, x.dtype, out_shape)
    return x.graph.add(prim.ReduceProdOp(x.value, list(axes), keepdims))


def _given(v: Any) -> bool:
    return v is not NO


def tracer(graph: Graph, v: Any) -> Tracer:
    return v if isinstance(v, Tracer) else as_tracer(graph, v)


def _dtype(p: Probe) -> np.dtype:
    return np.asarray(p.result).dtype


def _no_out(graph: Graph, out: Any, what: str) -> None:
    if out is not None:
        raise unsupported(graph, f"{what}(..., out=...) cannot write into an array inside a traced function; use "
                                 "the result")


def _combine(kind: str, r: Tracer, init: Tracer) -> Tracer:
    if kind in ("any", "all"):
        return (K.logical_or if kind == "any" else K.logical_and)(r, init)
    if kind == "sum":
        return K.op(prim.AddOp, r, init) if r.dtype != np.bool_ else K.logical_or(r, init)
    if kind == "prod":
        return K.op(prim.MulOp, r, init)
    return K.op(prim.MaxOp if kind.endswith("max") else prim.MinOp, r, init)


def reduction(what: str, kind: str, a: Any, axis: Any, keepdims: Any, R: np.dtype, initial: Any = NO,
              where: Any = True) -> Tracer:
    """numpy's `kind` reduction (sum, prod, max, min, nanmax, nanmin, any, all) of `a`
    over `axis`, accumulated in numpy's dtype R, with numpy's `initial` and `where`."""
    graph = K.graph_of(a, where)
    x = tracer(graph, a)
    keepdims = bool(keepdims) if _given(keepdims) else False
    axes = K.normalize_axes(graph, axis, x.ndim)
    if R == np.bool_ and kind in ("sum", "prod"):
        kind = "any" if kind == "sum" else "all"  # add on bools is logical or, multiply logical and
    x = K.truth(x) if kind in ("any", "all") else K.cast(x, K.check_dtype(graph, R, what))
    if isinstance(initial, Tracer):
        raise unsupported(graph, f"{what}(..., initial=...) must be a number, not a traced array")
    init = K.constant(graph, np.asarray(initial).astype(x.dtype), x.dtype) if _given(initial) else None
    if where is not True and _given(where):
        mask = K.truth(tracer(graph, where))
        if K.check_broadcast(graph, mask.shape, x.shape) != x.shape:
            raise K.value_error(graph, f"{what}: the where mask of shape {mask.shape} does not broadcast to the "
                                       f"array's shape {x.shape}")
        if init is None and kind not in ("sum", "prod", "any", "all"):
            raise K.value_error(graph, f"reduction operation '{kind}' does not have an identity, so to use a "
                                       "where mask one has to specify 'initial'")
        identity = {"sum": 0, "prod": 1, "any": False, "all": True}.get(kind)
        fill = K.like(x, identity) if identity is not None else init  # max/min: initial takes part anyway
        x = K.select(mask, x, fill)
    out_shape = K.reduced_shape(x.shape, axes, keepdims)
    if init is not None and math.prod(x.shape[i] for i in axes) == 0:
        return K.broadcast_to(init, out_shape)
    if kind in ("nanmax", "nanmin") and is_floating(x.dtype):
        nan = K.isnan(x)
        extreme = K.like(x, -np.inf if kind == "nanmax" else np.inf)
        m = K.reduce(kind[3:], K.select(nan, extreme, x), axes, keepdims)
        r = K.select(K.reduce("all", nan, axes, keepdims), K.like(x, np.nan), m)
    elif kind == "prod":
        r = _prod(x, axes, keepdims)
    else:
        r = K.reduce(kind.replace("nan", ""), x, axes, keepdims)
    return _combine(kind, r, init) if init is not None else r


# ---------------------------------------------------------------- numpy functions
def sum_(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = NO,
         initial: Any = NO, where: Any = NO) -> Tracer:
    _no_out(K.graph_of(a), out, "numpy.sum")
    return reduction("numpy.sum", "sum", a, axis, keepdims, _dtype(p), initial, where)


def prod(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = NO,
         initial: Any = NO, where: Any = NO) -> Tracer:
    """np.prod in numpy's dtype (int32 and bool in int64, wrapping as numpy's integers do)."""
    _no_out(K.graph_of(a), out, "numpy.prod")
    return reduction("numpy.prod", "prod", a, axis, keepdims, _dtype(p), initial, where)


def _extreme(kind: str, what: str) -> Any:
    def f(p: Probe, a: Any, axis: Any = None, out: Any = None, keepdims: Any = NO, initial: Any = NO,
          where: Any = NO) -> Tracer:
        _no_out(K.graph_of(a), out, what)
        return reduction(what, kind, a, axis, keepdims, _dtype(p), initial, where)
    return f


max_, min_ = _extreme("max", "numpy.max"), _extreme("min", "numpy.min")
nanmax, nanmin = _extreme("nanmax", "numpy.nanmax"), _extreme("nanmin", "numpy.nanmin")


def _logical(kind: str) -> Any:
    def f(p: Probe, a: Any, axis: Any = None, out: Any = None, keepdims: Any = NO, *, where: Any = NO) -> Tracer:
        _no_out(K.graph_of(a), out, f"numpy.{kind}")
        return reduction(f"numpy.{kind}", kind, a, axis, keepdims, np.dtype(np.bool_), NO, where)
    return f


any_, all_ = _logical("any"), _logical("all")


def _float_acc(graph: Graph, p: Probe, what: str) -> np.dtype:
    R = _dtype(p)
    if not is_floating(R):  # (bfloat16 is kind "V" in numpy)
        raise unsupported(graph, f"{what} with an integer dtype= is not supported on traced arrays; use a float "
                                 "dtype")
    return K.check_dtype(graph, R, what)


def mean(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = NO, *,
         where: Any = NO) -> Tracer:
    graph = K.graph_of(a)
    _no_out(graph, out, "numpy.mean")
    if _given(where) and where is not True:
        raise unsupported(graph, "numpy.mean(..., where=...) is not supported on traced arrays; use "
                                 "np.sum(x, where=m) / np.sum(m)")
    x = K.cast(tracer(graph, a), _float_acc(graph, p, "numpy.mean"))
    return K.reduce("mean", x, K.normalize_axes(graph, axis, x.ndim), bool(keepdims) if _given(keepdims) else False)


def _var(what: str, root: bool) -> Any:
    def f(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
          keepdims: Any = NO, *, where: Any = NO, mean: Any = NO, correction: Any = NO) -> Tracer:
        """numpy's _var: mean in the accumulation dtype, then the mean squared deviation / (n - ddof)."""
        graph = K.graph_of(a)
        _no_out(graph, out, what)
        if (_given(where) and where is not True) or _given(mean):
            raise unsupported(graph, f"{what}(..., where= or mean=) is not supported on traced arrays")
        ddof = correction if _given(correction) else ddof
        x = tracer(graph, a)
        axes = K.normalize_axes(graph, axis, x.ndim)
        keep = bool(keepdims) if _given(keepdims) else False
        acc = np.dtype(dtype) if dtype is not None else (np.dtype(np.float64) if x.dtype.kind in "iub" else x.dtype)
        n = math.prod(x.shape[i] for i in axes)
        total = K.reduce("sum", K.cast(x, K.check_dtype(graph, acc, what)), axes, keepdims=True)
        mu = call(np.true_divide, (total, n), {})
        d = call(np.subtract, (x, mu), {})
        sq = K.reduce("sum", K.cast(call(np.multiply, (d, d), {}), _dtype(p)), axes, keep)
        r = call(np.true_divide, (sq, max(n - ddof, 0)), {})
        return call(np.sqrt, (r,), {}) if root else r
    return f


var, std = _var("numpy.var", False), _var("numpy.std", True)


def ptp(p: Probe, a: Any, axis: Any = None, out: Any = None, keepdims: Any = NO) -> Tracer:
    graph = K.graph_of(a)
    _no_out(graph, out, "numpy.ptp")
    x = tracer(graph, a)
    hi = reduction("numpy.ptp", "max", x, axis, keepdims, x.dtype)
    lo = reduction("numpy.ptp", "min", x, axis, keepdims, x.dtype)
    return call(np.subtract, (hi, lo), {}, "numpy.ptp")


def arg_reduce(kind: str, x: Tracer, axis: int, keepdims: bool) -> Tracer:
    """numpy's argmax / argmin over one normalized axis as one prim.reduce_arg* op (int64:
    the first index of the extreme value, or of the first NaN); bools are compared as 0/1."""
    graph = x.graph
    if x.shape[axis] == 0:
        raise K.value_error(graph, f"attempt to get {kind} of an empty sequence")
    out_shape = K.reduced_shape(x.shape, (axis,), keepdims)
    if math.prod(out_shape) == 0:
        return K.full(graph, 0, np.int64, out_shape)  # nothing to compute: an empty result
    if x.dtype == np.bool_:
        x = K.cast(x, np.int32)
    cls = prim.ReduceArgMaxOp if kind == "argmax" else prim.ReduceArgMinOp
    return graph.add(cls(x.value, [axis], keepdims))


def _arg(kind: str) -> Any:
    def f(p: Probe, a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = NO) -> Tracer:
        graph = K.graph_of(a)
        _no_out(graph, out, f"numpy.{kind}")
        x = tracer(graph, a)
        keep = bool(keepdims) if _given(keepdims) else False
        if axis is None:
            r = arg_reduce(kind, K.reshape(x, (x.size,)), 0, False)
            return K.reshape(r, (1,) * x.ndim) if keep else r
        (ax,) = K.normalize_axes(graph, axis, x.ndim)
        return arg_reduce(kind, x, ax, keep)
    return f


argmax, argmin = _arg("argmax"), _arg("argmin")


def _nanarg(kind: str) -> Any:
    plain = argmax if kind == "argmax" else argmin

    def f(p: Probe, a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = NO) -> Tracer:
        """numpy's nanargmax / nanargmin: the arg-reduction with NaNs as -inf / +inf, and numpy's
        ValueError "All-NaN slice encountered" at the call when a slice holds only NaNs (prim.check:
        the error depends on the values, so it is raised after computing, as numpy does)."""
        graph = K.graph_of(a)
        name = f"numpy.nan{kind}"
        _no_out(graph, out, name)
        x = tracer(graph, a)
        if x.dtype.kind != "f":
            return plain(p, x, axis, keepdims=keepdims)
        nan = K.isnan(x)
        r = plain(p, K.select(nan, K.like(x, -np.inf if kind == "argmax" else np.inf), x), axis, keepdims=keepdims)
        if x.size == 0 or r.size == 0:
            return r  # (numpy raised for an empty axis already; an empty result has no slice to check)
        axes = tuple(range(x.ndim)) if axis is None else K.normalize_axes(graph, axis, x.ndim)
        all_nan = K.reduce("all", nan, axes, keepdims=bool(keepdims) if _given(keepdims) else False)
        if all_nan.shape != r.shape:
            all_nan = K.reshape(all_nan, r.shape)
        return graph.add(CheckOp(r.value, all_nan.value, f"{K.prefix(graph)}{name}: All-NaN slice encountered"))
    f.__name__ = f"nan{kind}"
    return f


nanargmax, nanargmin = _nanarg("argmax"), _nanarg("argmin")


def count_nonzero(p: Probe, a: Any, axis: Any = None, *, keepdims: bool = False) -> Tracer:
    graph = K.graph_of(a)
    x = K.cast(K.truth(tracer(graph, a)), np.int64)
    return K.reduce("sum", x, K.normalize_axes(graph, axis, x.ndim), bool(keepdims))


def average(p: Probe, a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
            keepdims: Any = NO) -> Any:
    """np.average: the mean, or with weights sum(a * w) / sum(w) in numpy's result dtype (a float:
    float64 for integer a). The weights must be a constant array: numpy raises ZeroDivisionError
    when they sum to zero, which a traced array's values cannot be checked for."""
    graph = K.graph_of(a)
    x = tracer(graph, a)
    keep = bool(keepdims) if _given(keepdims) else False
    axes = K.normalize_axes(graph, axis, x.ndim)
    if weights is None:
        avg = mean(p if not returned else probe(np.mean, (a, axis), {}, "auto", graph, "numpy.average"), a, axis,
                   keepdims=keepdims)
        n = math.prod(x.shape[i] for i in axes)
        return (avg, K.full(graph, n, avg.dtype, avg.shape)) if returned else avg
    if isinstance(weights, Tracer):
        raise unsupported(graph, "numpy.average(..., weights=<traced array>) is not supported (numpy raises "
                                 "ZeroDivisionError when the weights sum to zero, which a trace cannot check); pass "
                                 "constant weights, or use np.sum(a * w, axis) / np.sum(w, axis)")
    w = np.asarray(weights)
    R = np.result_type(x.dtype, w.dtype, "f8") if x.dtype.kind in "iub" else np.result_type(x.dtype, w.dtype)
    if w.shape != x.shape:  # numpy: a 1-D weight per position along the one axis (the probe checked it)
        (ax,) = axes
        w = w.reshape([w.size if i == ax else 1 for i in range(x.ndim)])
    scl = np.sum(np.broadcast_to(w, x.shape), axis=axes, dtype=R, keepdims=keep)
    if np.any(scl == 0.0):  # (numpy's probe raises it first; kept so no path divides by zero silently)
        raise K.value_error(graph, "numpy.average: Weights sum to zero, can't be normalized")
    xw = call(np.multiply, (K.cast(x, K.check_dtype(graph, R, "numpy.average")), K.constant(graph, w.astype(R), R)),
              {})
    avg = call(np.true_divide, (reduction("numpy.average", "sum", xw, axis, keepdims, R), K.constant(graph, scl, R)),
               {})
    return (avg, K.constant(graph, np.broadcast_to(scl, avg.shape).copy(), R)) if returned else avg


def nansum(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = NO,
           initial: Any = NO, where: Any = NO) -> Tracer:
    return _nan_reduction("nansum", "sum", 0, p, a, axis, out, keepdims, initial, where)


def nanmean(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = NO, *,
            where: Any = NO) -> Tracer:
    graph = K.graph_of(a)
    x = tracer(graph, a)
    if x.dtype.kind != "f":
        return mean(p, x, axis, dtype, out, keepdims, where=where)
    _no_out(graph, out, "numpy.nanmean")
    if _given(where) and where is not True:
        raise unsupported(graph, "numpy.nanmean(..., where=...) is not supported on traced arrays")
    R = _float_acc(graph, p, "numpy.nanmean")
    nan = K.isnan(x)
    tot = reduction("numpy.nanmean", "sum", K.select(nan, K.like(x, 0), x), axis, keepdims, R)
    cnt = reduction("numpy.nanmean", "sum", K.cast(K.logical_not(nan), np.int64), axis, keepdims, np.dtype(np.int64))
    q = K.op(prim.DivOp, K.cast(tot, np.float64), K.cast(cnt, np.float64))  # numpy divides in float64, then casts
    return K.cast(q, R)


def nanprod(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = NO,
            initial: Any = NO, where: Any = NO) -> Tracer:
    """np.nanprod: np.prod with NaNs replaced by 1."""
    return _nan_reduction("nanprod", "prod", 1, p, a, axis, out, keepdims, initial, where)


def _nan_reduction(name: str, kind: str, identity: int, p: Probe, a: Any, axis: Any, out: Any, keepdims: Any,
                   initial: Any, where: Any) -> Tracer:
    """numpy.<name>: the `kind` reduction with a float's NaNs replaced by the reduction's identity."""
    graph = K.graph_of(a)
    _no_out(graph, out, f"numpy.{name}")
    x = tracer(graph, a)
    if is_floating(x.dtype):
        x = K.select(K.isnan(x), K.like(x, identity), x)
    return reduction(f"numpy.{name}", kind, x, axis, keepdims, _dtype(p), initial, where)


def _f64_div(a: Tracer, b: Tracer, R: np.dtype) -> Tracer:
    """numpy's in-place `a / count` of the nan-functions: divided in float64, stored in R."""
    return K.cast(K.op(prim.DivOp, K.cast(a, np.float64), K.cast(b, np.float64)), R)


def _nanvar(what: str, root: bool) -> Any:
    def f(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
          keepdims: Any = NO, *, where: Any = NO, mean: Any = NO, correction: Any = NO) -> Tracer:
        """numpy's _nanvar: the mean over the non-NaN count, the squared deviations with NaNs as 0
        over (count - ddof), NaN where that is <= 0 (numpy warns there). Integers: np.var / np.std."""
        graph = K.graph_of(a)
        x = tracer(graph, a)
        if x.dtype.kind != "f":
            return (std if root else var)(p, x, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                                          correction=correction)
        _no_out(graph, out, what)
        if (_given(where) and where is not True) or _given(mean):
            raise unsupported(graph, f"{what}(..., where= or mean=) is not supported on traced arrays")
        ddof = correction if _given(correction) else ddof
        R = _float_acc(graph, p, what)
        axes = K.normalize_axes(graph, axis, x.ndim)
        keep = bool(keepdims) if _given(keepdims) else False
        nan = K.isnan(x)
        x0 = K.cast(K.select(nan, K.like(x, 0), x), K.check_dtype(graph, R, what))
        cnt = K.reduce("sum", K.cast(K.logical_not(nan), np.int64), axes, keepdims=True)
        avg = _f64_div(K.reduce("sum", x0, axes, keepdims=True), cnt, R)
        d = K.select(nan, K.like(x0, 0), call(np.subtract, (x0, avg), {}))
        sq = K.reduce("sum", call(np.multiply, (d, d), {}), axes, keep)
        dof = call(np.subtract, (K.reshape(cnt, sq.shape), K.constant(graph, ddof, np.int64)), {})
        v = K.select(call(np.less_equal, (dof, K.like(dof, 0)), {}), K.like(sq, np.nan), _f64_div(sq, dof, R))
        return call(np.sqrt, (v,), {}) if root else v
    return f


nanvar, nanstd = _nanvar("numpy.nanvar", False), _nanvar("numpy.nanstd", True)


# ---------------------------------------------------------------- ufunc.reduce
_REDUCE_KIND = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "fmax": "nanmax", "fmin": "nanmin",
                "logical_and": "all", "logical_or": "any", "bitwise_and": "all", "bitwise_or": "any"}


def ufunc_reduce(ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> Tracer:
    name = f"numpy.{ufunc.__name__}.reduce"
    graph = K.graph_of(inputs, kwargs)
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    if out is not None and any(o is not None for o in (out if isinstance(out, tuple) else (out,))):
        raise unsupported(graph, f"{name}(..., out=...) cannot write into an array inside a traced function")
    kind = _REDUCE_KIND.get(ufunc.__name__)
    if kind is None:
        why = ("only add, multiply, maximum, minimum, fmax, fmin, logical_and, logical_or (and bitwise_and / "
               "bitwise_or on bools) reduce on traced arrays")
        raise unsupported(graph, f"{name} is not supported on traced arrays: {why}")
    p = probe(ufunc.reduce, inputs, kwargs, "auto", graph, name)
    R = _dtype(p)
    if ufunc.__name__.startswith("bitwise") and R != np.bool_:
        raise unsupported(graph, f"{name} of integer arrays is not supported (fusebind has no bitwise "
                                 "reduction op)")
    r = reduction(name, kind, inputs[0], kwargs.get("axis", 0), kwargs.get("keepdims", NO), R,
                  kwargs.get("initial", NO), kwargs.get("where", True))
    return check(graph, name, K.cast(r, R), p)
