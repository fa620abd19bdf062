"""`prim` math ops: numpy's other transcendentals (issue 14), one op class each.

Unary: sin cos tan arcsin arccos arctan sinh cosh arcsinh arccosh arctanh exp2 expm1 log2
log10 log1p cbrt; binary: arctan2 hypot. Each is the numpy ufunc of the same name on traced
arrays (`NUMPY_UFUNC`), `fb.<name>` (`API_NAME`), with numpy's float table (f32 -> f32,
f64 -> f64, integers -> float64: the float-unary machinery of api/ops.py and numpy's own
resolver in api/numpy_ufuncs.py). Float only: f32, f64.

Lowering: each calls the vectorizable fast-math function of its name (`__fb_<fn>_<elem>`,
lowering/fastmath_trig.py; expm1 is lowering/fastmath.py's), whose measured ULP bound is in
docs/FASTMATH.md; arm 0's static kernels and the fused kernels both call it. The reference,
which the interpreter runs, is numpy's ufunc.

Why `_fast_call` and not a `ScalarBuilder` method: the protocol (dialect/scalar.py) and the
text builder (lowering/scalar_text.py) have no `sin` ... yet (other owners' files). Until they
do, `_fast_call` asks the builder for a method of that name first (the protocol's word, when
it exists), else speaks the two builders' languages itself: on numpy handles it is numpy's
ufunc (exact, as `NumpyScalarBuilder` is), on the MLIR text builder a `func.call` of the
fast-math symbol recorded in the builder's `called` set, so the lowering emits its definition.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.irdl import irdl_op_definition

from fusebind.dialect.prim_elementwise import BinaryOp, FloatUnaryOp
from fusebind.dialect.scalar import ScalarBuilder
from fusebind.dialect.types import FLOAT_TYPES

_MATH_DTYPES: frozenset[str] = FLOAT_TYPES  # f32/f64 fast math; f16/bf16 are computed in f32 (docs/DTYPES.md)
# the upstream `math` op of each function, for a text builder without fast math
def _hypot_composed(b: ScalarBuilder, x: Any, y: Any) -> Any:
    """hi * sqrt(1 + (lo/hi)**2) (no overflow), 0 for two zeros, inf if either is infinite (numpy)."""
    e = b.elem(x)
    zero, one, inf = b.constant(0.0, e), b.constant(1.0, e), b.constant(float("inf"), e)
    ax, ay = b.abs(x), b.abs(y)
    hi, lo = b.maximum(ax, ay), b.minimum(ax, ay)
    r = b.div(lo, hi)
    v = b.mul(hi, b.sqrt(b.add(one, b.mul(r, r))))
    v = b.select(b.compare("eq", hi, zero), zero, v)
    v = b.select(b.compare("eq", ax, inf), inf, v)
    return b.select(b.compare("eq", ay, inf), inf, v)


def _cbrt_composed(b: ScalarBuilder, x: Any) -> Any:
    """pow(|x|, 1/3) (off by |log x| times the rounding of 1/3), one Newton step, x's sign;
    ±0 and ±inf are their own root."""
    e = b.elem(x)
    a, third = b.abs(x), b.constant(1.0 / 3.0, e)
    y = b.pow(a, third)
    y = b.add(y, b.mul(b.sub(b.div(a, b.mul(y, y)), y), third))
    y = b.select(b.compare("lt", x, b.constant(0.0, e)), b.neg(y), y)
    y = b.select(b.compare("eq", a, b.constant(float("inf"), e)), x, y)
    return b.select(b.compare("eq", x, b.constant(0.0, e)), x, y)


def _log1p_composed(b: ScalarBuilder, x: Any) -> Any:
    """Kahan's log(u) * x / (u - 1), u = 1 + x (upstream math.log1p is log(1 + x): 0 for tiny x)."""
    e = b.elem(x)
    one, inf = b.constant(1.0, e), b.constant(float("inf"), e)
    u = b.add(one, x)
    v = b.mul(b.log(u), b.div(x, b.sub(u, one)))
    v = b.select(b.compare("eq", u, one), x, v)
    return b.select(b.compare("eq", x, inf), inf, v)


