"""The division family and pow: `prim.div`, `prim.floordiv`, `prim.rem`, `prim.fmod`, `prim.pow`.

These are the binary ops whose integer forms have edges numpy defines and
LLVM does not (`sdiv`/`srem` by 0 or of MIN by -1 are undefined behaviour,
SIGFPE on x86), or that numpy refuses outright (an integer raised to a
negative integer power). Each states numpy's answer for every accepted dtype:

- div: f32/f64 IEEE division; on integers numpy floor division with
  x // 0 == 0 (the tracer casts integer `/` to float, so this is MLIR-only).
- floordiv (np.floor_divide, fb.floor_divide) and rem (np.remainder, which
  is np.mod, fb.remainder), every numeric type:
  the quotient rounds toward -inf and the remainder has the divisor's sign.
  Integers: x // 0 == 0, x % 0 == 0, MIN // -1 == MIN (wraps), MIN % -1 == 0;
  unsigned: floor is truncation, x // 0 == x % 0 == 0.
  Floats: numpy's `npy_divmod` step by step (fmod, then the sign fix-up and
  the rounding of the quotient; b == 0 gives a / b and NaN), so inf, NaN
  and -0.0 come out as numpy's (see `scalar.py`, `ScalarBuilder.floordiv`).
  bool is refused: numpy computes bool // bool in int8, which is not a
  fusebind dtype, so the tracer refuses it before IR exists.
- fmod (np.fmod, fb.fmod), every numeric type: C's remainder, the dividend's
  sign. Floats: C fmod (x fmod 0 and inf fmod y are NaN). Integers: the
  truncated remainder, x fmod 0 == 0 and MIN fmod -1 == 0 (numpy's).
  np.divmod is floordiv and rem (numpy_ufuncs).
- pow (np.power), every numeric type. Integers: the exact power modulo
  2^width (numpy's wrap-around); a negative exponent is numpy's ValueError
  ("Integers to negative integer powers are not allowed."), raised here as
  `IntegerPowerError`. A kernel cannot raise it (the kernel ABI has no
  error channel), so an integer pow runs in a kernel only when its exponent
  is a constant with no negative value (`PowOp.kernel_computable`); with a
  traced exponent `scalar_body` refuses, no static or fused kernel exists
  for it, and the executor runs `reference`, which checks the exponent.
  An unsigned exponent is never negative: unsigned pow always has a kernel.
  A constant exponent is checked when the graph is optimized
  (`compiler/strength.py`), before anything runs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.irdl import irdl_op_definition

from fusebind.dialect.errors import FusebindError, FusebindValueError
from fusebind.dialect.prim_elementwise import BinaryOp
from fusebind.dialect.prim_structured import ConstantOp
from fusebind.dialect.scalar import ScalarBuilder, floor_divide_reference
from fusebind.dialect.types import INT_TYPES, NUMERIC_TYPES, UINT_TYPES, num_elements, numpy_dtype, shape_of

#: numpy's own message (numpy/_core/src/umath/loops.c.src), kept verbatim so it greps the same.
NUMPY_NEGATIVE_POWER = "Integers to negative integer powers are not allowed."


class IntegerPowerError(FusebindValueError):
    """An integer raised to a negative integer power: numpy's ValueError."""


class KernelFormError(FusebindError, ValueError):
    """An op whose numpy semantics no kernel can express for these operands
    (a kernel cannot raise): the lowering refuses it and the op runs its reference."""


def check_integer_exponent(exponent: np.ndarray, result_elements: int | None, where: str) -> None:
    """Raise `IntegerPowerError` when an integer exponent that numpy would use has a negative value.

    numpy checks element by element in its loop, so an empty result raises nothing
    (`result_elements == 0`); otherwise every exponent element is used (broadcasting only repeats)."""
    e = np.asarray(exponent)
    if e.dtype.kind not in "iu" or result_elements == 0 or e.size == 0:
        return
    if (e < 0).any():
        raise IntegerPowerError(
            f"{NUMPY_NEGATIVE_POWER} ({where} with a negative exponent, refused as numpy's np.power refuses it; "
            "cast the base to a float dtype first, e.g. x.astype(np.float64) ** y)")


