"""Python scalars in a trace: numpy's rules for them (NEP 50) and Python's own.

Owns the dtype rules for a weak operand (a Python bool/int/float: a literal,
a scalar argument, or Python arithmetic on them): `weak_result` (NEP 50:
it takes the other operand's dtype unless its kind is higher), `weak_dtype`
(the same, except that numpy compares a Python int with an int array
exactly), `python_kind` (two Python scalars combine as Python does:
`True + True` is an int, `1 / 2` a float), `PY_OP` (Python's operator per
binary kind), and the call-time checks a trace records for them:
`fits_check` (an int converted to an integer dtype must fit it, numpy's
OverflowError) and `type_check` (Python arithmetic on scalar arguments must
give the type it was traced with; evaluating it raises what eager Python
raises, e.g. ZeroDivisionError).

Why checks at call time: a scalar argument's value is not part of the trace
key (no retrace per value), so what numpy or Python would decide from the
value is decided per call, from the arguments, before the kernel runs.

Must not: build IR (trace.py does) or know about tracers.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.dialect.errors import FusebindTypeError
from fusebind.api.capture import FusebindOverflowError, scalar_kind
from fusebind.api.promotion import is_floating
from fusebind.api.errors import UnsupportedOperation

#: a recipe: the value of a Python scalar of the eager program, from the call's arguments
Recipe = Callable[[Sequence[Any]], Any]
Check = Callable[[Sequence[Any]], None]

_KIND_ORDER = {bool: 0, int: 1, float: 2}
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
#: Python's operator for each binary kind: how two Python scalars combine eagerly
PY_OP: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv, "pow": operator.pow,
    "floordiv": operator.floordiv, "mod": operator.mod, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge, "eq": operator.eq, "ne": operator.ne}
_INT64 = (-(1 << 63), 1 << 63)


def weak_result(t: np.dtype, scalar: Any) -> np.dtype:
    """NEP 50: a Python scalar (a value, or its type) takes the array's dtype unless its kind is higher."""
    kind = scalar if isinstance(scalar, type) else scalar_kind(scalar)
    if kind is bool:
        return t
    if kind is int:
        return t if t.kind in "fiu" or is_floating(t) else np.dtype(np.int64)
    if kind is float:
        return t if is_floating(t) else np.dtype(np.float64)
    raise FusebindTypeError(f"unsupported scalar {scalar!r}")


def weak_dtype(t: np.dtype, kind: type, op: str | None) -> np.dtype:
    """The dtype both operands of `<array of t> <op> <Python scalar of kind>` take."""
    if op in COMPARE and kind is int and t.kind in "iu" and t != np.uint64:
        return np.dtype(np.int64)  # numpy compares a Python int with an int array exactly: i32 < 2**40 is True
        # (uint64 against a negative or traced Python int: tracer.exact_int_compare)
    return weak_result(t, kind)


def python_kind(ka: type, kb: type, op: str | None) -> type:
    """The Python type of `a <op> b` for two Python scalars of types ka, kb."""
    if op == "div":
        return float
    k = ka if _KIND_ORDER[ka] >= _KIND_ORDER[kb] else kb
    if k is bool and op in ("add", "sub", "mul", "pow", "floordiv", "mod"):
        return int  # True + True == 2
    return k


def fits_check(recipe: Recipe, text: str, dt: np.dtype, fn_name: str) -> Check:
    """A call-time check that a traced Python int fits the integer dtype numpy converts it to."""
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)

    def check(args: Sequence[Any]) -> None:
        v = recipe(args)
        if not lo <= v <= hi:
            raise FusebindOverflowError(f"fusebind: in '{fn_name}': Python integer {v} out of bounds for {dt} "
                                        f"(the value of {text}, converted to the {dt} of the array it meets, "
                                        "as numpy does)")
    return check


def type_check(recipe: Recipe, text: str, kind: type, fn_name: str) -> Check:
    """A call-time check that Python arithmetic on scalar arguments gives the
    type it was traced with (2 ** -1 is a float), and an int that int64 holds.
    Evaluating it also raises what eager Python raises (1 / 0)."""
    def check(args: Sequence[Any]) -> None:
        v = recipe(args)
        if type(v) is not kind:
            raise UnsupportedOperation(
                f"fusebind: in '{fn_name}': the Python scalar expression {text} is a {type(v).__name__} for these "
                f"arguments, but it was traced as a {kind.__name__}; its type depends on the values, which a "
                "trace cannot follow: convert it explicitly (float(...)) in the function")
        if kind is int and not _INT64[0] <= v < _INT64[1]:
            raise FusebindOverflowError(f"fusebind: in '{fn_name}': Python integer {v} out of bounds for int64 "
                                        f"(the value of {text}; traced Python ints are computed as int64)")
    return check
