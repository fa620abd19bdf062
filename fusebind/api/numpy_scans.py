"""numpy's running sums and products on traced arrays: np.cumsum / np.cumprod (and the
x.cumsum() / x.cumprod() methods), np.cumulative_sum / np.cumulative_prod (numpy 2, with
include_initial), np.nancumsum / np.nancumprod, and `ufunc.accumulate` for add, multiply,
maximum and minimum (prim.scan sum / prod / max / min; numpy's default axis 0, its dtype: on numpy
2 add.accumulate of an int32 is int64, like cumsum).

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
from fusebind.api.numpy_probe import Probe, check, probe
from fusebind.api.promotion import is_floating
from fusebind.api.tracer import Tracer, as_tracer
from fusebind.dialect.prim_layout import ConcatOp
from fusebind.dialect.prim_scan import ScanOp


def _no_out(graph: Any, out: Any, what: str) -> None:
    if out is not None:
        raise unsupported(graph, f"{what}(..., out=...) cannot write into an array inside a traced function; use "
                                 "the result")


def scan(what: str, kind: str, a: Any, axis: Any, R: np.dtype, nan: bool = False,
         include_initial: bool = False) -> Tracer:
    """numpy's `kind` ("sum" / "prod" / "max" / "min") running combination of `a` along `axis` (None: flattened),
    in numpy's result dtype R; `nan`: NaNs count as the identity; `include_initial`: the
    identity first (np.cumulative_*)."""
    graph = K.graph_of(a)
    x = a if isinstance(a, Tracer) else as_tracer(graph, a)
    R = K.check_dtype(graph, R, what)
    if nan and is_floating(x.dtype):
        x = K.select(K.isnan(x), K.like(x, 0 if kind == "sum" else 1), x)
    if axis is None or x.ndim == 0:  # numpy scans a 0-d array as its 1-element ravel, whatever the axis
        x = K.reshape(x, (x.size,))
    if axis is None:
        ax = 0
    else:
        (ax,) = K.normalize_axes(graph, axis, x.ndim)
    # bool: or / and (max / min) as an int64 sum / product (max / min) of 0s and 1s, then != 0
    acc = np.dtype(np.int64) if R == np.bool_ else R
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


# ---------------------------------------------------------------- ufunc.accumulate
#: ufunc name -> scan kind
ACCUMULATE_KINDS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


def ufunc_accumulate(ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> Tracer:
    """`ufunc.accumulate(array, axis=0, dtype=None, out=None)` (numpy_ufuncs.array_ufunc): numpy's
    argument errors and dtype from the probe (axis=None, a 0-d operand), then one prim.scan."""
    name = f"numpy.{ufunc.__name__}.accumulate"
    graph = K.graph_of(inputs, kwargs)
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    if out is not None and any(o is not None for o in (out if isinstance(out, tuple) else (out,))):
        raise unsupported(graph, f"{name}(..., out=...) cannot write into an array inside a traced function; use "
                                 "the result")
    kind = ACCUMULATE_KINDS.get(ufunc.__name__)
    if kind is None:
        raise unsupported(graph, f"{name} is not supported on traced arrays: only add, multiply, maximum and "
                                 "minimum accumulate (np.cumsum / np.cumprod / np.maximum.accumulate / "
                                 "np.minimum.accumulate); compute other running results outside the jitted function")
    p = probe(ufunc.accumulate, inputs, kwargs, "auto", graph, name)
    extra = set(kwargs) - {"axis", "dtype"}
    if extra or len(inputs) != 1:
        raise unsupported(graph, f"{name}: arguments {sorted(extra) or list(inputs[1:])} are not supported on "
                                 "traced arrays (only axis= and dtype=)")
    return check(graph, name, scan(name, kind, inputs[0], kwargs.get("axis", 0), _dtype(p)), p)
