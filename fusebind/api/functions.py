"""Array functions of `fusebind` (`fb.exp`, `fb.softmax`, ...) over traced arrays.

Owns the composite definitions: each function is built from prim ops, so
the optimizer sees (and can fuse) its parts. `gelu` is the tanh
approximation `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
Those that numpy has (exp, log, sqrt, tanh, maximum, minimum, matmul, where)
are numpy's own ufunc or function on traced arrays (numpy_ufuncs,
numpy_dispatch), so `fb.exp(x)` and `np.exp(x)` agree in every dtype. The
float functions follow numpy's float table, where fusebind has the dtype:
int32 / int64 compute in float64; bool would be float16, which fusebind has
not, so it is refused with what to cast to.
Must not: be called outside a traced function (they need a Tracer); the
error says what to use there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusebind.api.errors import UnsupportedOperation
from fusebind.api import numpy_dispatch, numpy_ufuncs
from fusebind.api import numpy_kernels as K
from fusebind.api.tracer import Tracer

__all__ = ["erf", "exp", "gelu", "layer_norm", "log", "matmul", "maximum", "minimum", "relu", "sigmoid",
           "softmax", "sqrt", "tanh", "where"]

#: what computes each function on a numpy array, outside a traced function
_OUTSIDE = {
    "exp": "numpy.exp", "log": "numpy.log", "sqrt": "numpy.sqrt", "tanh": "numpy.tanh",
    "maximum": "numpy.maximum", "minimum": "numpy.minimum", "matmul": "numpy.matmul", "where": "numpy.where",
    "erf": "scipy.special.erf", "sigmoid": "scipy.special.expit", "softmax": "scipy.special.softmax",
    "relu": "numpy.maximum(x, 0)", "gelu": "0.5 * x * (1 + numpy.tanh(0.7978845608 * (x + 0.044715 * x**3)))",
    "layer_norm": "(x - x.mean(-1, keepdims=True)) / numpy.sqrt(x.var(-1, keepdims=True) + eps)",
}


def _tracer(x: Any, what: str) -> Tracer:
    if not isinstance(x, Tracer):
        raise UnsupportedOperation(f"fusebind.{what} works on traced arrays inside a @fusebind.jit function; got "
                                   f"{type(x).__name__} (outside one, use {_OUTSIDE[what]}, or call it inside a "
                                   "@fb.jit function)")
    return x


def _first_tracer(values: tuple, what: str) -> Tracer:
    for v in values:
        if isinstance(v, Tracer):
            return v
    return _tracer(values[0], what)


def _float(x: Tracer, what: str) -> Tracer:
    """x in the dtype numpy's float functions compute it in (np.exp's table), or a clear refusal."""
    (dt,), _ = numpy_ufuncs.resolve(x.graph, np.exp, (x,), f"fusebind.{what}")
    return K.cast(x, dt)


def _ufunc(ufunc: np.ufunc, what: str, *args: Any) -> Tracer:
    _first_tracer(args, what)
    return numpy_ufuncs.call(ufunc, args, {}, f"fusebind.{what}")


def exp(x: Any) -> Tracer:
    return _ufunc(np.exp, "exp", x)


def log(x: Any) -> Tracer:
    return _ufunc(np.log, "log", x)


def sqrt(x: Any) -> Tracer:
    return _ufunc(np.sqrt, "sqrt", x)


def tanh(x: Any) -> Tracer:
    return _ufunc(np.tanh, "tanh", x)


def _unary(cls_name: str, x: Any, what: str) -> Tracer:
    from fusebind.dialect import prim

    t = _float(_tracer(x, what), what)
    return t.graph.add(getattr(prim, cls_name)(t.value))


def erf(x: Any) -> Tracer:
    return _unary("ErfOp", x, "erf")


def sigmoid(x: Any) -> Tracer:
    return _unary("SigmoidOp", x, "sigmoid")


def relu(x: Any) -> Tracer:
    from fusebind.dialect.prim import ReluOp

    t = _tracer(x, "relu")
    if t.dtype == np.bool_:
        raise UnsupportedOperation(f"fusebind: in '{t.graph.fn_name}': fusebind.relu of a bool array is not "
                                   "supported; cast first: x.astype(np.float32)")
    return t.graph.add(ReluOp(t.value))


def gelu(x: Any) -> Tracer:
    """GELU, tanh approximation (not the erf form)."""
    t = _float(_tracer(x, "gelu"), "gelu")
    c = math.sqrt(2.0 / math.pi)
    inner = (t + 0.044715 * (t * t * t)) * c
    return 0.5 * t * (1.0 + tanh(inner))


def maximum(a: Any, b: Any) -> Tracer:
    return _ufunc(np.maximum, "maximum", a, b)


def minimum(a: Any, b: Any) -> Tracer:
    return _ufunc(np.minimum, "minimum", a, b)


def matmul(a: Any, b: Any) -> Tracer:
    return _ufunc(np.matmul, "matmul", a, b)


def where(cond: Any, a: Any, b: Any) -> Tracer:
    """`a` where `cond` else `b`: numpy.where (values promoted as numpy, Python scalars weak)."""
    _first_tracer((cond, a, b), "where")
    return numpy_dispatch.call(np.where, (cond, a, b), {})


def softmax(x: Any, axis: int = -1) -> Tracer:
    t = _float(_tracer(x, "softmax"), "softmax")
    e = exp(t - t.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Tracer:
    """Normalise over the last axis: (x - mean) / sqrt(var + eps) * weight + bias."""
    t = _float(_tracer(x, "layer_norm"), "layer_norm")
    mu = t.mean(axis=-1, keepdims=True)
    d = t - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    y = d / sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y
