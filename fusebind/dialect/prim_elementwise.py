"""Elementwise `prim` ops: unary math, binary arithmetic with numpy
broadcasting, compare, select and cast.

The division family (div, floordiv, rem) and pow, whose integer forms have
numpy-defined edge cases that LLVM leaves undefined, live in `prim_division`.

Accepted element types (checked by the verifiers):
- float only (f32, f64): exp, log, sqrt, rsqrt, tanh, sigmoid, erf.
- numeric (the floats and every integer width, i8..i64 and ui8..ui64): neg, abs, relu, add,
  sub, mul, max, min (unsigned: abs is the identity, neg wraps, max/min compare unsigned).
- any element type, i1 included: compare (both operands alike; result i1),
  select (condition i1, both values alike), cast (any to any).
Binary ops (and select) broadcast like numpy: the result shape is the
broadcast of the operand shapes (see `types.broadcast_shapes`).

`FLOPS_PER_ELEMENT` counts flop-equivalents per output element: 1 for
arithmetic, compare, select and cast; more for transcendental functions, as a
rough ratio of their polynomial cost.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Commutative, Pure
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import ShapeInferenceError
from fusebind.dialect.prim_base import PrimOp, cast_result
from fusebind.dialect.scalar import (
    PREDICATES,
    ScalarBuilder,
    compare_reference,
    erf_reference,
)
from fusebind.dialect.types import (
    ALL_TYPES,
    FLOAT_TYPES,
    NUMERIC_TYPES,
    Shape,
    broadcast_shapes,
    compatible,
    elem_of,
    format_shape,
    shape_of,
    tensor_type,
)

Value = SSAValue | Operation


def _ssa(v: Value) -> SSAValue:
    return SSAValue.get(v)


class ElementwiseOp(PrimOp):
    """An op computing each output element from the same-index input elements."""

    traits = traits_def(Pure())

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """numpy broadcasting of the operand shapes (`types.broadcast_shapes`)."""
        out = broadcast_shapes(*operand_shapes)
        if out is None:
            raise ShapeInferenceError(
                f"{cls.name}: operand shapes {' and '.join(format_shape(s) for s in operand_shapes)} do not broadcast")
        return out

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        raise NotImplementedError(f"{self.name} has no scalar body")


class UnaryOp(ElementwiseOp):
    """One operand; the result has the operand's type."""

    x = operand_def(TensorType)
    result = result_def(TensorType)
    DTYPES: ClassVar[frozenset[str]] = NUMERIC_TYPES

    def __init__(self, x: Value):
        x = _ssa(x)
        super().__init__(operands=[x], result_types=[x.type])

    def verify_op(self) -> None:
        self._check_inferred(self._elem(self.x, "operand"))

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        (x,) = arrays
        with np.errstate(all="ignore"):
            return cast_result(self, self._ref(np.asarray(x)))

    def _ref(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class FloatUnaryOp(UnaryOp):
    DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES


@irdl_op_definition
class NegOp(UnaryOp):
    name = "prim.neg"
    KIND: ClassVar[str] = "neg"
    NUMPY_UFUNC: ClassVar[str | None] = "negative"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.neg(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.negative(x)


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "prim.abs"
    KIND: ClassVar[str] = "abs"
    NUMPY_UFUNC: ClassVar[str | None] = "absolute"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.abs(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.abs(x)


@irdl_op_definition
class ReluOp(UnaryOp):
    """max(x, 0) that keeps -0.0 and NaN: `x < 0 ? 0 : x`."""

    name = "prim.relu"
    KIND: ClassVar[str] = "relu"
    API_NAME: ClassVar[str | None] = "relu"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        x = args[0]
        zero = b.constant(0, b.elem(x))
        return b.select(b.compare("lt", x, zero), zero, x)

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.where(x < 0, np.zeros((), x.dtype), x)


@irdl_op_definition
class ExpOp(FloatUnaryOp):
    name = "prim.exp"
    KIND: ClassVar[str] = "exp"
    API_NAME: ClassVar[str | None] = "exp"
    NUMPY_UFUNC: ClassVar[str | None] = "exp"
    FLOPS_PER_ELEMENT: ClassVar[float] = 8.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.exp(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.exp(x)


@irdl_op_definition
class LogOp(FloatUnaryOp):
    name = "prim.log"
    KIND: ClassVar[str] = "log"
    API_NAME: ClassVar[str | None] = "log"
    NUMPY_UFUNC: ClassVar[str | None] = "log"
    FLOPS_PER_ELEMENT: ClassVar[float] = 8.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.log(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.log(x)


@irdl_op_definition
class SqrtOp(FloatUnaryOp):
    name = "prim.sqrt"
    KIND: ClassVar[str] = "sqrt"
    API_NAME: ClassVar[str | None] = "sqrt"
    NUMPY_UFUNC: ClassVar[str | None] = "sqrt"
    FLOPS_PER_ELEMENT: ClassVar[float] = 4.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.sqrt(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.sqrt(x)


@irdl_op_definition
class RsqrtOp(FloatUnaryOp):
    """1 / sqrt(x)."""

    name = "prim.rsqrt"
    KIND: ClassVar[str] = "rsqrt"
    FLOPS_PER_ELEMENT: ClassVar[float] = 5.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.rsqrt(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(1, x.dtype) / np.sqrt(x)


@irdl_op_definition
class TanhOp(FloatUnaryOp):
    name = "prim.tanh"
    KIND: ClassVar[str] = "tanh"
    API_NAME: ClassVar[str | None] = "tanh"
    NUMPY_UFUNC: ClassVar[str | None] = "tanh"
    FLOPS_PER_ELEMENT: ClassVar[float] = 10.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.tanh(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(x)


@irdl_op_definition
class SigmoidOp(FloatUnaryOp):
    """1 / (1 + exp(-x))."""

    name = "prim.sigmoid"
    KIND: ClassVar[str] = "sigmoid"
    API_NAME: ClassVar[str | None] = "sigmoid"
    FLOPS_PER_ELEMENT: ClassVar[float] = 11.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        x = args[0]
        one = b.constant(1.0, b.elem(x))
        return b.div(one, b.add(one, b.exp(b.neg(x))))

    def _ref(self, x: np.ndarray) -> np.ndarray:
        one = np.asarray(1, x.dtype)
        return one / (one + np.exp(-x))


@irdl_op_definition
class ErfOp(FloatUnaryOp):
    name = "prim.erf"
    KIND: ClassVar[str] = "erf"
    API_NAME: ClassVar[str | None] = "erf"
    FLOPS_PER_ELEMENT: ClassVar[float] = 12.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.erf(args[0])

    def _ref(self, x: np.ndarray) -> np.ndarray:
        return erf_reference(x)


class BinaryOp(ElementwiseOp):
    """Two operands of one element type, broadcast like numpy."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    DTYPES: ClassVar[frozenset[str]] = NUMERIC_TYPES

    def __init__(self, lhs: Value, rhs: Value):
        lhs, rhs = _ssa(lhs), _ssa(rhs)
        shape = type(self).infer_shape(shape_of(lhs.type), shape_of(rhs.type))
        super().__init__(operands=[lhs, rhs], result_types=[tensor_type(shape, self._result_elem(elem_of(lhs.type)))])

    def _result_elem(self, operand_elem: str) -> str:
        return operand_elem

    def verify_op(self) -> None:
        a = self._elem(self.lhs, "lhs")
        b = self._elem(self.rhs, "rhs")
        if a != b:
            raise VerifyException(f"{self.name}: operand element types {a} and {b} differ")
        self._check_inferred(self._result_elem(a))

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        a, b = (np.asarray(x) for x in arrays)
        with np.errstate(all="ignore"):
            return cast_result(self, self._ref(a, b))

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@irdl_op_definition
class AddOp(BinaryOp):
    name = "prim.add"
    KIND: ClassVar[str] = "add"
    NUMPY_UFUNC: ClassVar[str | None] = "add"
    traits = traits_def(Pure(), Commutative())
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.add(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.add(a, b)


@irdl_op_definition
class SubOp(BinaryOp):
    name = "prim.sub"
    KIND: ClassVar[str] = "sub"
    NUMPY_UFUNC: ClassVar[str | None] = "subtract"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.sub(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.subtract(a, b)


@irdl_op_definition
class MulOp(BinaryOp):
    name = "prim.mul"
    KIND: ClassVar[str] = "mul"
    NUMPY_UFUNC: ClassVar[str | None] = "multiply"
    traits = traits_def(Pure(), Commutative())
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.mul(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.multiply(a, b)


@irdl_op_definition
class MaxOp(BinaryOp):
    """np.maximum: NaN-propagating."""

    name = "prim.max"
    KIND: ClassVar[str] = "max"
    API_NAME: ClassVar[str | None] = "maximum"
    NUMPY_UFUNC: ClassVar[str | None] = "maximum"
    traits = traits_def(Pure(), Commutative())
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.maximum(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.maximum(a, b)


@irdl_op_definition
class MinOp(BinaryOp):
    """np.minimum: NaN-propagating."""

    name = "prim.min"
    KIND: ClassVar[str] = "min"
    API_NAME: ClassVar[str | None] = "minimum"
    NUMPY_UFUNC: ClassVar[str | None] = "minimum"
    traits = traits_def(Pure(), Commutative())
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.minimum(*args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.minimum(a, b)


@irdl_op_definition
class CompareOp(BinaryOp):
    """`prim.compare lt %a, %b : (...) -> tensor<...xi1>`; NaN compares unequal."""

    name = "prim.compare"
    KIND: ClassVar[str] = "compare"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES
    KEYWORD_PROPS: ClassVar[tuple[str, ...]] = ("predicate",)
    predicate = prop_def(StringAttr)

    def __init__(self, predicate: str, lhs: Value, rhs: Value):  # type: ignore[override]
        super().__init__(lhs, rhs)
        self.properties["predicate"] = StringAttr(predicate)

    def _result_elem(self, operand_elem: str) -> str:
        return "i1"

    def is_commutative(self) -> bool:
        """eq and ne do not care about operand order (lt/le/gt/ge swap into each other, not themselves):
        a per-instance fact, so it is a method, not the `Commutative` trait."""
        return self.predicate.data in ("eq", "ne")

    def verify_op(self) -> None:
        if self.predicate.data not in PREDICATES:
            raise VerifyException(
                f"{self.name}: unknown predicate '{self.predicate.data}'; expected one of {', '.join(PREDICATES)}"
            )
        super().verify_op()

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.compare(self.predicate.data, *args)

    def _ref(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return compare_reference(self.predicate.data, a, b)


@irdl_op_definition
class SelectOp(ElementwiseOp):
    """`cond ? lhs : rhs` per element, all three broadcast like np.where."""

    name = "prim.select"
    KIND: ClassVar[str] = "select"
    API_NAME: ClassVar[str | None] = "where"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES
    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    DTYPE_OPERANDS: ClassVar[tuple[str, ...] | None] = ("lhs", "rhs")

    def __init__(self, cond: Value, lhs: Value, rhs: Value):
        cond, lhs, rhs = _ssa(cond), _ssa(lhs), _ssa(rhs)
        shape = type(self).infer_shape(*(shape_of(v.type) for v in (cond, lhs, rhs)))
        super().__init__(operands=[cond, lhs, rhs], result_types=[tensor_type(shape, elem_of(lhs.type))])

    def verify_op(self) -> None:
        c = self._elem(self.cond, "condition")
        if c != "i1":
            raise VerifyException(f"{self.name}: condition element type {c} is not i1")
        a = self._elem(self.lhs, "lhs")
        b = self._elem(self.rhs, "rhs")
        if a != b:
            raise VerifyException(f"{self.name}: value element types {a} and {b} differ")
        self._check_inferred(a)

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.select(*args)

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        c, a, b = (np.asarray(x) for x in arrays)
        return cast_result(self, np.where(c, a, b))


@irdl_op_definition
class CastOp(ElementwiseOp):
    """Element type conversion with numpy `astype` semantics (see scalar.py).

    float -> int truncates toward zero; NaN, +-inf and values outside the integer range give
    numpy's x86-64 answer, INT_MIN (cvttss2si / cvttsd2si), which the reference (numpy itself)
    gives and the lowering guards for (LLVM's fptosi is poison there). int -> int wraps,
    anything -> bool is x != 0 (NaN is True), bool -> number is 0 / 1."""

    name = "prim.cast"
    KIND: ClassVar[str] = "cast"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES
    x = operand_def(TensorType)
    result = result_def(TensorType)

    def __init__(self, x: Value, to: str):
        x = _ssa(x)
        super().__init__(operands=[x], result_types=[tensor_type(shape_of(x.type), to)])

    def verify_op(self) -> None:
        self._elem(self.x, "operand")
        self._elem(self.result, "result")
        in_shape, out_shape = self.inferred_shape(), shape_of(self.result.type)
        if not compatible(in_shape, out_shape):
            raise VerifyException(
                f"{self.name}: result shape {format_shape(out_shape)} does not match operand shape "
                f"{format_shape(in_shape)}"
            )

    def scalar_body(self, b: ScalarBuilder, *args: Any) -> Any:
        return b.cast(args[0], self.result_elem())

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return cast_result(self, np.asarray(arrays[0]))


ELEMENTWISE_OPS: tuple[type[ElementwiseOp], ...] = (
    NegOp, AbsOp, ReluOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, SigmoidOp, ErfOp,
    AddOp, SubOp, MulOp, MaxOp, MinOp, CompareOp, SelectOp, CastOp,
)