def _expm1_composed(b: ScalarBuilder, x: Any) -> Any:
    """Kahan's (u - 1) * x / log(u), u = exp(x) (upstream math.expm1 is exp(x) - 1)."""
    e = b.elem(x)
    one = b.constant(1.0, e)
    u = b.exp(x)
    v = b.mul(b.sub(u, one), b.div(x, b.log(u)))  # x / log(u) ~ 1 first: (u - 1) * x can overflow
    v = b.select(b.compare("eq", u, one), x, v)
    m1 = b.constant(-1.0, e)
    v = b.select(b.compare("eq", b.sub(u, one), m1), m1, v)  # u below eps/2 (denormal: log(u) inexact)
    return b.select(b.compare("eq", u, b.constant(float("inf"), e)), u, v)


def _signed(b: ScalarBuilder, x: Any, v: Any) -> Any:
    """v with x's sign (v >= 0); x == ±0 gives x."""
    zero = b.constant(0.0, b.elem(x))
    v = b.select(b.compare("lt", x, zero), b.neg(v), v)
    return b.select(b.compare("eq", x, zero), x, v)


def _log_2a(b: ScalarBuilder, a: Any) -> Any:  # log(2a) for a > 2**28, where sqrt(a*a + 1) == a
    return b.add(b.log(a), b.constant(0.6931471805599453, b.elem(a)))


def _asinh_composed(b: ScalarBuilder, x: Any) -> Any:
    e = b.elem(x)
    one, a = b.constant(1.0, e), b.abs(x)
    sq = b.mul(a, a)
    v = _log1p_composed(b, b.add(a, b.div(sq, b.add(one, b.sqrt(b.add(one, sq))))))
    return _signed(b, x, b.select(b.compare("gt", a, b.constant(2.0**28, e)), _log_2a(b, a), v))


def _acosh_composed(b: ScalarBuilder, x: Any) -> Any:
    e = b.elem(x)
    t = b.sub(x, b.constant(1.0, e))
    v = _log1p_composed(b, b.add(t, b.sqrt(b.add(b.add(t, t), b.mul(t, t)))))
    v = b.select(b.compare("gt", x, b.constant(2.0**28, e)), _log_2a(b, x), v)
    return b.select(b.compare("lt", x, b.constant(1.0, e)), b.constant(float("nan"), e), v)


def _atanh_composed(b: ScalarBuilder, x: Any) -> Any:
    e = b.elem(x)
    a = b.abs(x)
    v = _log1p_composed(b, b.div(b.add(a, a), b.sub(b.constant(1.0, e), a)))
    return _signed(b, x, b.mul(v, b.constant(0.5, e)))


# without fast math: the functions upstream `math` has no (accurate) lowering for, from the
# builder's own words
_COMPOSED = {"hypot": _hypot_composed, "cbrt": _cbrt_composed, "log1p": _log1p_composed,
             "expm1": _expm1_composed, "arcsinh": _asinh_composed, "arccosh": _acosh_composed,
             "arctanh": _atanh_composed}


def _fast_call(b: ScalarBuilder, fn: str, *args: Any) -> Any:
    """`fn` (a numpy ufunc name) of the handles `args`: the builder's own form (`ScalarBuilder.math`:
    numpy's value, a fast-math call, an upstream math op), or, when it has none, this module's
    composition of its primitives (`_COMPOSED`)."""
    r = b.math(fn, *args)
    return _COMPOSED[fn](b, *args) if r is None else r


class MathUnaryOp(FloatUnaryOp):
    """A float function of one operand: numpy's ufunc named by its KIND (the fast-math function too)."""

    DTYPES: ClassVar[frozenset[str]] = _MATH_DTYPES

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return _fast_call(b, self.KIND, *args)

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return getattr(np, self.KIND)(x)


