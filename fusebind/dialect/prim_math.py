"""`prim` math ops: numpy's other transcendentals (issue 14), one op class each.

Unary: sin cos tan arcsin arccos arctan sinh cosh arcsinh arccosh arctanh exp2 expm1 log2
log10 log1p cbrt; binary: arctan2 hypot. Each is the numpy ufunc of the same name on traced
arrays (`NUMPY_UFUNC`), `fb.<name>` (`API_NAME`), with numpy's float table (f32 -> f32,
f64 -> f64, integers -> float64: the float-unary machinery of api/ops.py and numpy's own
resolver in api/numpy_ufuncs.py). Float only: f32, f64.

Lowering: each calls the vectorizable fast-math function of its name (`__fb_<fn>_<elem>`,
lowering/fastmath_trig.py; expm1 is lowering/fastmath.py's), whose measured ULP bound is in
docs/FASTMATH.md. The reference, which the interpreter and arm 0 run, is numpy's ufunc.

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

_MATH_DTYPES: frozenset[str] = frozenset({"f32", "f64"})  # the fast-math functions' element types
# the upstream `math` op of each function, for a text builder without fast math
_MLIR_MATH = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "arcsinh": "asinh",
              "arccosh": "acosh", "arctanh": "atanh"}


def _fast_call(b: ScalarBuilder, fn: str, *args: Any) -> Any:
    """`fn` (a numpy ufunc name) of the handles `args`, on whichever builder `b` is."""
    method = getattr(b, fn, None)
    if callable(method):
        return method(*args)
    if not isinstance(args[0], str):  # NumpyScalarBuilder: handles are arrays, numpy's values
        dtype = np.asarray(args[0]).dtype
        with np.errstate(all="ignore"):
            return np.asarray(getattr(np, fn)(*args)).astype(dtype)
    elem = b.elem(args[0])
    types = ", ".join([elem] * len(args))
    if getattr(b, "_fastmath", None) is None:  # text without fast math: upstream math ops
        return b._op(f"math.{_MLIR_MATH.get(fn, fn)} {', '.join(args)} : {elem}", elem)  # type: ignore[attr-defined]
    b.called.add((fn, elem))  # type: ignore[attr-defined]
    return b._op(f"func.call @__fb_{fn}_{elem}({', '.join(args)}) : ({types}) -> {elem}", elem)  # type: ignore[attr-defined]


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
    # np.exp2 on traced arrays is still api/numpy_ufuncs.py's prim.pow(2, x) (its ELEMENTWISE
    # table overrides a NUMPY_UFUNC of "exp2"); set NUMPY_UFUNC = "exp2" here once that entry goes.
    NUMPY_UFUNC: ClassVar[str | None] = None
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
    traits = BinaryOp.traits
    FLOPS_PER_ELEMENT: ClassVar[float] = 8.0


MATH_OPS: tuple[type[MathUnaryOp | MathBinaryOp], ...] = (
    SinOp, CosOp, TanOp, ArcsinOp, ArccosOp, ArctanOp, SinhOp, CoshOp, ArcsinhOp, ArccoshOp, ArctanhOp,
    Exp2Op, Expm1Op, Log2Op, Log10Op, Log1pOp, CbrtOp, Arctan2Op, HypotOp,
)
