"""numpy's running sums and products on traced arrays: np.cumsum / np.cumprod (and the
x.cumsum() / x.cumprod() methods), np.cumulative_sum / np.cumulative_prod (numpy 2, with
include_initial), np.nancumsum / np.nancumprod.

Each is one `prim.scan` along one axis in numpy's result dtype (the probe's: bool and int32
accumulate in int64, a `dtype=` argument is honoured): the operand is cast to it first, so
integers wrap as numpy's do. `axis=None` flattens (C order) as numpy does. A bool result
(`dtype=bool`) is the int64 scan compared with 0: a running logical or / and, numpy's answer.

Implementations take the probe first, then the numpy function's arguments.

Must not: approximate: the scan combines in numpy's sequential order (prim_scan.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.numpy_kernels import unsupported
from fusebind.api.numpy_probe import Probe
from fusebind.api.tracer import Tracer, as_tracer
from fusebind.dialect.prim_layout import ConcatOp
from fusebind.dialect.prim_scan import ScanOp


def _no_out(graph: Any, out: Any, what: str) -> None:
    if out is not None:
        raise unsupported(graph, f"{what}(..., out=...) cannot write into an array inside a traced function; use "
                                 "the result")


def scan(what: str, kind: str, a: Any, axis: Any, R: np.dtype, nan: bool = False,
         include_initial: bool = False) -> Tracer:
    """numpy's `kind` ("sum" / "prod") running combination of `a` along `axis` (None: flattened),
    in numpy's result dtype R; `nan`: NaNs count as the identity; `include_initial`: the
    identity first (np.cumulative_*)."""
    graph = K.graph_of(a)
    x = a if isinstance(a, Tracer) else as_tracer(graph, a)
    R = K.check_dtype(graph, R, what)
    if nan and x.dtype.kind == "f":
        x = K.select(K.isnan(x), K.like(x, 0 if kind == "sum" else 1), x)
    if axis is None or x.ndim == 0:  # numpy scans a 0-d array as its 1-element ravel, whatever the axis
        x = K.reshape(x, (x.size,))
    if axis is None:
        ax = 0
    else:
        (ax,) = K.normalize_axes(graph, axis, x.ndim)
    acc = np.dtype(np.int64) if R == np.bool_ else R  # bool: or / and as an int64 sum / product of 0s and 1s
    x = K.cast(x, acc)
    if include_initial:
        shape = list(x.shape)
        shape[ax] = 1
        first = K.full(graph, 0 if kind == "sum" else 1, acc, shape)
        r = graph.add(ScanOp(x.value, kind, ax)) if x.size else x
        r = graph.add(ConcatOp([first.value, r.value], ax))
    else:
        r = graph.add(ScanOp(x.value, kind, ax)) if x.size else x
    return K.cast(r, R) if R != acc else r


def _dtype(p: Probe) -> np.dtype:
    return np.asarray(p.result).dtype


def _cum(kind: str, name: str, nan: bool = False) -> Any:
    def f(p: Probe, a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Tracer:
        _no_out(K.graph_of(a), out, name)
        return scan(name, kind, a, axis, _dtype(p), nan)
    f.__name__ = name.split(".")[-1]
    f.__doc__ = f"{name}: prim.scan {kind} in numpy's result dtype (axis=None flattens)."
    return f


def _cumulative(kind: str, name: str) -> Any:
    def f(p: Probe, x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
          include_initial: bool = False) -> Tracer:
        _no_out(K.graph_of(x), out, name)
        return scan(name, kind, x, axis, _dtype(p), include_initial=bool(include_initial))
    f.__name__ = name.split(".")[-1]
    f.__doc__ = f"{name}: prim.scan {kind}, the identity first when include_initial (numpy 2)."
    return f


cumsum = _cum("sum", "numpy.cumsum")
cumprod = _cum("prod", "numpy.cumprod")
nancumsum = _cum("sum", "numpy.nancumsum", nan=True)
nancumprod = _cum("prod", "numpy.nancumprod", nan=True)
cumulative_sum = _cumulative("sum", "numpy.cumulative_sum")
cumulative_prod = _cumulative("prod", "numpy.cumulative_prod")