class MathBinaryOp(BinaryOp):
    """A float function of two operands (broadcast like numpy): numpy's ufunc named by its KIND."""

    DTYPES: ClassVar[frozenset[str]] = _MATH_DTYPES

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return _fast_call(b, self.KIND, *args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return getattr(np, self.KIND)(a, b)


@irdl_op_definition
class SinOp(MathUnaryOp):
    """np.sin; f32 reduces exactly for every argument (Payne-Hanek), f64 calls libm."""

    name = "prim.sin"
    KIND: ClassVar[str] = "sin"
    API_NAME: ClassVar[str | None] = "sin"
    NUMPY_UFUNC: ClassVar[str | None] = "sin"
    FLOPS_PER_ELEMENT: ClassVar[float] = 40.0


@irdl_op_definition
class CosOp(MathUnaryOp):
    name = "prim.cos"
    KIND: ClassVar[str] = "cos"
    API_NAME: ClassVar[str | None] = "cos"
    NUMPY_UFUNC: ClassVar[str | None] = "cos"
    FLOPS_PER_ELEMENT: ClassVar[float] = 40.0


@irdl_op_definition
class TanOp(MathUnaryOp):
    name = "prim.tan"
    KIND: ClassVar[str] = "tan"
    API_NAME: ClassVar[str | None] = "tan"
    NUMPY_UFUNC: ClassVar[str | None] = "tan"
    FLOPS_PER_ELEMENT: ClassVar[float] = 44.0


@irdl_op_definition
class ArcsinOp(MathUnaryOp):
    name = "prim.arcsin"
    KIND: ClassVar[str] = "arcsin"
    API_NAME: ClassVar[str | None] = "arcsin"
    NUMPY_UFUNC: ClassVar[str | None] = "arcsin"
    FLOPS_PER_ELEMENT: ClassVar[float] = 30.0


@irdl_op_definition
class ArccosOp(MathUnaryOp):
    name = "prim.arccos"
    KIND: ClassVar[str] = "arccos"
    API_NAME: ClassVar[str | None] = "arccos"
    NUMPY_UFUNC: ClassVar[str | None] = "arccos"
    FLOPS_PER_ELEMENT: ClassVar[float] = 30.0


@irdl_op_definition
class ArctanOp(MathUnaryOp):
    name = "prim.arctan"
    KIND: ClassVar[str] = "arctan"
    API_NAME: ClassVar[str | None] = "arctan"
    NUMPY_UFUNC: ClassVar[str | None] = "arctan"
    FLOPS_PER_ELEMENT: ClassVar[float] = 24.0


@irdl_op_definition
class SinhOp(MathUnaryOp):
    name = "prim.sinh"
    KIND: ClassVar[str] = "sinh"
    API_NAME: ClassVar[str | None] = "sinh"
    NUMPY_UFUNC: ClassVar[str | None] = "sinh"
    FLOPS_PER_ELEMENT: ClassVar[float] = 24.0


@irdl_op_definition
class CoshOp(MathUnaryOp):
    name = "prim.cosh"
    KIND: ClassVar[str] = "cosh"
    API_NAME: ClassVar[str | None] = "cosh"
    NUMPY_UFUNC: ClassVar[str | None] = "cosh"
    FLOPS_PER_ELEMENT: ClassVar[float] = 24.0


@irdl_op_definition
class ArcsinhOp(MathUnaryOp):
    name = "prim.arcsinh"
    KIND: ClassVar[str] = "arcsinh"
    API_NAME: ClassVar[str | None] = "arcsinh"
    NUMPY_UFUNC: ClassVar[str | None] = "arcsinh"
    FLOPS_PER_ELEMENT: ClassVar[float] = 30.0


@irdl_op_definition
class ArccoshOp(MathUnaryOp):
    name = "prim.arccosh"
    KIND: ClassVar[str] = "arccosh"
    API_NAME: ClassVar[str | None] = "arccosh"
    NUMPY_UFUNC: ClassVar[str | None] = "arccosh"
    FLOPS_PER_ELEMENT: ClassVar[float] = 30.0


@irdl_op_definition
class ArctanhOp(MathUnaryOp):
    name = "prim.arctanh"
    KIND: ClassVar[str] = "arctanh"
    API_NAME: ClassVar[str | None] = "arctanh"
    NUMPY_UFUNC: ClassVar[str | None] = "arctanh"
    FLOPS_PER_ELEMENT: ClassVar[float] = 24.0


@irdl_op_definition
class Exp2Op(MathUnaryOp):
    name = "prim.exp2"
    KIND: ClassVar[str] = "exp2"
    API_NAME: ClassVar[str | None] = "exp2"
    NUMPY_UFUNC: ClassVar[str | None] = "exp2"
    FLOPS_PER_ELEMENT: ClassVar[float] = 10.0


@irdl_op_definition
class Expm1Op(MathUnaryOp):
    """np.expm1: lowering/fastmath.py's expm1 (the one tanh builds on)."""

    name = "prim.expm1"
    KIND: ClassVar[str] = "expm1"
    API_NAME: ClassVar[str | None] = "expm1"
    NUMPY_UFUNC: ClassVar[str | None] = "expm1"
    FLOPS_PER_ELEMENT: ClassVar[float] = 10.0


@irdl_op_definition
class Log2Op(MathUnaryOp):
    name = "prim.log2"
    KIND: ClassVar[str] = "log2"
    API_NAME: ClassVar[str | None] = "log2"
    NUMPY_UFUNC: ClassVar[str | None] = "log2"
    FLOPS_PER_ELEMENT: ClassVar[float] = 12.0


@irdl_op_definition
class Log10Op(MathUnaryOp):
    name = "prim.log10"
    KIND: ClassVar[str] = "log10"
    API_NAME: ClassVar[str | None] = "log10"
    NUMPY_UFUNC: ClassVar[str | None] = "log10"
    FLOPS_PER_ELEMENT: ClassVar[float] = 12.0


@irdl_op_definition
class Log1pOp(MathUnaryOp):
    name = "prim.log1p"
    KIND: ClassVar[str] = "log1p"
    API_NAME: ClassVar[str | None] = "log1p"
    NUMPY_UFUNC: ClassVar[str | None] = "log1p"
    FLOPS_PER_ELEMENT: ClassVar[float] = 14.0


@irdl_op_definition
class CbrtOp(MathUnaryOp):
    name = "prim.cbrt"
    KIND: ClassVar[str] = "cbrt"
    API_NAME: ClassVar[str | None] = "cbrt"
    NUMPY_UFUNC: ClassVar[str | None] = "cbrt"
    FLOPS_PER_ELEMENT: ClassVar[float] = 30.0


@irdl_op_definition
class Arctan2Op(MathBinaryOp):
    """np.arctan2(y, x): the angle of (x, y), numpy's signed zeros and infinities."""

    name = "prim.arctan2"
    KIND: ClassVar[str] = "arctan2"
    API_NAME: ClassVar[str | None] = "arctan2"
    NUMPY_UFUNC: ClassVar[str | None] = "arctan2"
    FLOPS_PER_ELEMENT: ClassVar[float] = 30.0


@irdl_op_definition
class HypotOp(MathBinaryOp):
    """np.hypot: sqrt(x*x + y*y) without overflow; an infinite operand wins over NaN, as numpy."""

    name = "prim.hypot"
    KIND: ClassVar[str] = "hypot"
    API_NAME: ClassVar[str | None] = "hypot"
    NUMPY_UFUNC: ClassVar[str | None] = "hypot"
    FLOPS_PER_ELEMENT: ClassVar[float] = 8.0


MATH_OPS: tuple[type[MathUnaryOp | MathBinaryOp], ...] = (
    SinOp, CosOp, TanOp, ArcsinOp, ArccosOp, ArctanOp, SinhOp, CoshOp, ArcsinhOp, ArccoshOp, ArctanhOp,
    Exp2Op, Expm1Op, Log2Op, Log10Op, Log1pOp, CbrtOp, Arctan2Op, HypotOp,
)
