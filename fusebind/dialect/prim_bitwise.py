"""Bitwise `prim` ops: `&`, `|`, `^`, `~`, `<<`, `>>` with numpy's semantics.

- bitwise_and / bitwise_or / bitwise_xor (np.bitwise_and ...), every integer and i1:
  the bits of two's complement integers; on bools the logical answer.
- invert (np.invert, `~`), every integer and i1: ~x (-x - 1) on integers, not on bools.
- left_shift / right_shift (np.left_shift `<<`, np.right_shift `>>`), every integer:
  numpy's npy_lshift / npy_rshift, whose answer is defined for every count:
  a count below the width shifts (`<<` wraps, `>>` is arithmetic, logical on
  unsigned); a count of the width or more, or a negative one (numpy compares
  it as unsigned), gives 0, or -1 for `>>` of a negative value. LLVM's
  shl/ashr/lshr are poison there, so the lowering guards it
  (lowering/scalar_text.py). numpy shifts bools in int8 (the tracer casts).

The logical functions (np.logical_and ...) are compare/select compositions of
the truth values (api/numpy_ufuncs.py), not ops here.

Each states its numpy ufunc and `fb.<name>` (NUMPY_UFUNC, API_NAME); and, or
and xor are Commutative.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.irdl import irdl_op_definition, traits_def
from xdsl.traits import Commutative, Pure

from fusebind.dialect.prim_base import PrimOp
from fusebind.dialect.prim_elementwise import BinaryOp, UnaryOp
from fusebind.dialect.scalar import ScalarBuilder
from fusebind.dialect.types import INT_TYPES

#: the element types of the logical-or-bitwise ops: the integers and bool
BITS_TYPES: frozenset[str] = INT_TYPES | {"i1"}


@irdl_op_definition
class BitwiseAndOp(BinaryOp):
    name = "prim.bitwise_and"
    KIND: ClassVar[str] = "bitwise_and"
    NUMPY_UFUNC: ClassVar[str | None] = "bitwise_and"
    API_NAME: ClassVar[str | None] = "bitwise_and"
    traits = traits_def(Pure(), Commutative())
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = BITS_TYPES

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.bitwise_and(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.bitwise_and(a, b)


@irdl_op_definition
class BitwiseOrOp(BinaryOp):
    name = "prim.bitwise_or"
    KIND: ClassVar[str] = "bitwise_or"
    NUMPY_UFUNC: ClassVar[str | None] = "bitwise_or"
    API_NAME: ClassVar[str | None] = "bitwise_or"
    traits = traits_def(Pure(), Commutative())
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = BITS_TYPES

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.bitwise_or(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.bitwise_or(a, b)


@irdl_op_definition
class BitwiseXorOp(BinaryOp):
    name = "prim.bitwise_xor"
    KIND: ClassVar[str] = "bitwise_xor"
    NUMPY_UFUNC: ClassVar[str | None] = "bitwise_xor"
    API_NAME: ClassVar[str | None] = "bitwise_xor"
    traits = traits_def(Pure(), Commutative())
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = BITS_TYPES

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.bitwise_xor(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.bitwise_xor(a, b)


@irdl_op_definition
class InvertOp(UnaryOp):
    """~x: the bits flipped (-x - 1) on integers, logical not on bools."""

    name = "prim.invert"
    KIND: ClassVar[str] = "invert"
    NUMPY_UFUNC: ClassVar[str | None] = "invert"
    API_NAME: ClassVar[str | None] = "invert"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = BITS_TYPES

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.invert(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.invert(x)


@irdl_op_definition
class LeftShiftOp(BinaryOp):
    """a << s: wraps; a count of the width or more, or negative, gives 0 (numpy's npy_lshift)."""

    name = "prim.left_shift"
    KIND: ClassVar[str] = "left_shift"
    NUMPY_UFUNC: ClassVar[str | None] = "left_shift"
    API_NAME: ClassVar[str | None] = "left_shift"
    FLOPS_PER_ELEMENT: ClassVar[float] = 2.0
    DTYPES: ClassVar[frozenset[str]] = INT_TYPES

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.left_shift(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.left_shift(a, b)


@irdl_op_definition
class RightShiftOp(BinaryOp):
    """a >> s, arithmetic; a count of the width or more, or negative, gives 0 or -1 (npy_rshift)."""

    name = "prim.right_shift"
    KIND: ClassVar[str] = "right_shift"
    NUMPY_UFUNC: ClassVar[str | None] = "right_shift"
    API_NAME: ClassVar[str | None] = "right_shift"
    FLOPS_PER_ELEMENT: ClassVar[float] = 2.0
    DTYPES: ClassVar[frozenset[str]] = INT_TYPES

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.right_shift(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.right_shift(a, b)


BITWISE_OPS: tuple[type[PrimOp], ...] = (BitwiseAndOp, BitwiseOrOp, BitwiseXorOp, InvertOp, LeftShiftOp, RightShiftOp)