@irdl_op_definition
class DivOp(BinaryOp):
    """Float division; on integers numpy floor division with x // 0 == 0."""

    name = "prim.div"
    KIND: ClassVar[str] = "div"
    NUMPY_UFUNC: ClassVar[str | None] = "divide"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.div(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind in "iu":
            return floor_divide_reference(a, b)
        return np.divide(a, b)


@irdl_op_definition
class FloorDivOp(BinaryOp):
    """np.floor_divide (`a // b`): rounds toward -inf; see the module docstring for the edges."""

    name = "prim.floordiv"
    KIND: ClassVar[str] = "floordiv"
    API_NAME: ClassVar[str | None] = "floor_divide"
    NUMPY_UFUNC: ClassVar[str | None] = "floor_divide"
    # An integer divide does not vectorize on x86 (no SIMD idiv); the float form is an fmod
    # plus a fix-up. Both cost about what pow does.
    FLOPS_PER_ELEMENT: ClassVar[float] = 16.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.floordiv(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.floor_divide(a, b)  # numpy's own answer, warnings silenced by `reference`


@irdl_op_definition
class RemOp(BinaryOp):
    """np.remainder (`a % b`): the sign of the divisor; see the module docstring for the edges."""

    name = "prim.rem"
    KIND: ClassVar[str] = "rem"
    API_NAME: ClassVar[str | None] = "remainder"
    NUMPY_UFUNC: ClassVar[str | None] = "remainder"
    FLOPS_PER_ELEMENT: ClassVar[float] = 16.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.rem(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.remainder(a, b)


@irdl_op_definition
class FmodOp(BinaryOp):
    """np.fmod: C's remainder, the sign of the dividend; see the module docstring for the edges."""

    name = "prim.fmod"
    KIND: ClassVar[str] = "fmod"
    API_NAME: ClassVar[str | None] = "fmod"
    NUMPY_UFUNC: ClassVar[str | None] = "fmod"
    FLOPS_PER_ELEMENT: ClassVar[float] = 16.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.fmod(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.fmod(a, b)  # numpy's own answer (x fmod 0 == 0 on integers), warnings silenced


@irdl_op_definition
class PowOp(BinaryOp):
    """np.power on every numeric type; integer powers wrap, a negative integer exponent raises."""

    name = "prim.pow"
    KIND: ClassVar[str] = "pow"
    NUMPY_UFUNC: ClassVar[str | None] = "power"
    FLOPS_PER_ELEMENT: ClassVar[float] = 16.0
    DTYPES: ClassVar[frozenset[str]] = NUMERIC_TYPES

    def constant_exponent(self) -> np.ndarray | None:
        """The exponent's values when it is a `prim.constant` (shaped as its type), else None."""
        owner = self.rhs.owner
        return owner.reference() if isinstance(owner, ConstantOp) else None

    def is_integer(self) -> bool:
        return self.result_elem() in INT_TYPES

    def kernel_computable(self) -> bool:
        """Can a kernel compute this op with numpy's answer? Float pow: always. Integer pow:
        only with a constant exponent holding no negative value, since a kernel cannot raise.
        Unsigned pow: always (no exponent is negative)."""
        if not self.is_integer() or self.result_elem() in UINT_TYPES:
            return True
        e = self.constant_exponent()
        return e is not None and not (e < 0).any()

    def check_constant_exponent(self) -> None:
        """Raise numpy's error now for a constant negative integer exponent, when the result is
        known not to be empty (numpy raises nothing for an empty result)."""
        e = self.constant_exponent()
        if e is None or not self.is_integer():
            return
        n = num_elements(shape_of(self.results[0].type))
        if n:  # None (dynamic) may be empty at run time: the reference checks then
            check_integer_exponent(e, n, self._where())

    def _where(self) -> str:
        return f"{self.name} on {numpy_dtype(self.result_elem())}"

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        if not self.kernel_computable():
            raise KernelFormError(
                f"{self.name} on {self.result_elem()} with an exponent that is not a non-negative constant has no "
                "kernel form: a kernel cannot raise numpy's error for a negative exponent, so the op runs its "
                "reference, which checks the exponent first")
        e = self.constant_exponent() if self.is_integer() else None
        return b.pow(*args, max_exponent=None if e is None else int(e.max(initial=0)))

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind in "iu":
            out_elements = int(np.prod(np.broadcast_shapes(a.shape, b.shape)))
            check_integer_exponent(b, out_elements, self._where())
        return np.power(a, b)


DIVISION_OPS: tuple[type[BinaryOp], ...] = (DivOp, FloorDivOp, RemOp, FmodOp, PowOp)
