"""Array functions of `fusebind` (`fb.exp`, `fb.softmax`, ...) over traced arrays.

Owns the composite definitions: each function is built from prim ops, so
the optimizer sees (and can fuse) its parts. `gelu` is the tanh
approximation `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
Integer inputs of float functions are promoted to float64, like numpy.
Must not: be called outside a traced function (they need a Tracer).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusebind.api.errors import UnsupportedOperation
from fusebind.api.trace import Tracer, as_tracer, binary, matmul as _matmul

__all__ = ["erf", "exp", "gelu", "layer_norm", "log", "matmul", "maximum", "minimum", "relu", "sigmoid",
           "softmax", "sqrt", "tanh", "where"]


def _tracer(x: Any, what: str) -> Tracer:
    if not isinstance(x, Tracer):
        raise UnsupportedOperation(f"fusebind.{what} works on traced arrays inside a @fusebind.jit function; "
                                   f"got {type(x).__name__} (use numpy.{what} outside)")
    return x


def _float(x: Tracer) -> Tracer:
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _unary(cls_name: str, x: Any, what: str) -> Tracer:
    from fusebind.dialect import prim

    t = _float(_tracer(x, what))
    return t.graph.add(getattr(prim, cls_name)(t.value))


def exp(x: Any) -> Tracer:
    return _unary("ExpOp", x, "exp")


def log(x: Any) -> Tracer:
    return _unary("LogOp", x, "log")


def sqrt(x: Any) -> Tracer:
    return _unary("SqrtOp", x, "sqrt")


def tanh(x: Any) -> Tracer:
    return _unary("TanhOp", x, "tanh")


def erf(x: Any) -> Tracer:
    return _unary("ErfOp", x, "erf")


def sigmoid(x: Any) -> Tracer:
    return _unary("SigmoidOp", x, "sigmoid")


def relu(x: Any) -> Tracer:
    from fusebind.dialect.prim import ReluOp

    t = _tracer(x, "relu")
    return t.graph.add(ReluOp(t.value))


def gelu(x: Any) -> Tracer:
    """GELU, tanh approximation (not the erf form)."""
    t = _float(_tracer(x, "gelu"))
    c = math.sqrt(2.0 / math.pi)
    inner = (t + 0.044715 * (t * t * t)) * c
    return 0.5 * t * (1.0 + tanh(inner))


def maximum(a: Any, b: Any) -> Tracer:
    return binary("max", a, b)


def minimum(a: Any, b: Any) -> Tracer:
    return binary("min", a, b)


def matmul(a: Any, b: Any) -> Tracer:
    return _matmul(a, b)


def where(cond: Any, a: Any, b: Any) -> Tracer:
    """`a` where `cond` else `b` (numpy.where; values promoted like numpy)."""
    from fusebind.dialect.prim import SelectOp

    from fusebind.api.trace import _check_broadcast, _operands

    first = next((v for v in (cond, a, b) if isinstance(v, Tracer)), None)
    graph = _tracer(first, "where").graph
    c = as_tracer(graph, cond)
    if c.dtype != np.bool_:
        c = c != 0
    x, y = _operands(a, b) if isinstance(a, Tracer) or isinstance(b, Tracer) else (
        as_tracer(graph, a), as_tracer(graph, b))
    if x.dtype != y.dtype:
        x, y = _operands(x, y)
    _check_broadcast(graph, "where", c, x, y)
    return graph.add(SelectOp(c.value, x.value, y.value))


def softmax(x: Any, axis: int = -1) -> Tracer:
    t = _float(_tracer(x, "softmax"))
    e = exp(t - t.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Tracer:
    """Normalise over the last axis: (x - mean) / sqrt(var + eps) * weight + bias."""
    t = _float(_tracer(x, "layer_norm"))
    mu = t.mean(axis=-1, keepdims=True)
    d = t - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    y = d / sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y
