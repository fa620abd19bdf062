"""numpy's rounding on traced arrays: np.round / np.around / x.round(decimals), np.fix and the ufuncs
np.rint / np.floor / np.ceil / np.trunc of floats, composed from exact float arithmetic.

fusebind has no rounding op, and needs none: for |y| < 2**(p-1) (p the significand's bits: 2**23
in f32, 2**52 in f64) the sum `|y| + 2**(p-1)` has unit spacing, so IEEE addition rounds it to the
nearest integer, ties to even, which the subtraction gives back exactly; larger values, infinities
and NaN are integers (or NaN) already and are passed through; the sign (of a zero too) is y's.
That is np.rint bit for bit, with no fast-math flag anywhere (the lowering writes none, and LLVM
may not fold `(a + c) - c` without one). floor, ceil and trunc follow from it exactly.

np.round is numpy's own algorithm (`PyArray_Round`): for decimals >= 0, `y = x * f`, rint, `y / f`;
for decimals < 0, `y = x / f`, rint, `y * f`, with `f = power_of_ten(|decimals|)` (numpy's C
helper, reproduced: exact up to 1e8, then repeated multiplies by 10.) cast to x's dtype (a Python
float is weak). Integers: a copy for decimals >= 0; otherwise computed in float64 and cast back
(numpy's `ret_int`). A bool array raises numpy's casting error, or is float16 for decimals=0
(refused by the dtype check), as numpy's probe says.

Implementations of numpy functions take the probe first (numpy_dispatch's convention); the ufunc
forms take the traced operand.

Must not: approximate: every path is numpy's value, dtype and sign of zero.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.numpy_kernels import unsupported
from fusebind.api.numpy_probe import Probe
from fusebind.api.tracer import Tracer, as_tracer
from fusebind.dialect import prim

#: 2**(p-1) per float dtype: from there on every float is an integer
_INTEGRAL_FROM = {np.dtype(np.float32): 2.0 ** 23, np.dtype(np.float64): 2.0 ** 52}


def power_of_ten(n: int) -> float:
    """numpy's `power_of_ten` (multiarray/calculation.c): a table to 1e8, then repeated `*= 10.`
    (for n >= 23 this differs from the correctly rounded 10.0 ** n)."""
    if n < 9:
        return (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8)[n]
    ret = 1e9
    for _ in range(n - 9):
        ret *= 10.0
    return ret


def _float(x: Tracer, what: str) -> np.dtype:
    if x.dtype not in _INTEGRAL_FROM:
        raise unsupported(x.graph, f"{what} of a {x.dtype} array is not supported on traced arrays; cast it to "
                                   "float32 or float64 first")
    return x.dtype


def rint(x: Tracer) -> Tracer:
    """np.rint of a float array: round half to even, exactly (see the module docstring)."""
    if x.dtype.kind in "iub":
        return x  # an integer loop (numpy_ufuncs cast the operand to the loop's dtype first)
    c = K.like(x, _INTEGRAL_FROM[_float(x, "numpy.rint")])
    a = K.op(prim.AbsOp, x)
    r = K.op(prim.SubOp, K.op(prim.AddOp, a, c), c)  # a rounded to an integer: IEEE's nearest, ties to even
    signed = K.select(K.compare("lt", x, K.like(x, 0)), K.op(prim.NegOp, r), r)
    # zeros keep their sign; |x| >= c, inf and NaN are x itself
    keep = K.logical_and(K.compare("lt", a, c), K.compare("ne", x, K.like(x, 0)))
    return K.select(keep, signed, x)


def floor(x: Tracer) -> Tracer:
    """np.floor: rint, minus one where that rounded up (exact: below 2**(p-1) integers are exact)."""
    if x.dtype.kind in "iub":
        return x
    _float(x, "numpy.floor")
    r = rint(x)
    return K.select(K.compare("gt", r, x), K.op(prim.SubOp, r, K.like(x, 1)), r)


def ceil(x: Tracer) -> Tracer:
    """np.ceil as -floor(-x): the sign of a zero result is numpy's (ceil(-0.5) is -0.0)."""
    if x.dtype.kind in "iub":
        return x
    _float(x, "numpy.ceil")
    return K.op(prim.NegOp, floor(K.op(prim.NegOp, x)))


def trunc(x: Tracer) -> Tracer:
    """np.trunc: ceil below zero, floor elsewhere (floor(-0.0) is -0.0)."""
    if x.dtype.kind in "iub":
        return x
    _float(x, "numpy.trunc")
    return K.select(K.compare("lt", x, K.like(x, 0)), ceil(x), floor(x))


#: the float rounding ufuncs (numpy_ufuncs' table keeps integers and bools as they are)
UFUNCS = {"rint": rint, "floor": floor, "ceil": ceil, "trunc": trunc}


def round_(p: Probe, a: Any, decimals: Any = 0, out: Any = None) -> Tracer:
    """np.round / np.around / x.round(decimals): numpy's algorithm (see the module docstring)."""
    graph = K.graph_of(a)
    if out is not None:
        raise unsupported(graph, "numpy.round(..., out=...) cannot write into an array inside a traced function; "
                                 "use the result")
    if isinstance(decimals, Tracer):
        raise unsupported(graph, "numpy.round(x, decimals) with a traced decimals is not supported; decimals must "
                                 "be a Python int (the scale 10**decimals is a constant of the kernel)")
    d = operator.index(decimals)  # (the probe raised numpy's TypeError for anything else)
    x = a if isinstance(a, Tracer) else as_tracer(graph, a)
    R = K.check_dtype(graph, np.asarray(p.result).dtype, "numpy.round")
    if x.dtype.kind in "iu":
        if d >= 0:
            return x  # numpy returns a copy; traced arrays are immutable
        y = K.cast(x, np.float64)
        f = K.like(y, power_of_ten(-d))
        return K.cast(K.op(prim.MulOp, rint(K.op(prim.DivOp, y, f)), f), R)
    _float(x, "numpy.round")
    if d == 0:
        return rint(x)  # x * 1.0 and / 1.0 are exact
    with np.errstate(over="ignore"):  # a Python float is weak: in x's dtype, inf past its range (numpy's too)
        f = K.like(x, power_of_ten(abs(d)))
    if d > 0:
        return K.op(prim.DivOp, rint(K.op(prim.MulOp, x, f)), f)
    return K.op(prim.MulOp, rint(K.op(prim.DivOp, x, f)), f)


def fix(p: Probe, x: Any, out: Any = None) -> Tracer:
    """np.fix: numpy's ceil below zero, floor elsewhere, which is trunc (fix(-0.5) is -0.0); integers and
    bools as they are."""
    graph = K.graph_of(x)
    if out is not None:
        raise unsupported(graph, "numpy.fix(..., out=...) cannot write into an array inside a traced function; "
                                 "use the result")
    t = x if isinstance(x, Tracer) else as_tracer(graph, x)
    return trunc(t)
