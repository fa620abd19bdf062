"""Non-elementwise `prim` ops: reductions, shape ops, matmul and constants.

Accepted element types:
- reduce_sum: every numeric type (accumulates in the element type).
  reduce_max, reduce_min: every numeric type and i1 (np.max / np.min: NaN
  propagates; on bool they are `any` / `all`, and the result stays bool).
  reduce_mean: f32, f64. (reduce_prod, reduce_argmax, reduce_argmin: prim_reductions.py,
  on the ReductionOp base here.)
- broadcast_to, reshape, transpose, constant: any element type.
- matmul: every numeric type; both operands of rank >= 2, numpy matmul
  semantics (batch dims broadcast).

FLOPS_PER_ELEMENT of a reduction counts per *input* element; matmul counts
2·M·N·K per batch; shape ops and constants cost 0 flops.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import (DenseArrayBase, DenseIntOrFPElementsAttr, Float32Type, Float64Type, TensorType,
                                   UnitAttr)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import irdl_op_definition, opt_prop_def, operand_def, prop_def, result_def, traits_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import FusebindValueError, ShapeInferenceError
from fusebind.dialect.prim_base import PrimOp, cast_result, int_list, int_list_values
from fusebind.dialect.types import (
    ALL_TYPES,
    FLOAT_TYPES,
    NUMERIC_TYPES,
    Shape,
    broadcast_shapes,
    broadcasts_to,
    elem_of,
    format_shape,
    name_of_numpy_dtype,
    num_elements,
    numpy_dtype,
    shape_of,
    tensor_type,
)

Value = SSAValue | Operation


def reduced_shape(shape: Shape, axes: Sequence[int], keepdims: bool) -> Shape:
    """Shape after reducing `axes` (already normalised, in range)."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


class ReductionOp(PrimOp):
    """Reduce over `axes` (a list of distinct in-range axes), optionally keeping them as size 1."""

    x = operand_def(TensorType)
    result = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    keepdims = opt_prop_def(UnitAttr)
    LIST_PROPS: ClassVar[tuple[str, ...]] = ("axes",)
    DTYPES: ClassVar[frozenset[str]] = NUMERIC_TYPES
    traits = traits_def(Pure())

    def __init__(self, x: Value, axes: Sequence[int], keepdims: bool = False):
        x = SSAValue.get(x)
        rank = len(shape_of(x.type))
        norm = sorted({a + rank if a < 0 else a for a in axes})
        if any(not 0 <= a < rank for a in norm):
            raise FusebindValueError(f"{self.name}: axes {list(axes)} out of range for rank {rank}")
        props: dict[str, Attribute] = {"axes": int_list(norm)}
        if keepdims:
            props["keepdims"] = UnitAttr()
        shape = type(self).infer_shape(shape_of(x.type), axes=norm, keepdims=keepdims)
        super().__init__(operands=[x], result_types=[tensor_type(shape, elem_of(x.type))], properties=props)

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """`axes` (normalised: distinct, in range) dropped, or kept as 1 with `keepdims`."""
        (shape,) = operand_shapes
        axes = tuple(props["axes"])
        for a in axes:
            if not 0 <= a < len(shape):
                raise ShapeInferenceError(f"{cls.name}: axis {a} is out of range for rank {len(shape)}")
        if len(set(axes)) != len(axes):
            raise ShapeInferenceError(f"{cls.name}: axes {list(axes)} repeat an axis")
        return reduced_shape(shape, axes, bool(props.get("keepdims", False)))

    def shape_props(self) -> dict[str, Any]:
        return {"axes": self.axes_list(), "keepdims": self.keepdims is not None}

    def axes_list(self) -> tuple[int, ...]:
        return int_list_values(self.axes)

    def verify_op(self) -> None:
        self._check_inferred(self._elem(self.x, "operand"))

    def flops(self) -> float | None:
        n = num_elements(shape_of(self.x.type))
        return None if n is None else float(self.FLOPS_PER_ELEMENT * n)

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        x = np.asarray(arrays[0])
        with np.errstate(all="ignore"):
            out = self._ref(x, self.axes_list(), self.keepdims is not None)
        return cast_result(self, out)

    def _ref(self, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        raise NotImplementedError


@irdl_op_definition
class ReduceSumOp(ReductionOp):
    name = "prim.reduce_sum"
    KIND: ClassVar[str] = "reduce_sum"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def _ref(self, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        return np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


@irdl_op_definition
class ReduceMaxOp(ReductionOp):
    """np.max over axes (NaN propagates; on bool: any); an empty reduction is refused by numpy."""

    name = "prim.reduce_max"
    KIND: ClassVar[str] = "reduce_max"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES

    def _ref(self, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        return np.max(x, axis=axes, keepdims=keepdims)


@irdl_op_definition
class ReduceMinOp(ReductionOp):
    """np.min over axes (NaN propagates; on bool: all); an empty reduction is refused by numpy."""

    name = "prim.reduce_min"
    KIND: ClassVar[str] = "reduce_min"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES

    def _ref(self, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        return np.min(x, axis=axes, keepdims=keepdims)


@irdl_op_definition
class ReduceMeanOp(ReductionOp):
    name = "prim.reduce_mean"
    KIND: ClassVar[str] = "reduce_mean"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES

    def _ref(self, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        return np.mean(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


class ShapeOp(PrimOp):
    """Ops that move or replicate elements without arithmetic."""

    x = operand_def(TensorType)
    result = result_def(TensorType)
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES
    traits = traits_def(Pure())

    def _elems_agree(self) -> str:
        a = self._elem(self.x, "operand")
        b = self._elem(self.result, "result")
        if a != b:
            raise VerifyException(f"{self.name}: result element type {b} differs from operand element type {a}")
        return a


@irdl_op_definition
class BroadcastToOp(ShapeOp):
    """np.broadcast_to(x, result shape); the result type is given."""

    name = "prim.broadcast_to"
    KIND: ClassVar[str] = "broadcast_to"

    def __init__(self, x: Value, shape: Sequence[int | None]):
        x = SSAValue.get(x)
        super().__init__(operands=[x], result_types=[tensor_type(shape, elem_of(x.type))])

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """The target `shape`, its dynamic dims read from the operand's aligned dims (1 where the
        operand has none, as np.broadcast_to of a target with no size there)."""
        (src,) = operand_shapes
        dst = tuple(props["shape"])
        if not broadcasts_to(src, dst):
            raise ShapeInferenceError(f"{cls.name}: shape {format_shape(src)} cannot broadcast to {format_shape(dst)}")
        off = len(dst) - len(src)
        return tuple(src[i - off] if d is None and i >= off else (1 if d is None else d) for i, d in enumerate(dst))

    def shape_props(self) -> dict[str, Any]:
        return {"shape": shape_of(self.result.type)}

    def verify_op(self) -> None:
        self._check_inferred(self._elems_agree())

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        x = np.asarray(arrays[0])
        target = self.inferred_shape([x.shape])
        return cast_result(self, np.broadcast_to(x, target).copy())


@irdl_op_definition
class ReshapeOp(ShapeOp):
    """Row-major reshape; the result type is given (at most one dynamic dim is inferred)."""

    name = "prim.reshape"
    KIND: ClassVar[str] = "reshape"

    def __init__(self, x: Value, shape: Sequence[int | None]):
        """`shape` may hold one -1/None, inferred (like numpy) when the operand is static."""
        x = SSAValue.get(x)
        dims = tuple(None if d is None or d == -1 else int(d) for d in shape)
        shape = type(self).infer_shape(shape_of(x.type), shape=dims)
        super().__init__(operands=[x], result_types=[tensor_type(shape, elem_of(x.type))])

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """The target `shape`, its one dynamic dim (if any) inferred when the operand is static."""
        (src,) = operand_shapes
        dst = tuple(props["shape"])
        if sum(d is None for d in dst) > 1:
            raise ShapeInferenceError(f"{cls.name}: target shape {format_shape(dst)} has more than one dynamic "
                                      "dimension")
        n, known = num_elements(src), num_elements([d for d in dst if d is not None])
        if n is None:
            return dst
        if None not in dst:
            if n != known:
                raise ShapeInferenceError(f"{cls.name}: element counts differ: {n} in {format_shape(src)} vs "
                                          f"{known} in {format_shape(dst)}")
            return dst
        if not known or n % known:  # type: ignore[operator]
            if not known and n == 0:
                return dst  # 0 elements into (?, 0): numpy refuses the -1 too, and verify keeps it dynamic
            raise ShapeInferenceError(f"{cls.name}: cannot reshape {format_shape(src)} to {format_shape(dst)}")
        return tuple(n // known if d is None else d for d in dst)  # type: ignore[operator]

    def shape_props(self) -> dict[str, Any]:
        return {"shape": shape_of(self.result.type)}

    def verify_op(self) -> None:
        elem = self._elems_agree()
        # the count and dynamic-dim checks name the types, which the shape rule does not know
        a, b = num_elements(shape_of(self.x.type)), num_elements(shape_of(self.result.type))
        if a is not None and b is not None and a != b:
            raise VerifyException(
                f"{self.name}: element counts differ: {a} in {self.x.type} vs {b} in {self.result.type}"
            )
        if sum(d is None for d in shape_of(self.result.type)) > 1:
            raise VerifyException(f"{self.name}: result type {self.result.type} has more than one dynamic dimension")
        self._check_inferred(elem)

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        shape = tuple(-1 if d is None else d for d in shape_of(self.result.type))
        return cast_result(self, np.reshape(np.asarray(arrays[0]), shape))


@irdl_op_definition
class TransposeOp(ShapeOp):
    """np.transpose(x, perm): result dim i is operand dim perm[i]."""

    name = "prim.transpose"
    KIND: ClassVar[str] = "transpose"
    perm = prop_def(DenseArrayBase)
    LIST_PROPS: ClassVar[tuple[str, ...]] = ("perm",)

    def __init__(self, x: Value, perm: Sequence[int]):
        x = SSAValue.get(x)
        out = type(self).infer_shape(shape_of(x.type), perm=perm)
        super().__init__(
            operands=[x], result_types=[tensor_type(out, elem_of(x.type))], properties={"perm": int_list(perm)}
        )

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """Result dim i is operand dim perm[i]."""
        (shape,) = operand_shapes
        perm = list(props["perm"])
        if sorted(perm) != list(range(len(shape))):
            raise ShapeInferenceError(f"{cls.name}: permutation {perm} is not a permutation of 0..{len(shape) - 1}")
        return tuple(shape[p] for p in perm)

    def shape_props(self) -> dict[str, Any]:
        return {"perm": self.perm_list()}

    def perm_list(self) -> tuple[int, ...]:
        return int_list_values(self.perm)

    def verify_op(self) -> None:
        self._check_inferred(self._elems_agree())

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        return cast_result(self, np.transpose(np.asarray(arrays[0]), self.perm_list()).copy())


def matmul_shape(a: Shape, b: Shape) -> Shape | str:
    """Result shape of numpy matmul for ranks >= 2, or the reason it is invalid."""
    if len(a) < 2 or len(b) < 2:
        return f"operands must have rank >= 2, found {len(a)} and {len(b)}"
    ka, kb = a[-1], b[-2]
    if ka is not None and kb is not None and ka != kb:
        return f"contraction dims differ: {ka} (lhs) vs {kb} (rhs)"
    batch = broadcast_shapes(a[:-2], b[:-2])
    if batch is None:
        return f"batch shapes {format_shape(a[:-2])} and {format_shape(b[:-2])} do not broadcast"
    return (*batch, a[-2], b[-1])


@irdl_op_definition
class MatmulOp(PrimOp):
    """numpy matmul for operands of rank >= 2; batch dims broadcast."""

    name = "prim.matmul"
    KIND: ClassVar[str] = "matmul"
    API_NAME: ClassVar[str | None] = "matmul"
    NUMPY_UFUNC: ClassVar[str | None] = "matmul"
    FLOPS_PER_ELEMENT: ClassVar[float] = 2.0  # per multiply-add of the contraction
    DTYPES: ClassVar[frozenset[str]] = NUMERIC_TYPES
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, lhs: Value, rhs: Value):
        lhs, rhs = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = type(self).infer_shape(shape_of(lhs.type), shape_of(rhs.type))
        super().__init__(operands=[lhs, rhs], result_types=[tensor_type(shape, elem_of(lhs.type))])

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """numpy matmul of operands of rank >= 2 (`matmul_shape`)."""
        shape = matmul_shape(*operand_shapes)
        if isinstance(shape, str):
            raise ShapeInferenceError(f"{cls.name}: {shape}")
        return shape

    def verify_op(self) -> None:
        a = self._elem(self.lhs, "lhs")
        b = self._elem(self.rhs, "rhs")
        if a != b:
            raise VerifyException(f"{self.name}: operand element types {a} and {b} differ")
        self._check_inferred(a)

    def flops(self) -> float | None:
        out = num_elements(shape_of(self.result.type))
        k = shape_of(self.lhs.type)[-1]
        if out is None or k is None:
            return None
        return float(self.FLOPS_PER_ELEMENT * out * k)

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        a, b = (np.asarray(x) for x in arrays)
        return cast_result(self, np.matmul(a, b))


@irdl_op_definition
class ConstantOp(PrimOp):
    """`%c = prim.constant dense<[1.0, 2.0]> : tensor<2xf32>` (dense or splat;
    at most `source.MAX_DENSE_ELEMENTS` elements when parsed from text)."""

    name = "prim.constant"
    KIND: ClassVar[str] = "constant"
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(ConstantLike(), Pure())

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(result_types=[value.type], properties={"value": value})

    @staticmethod
    def from_array(array: np.ndarray) -> ConstantOp:
        """A constant holding a numpy array (its dtype must be one of the five)."""
        arr = np.asarray(array)
        elem = name_of_numpy_dtype(arr.dtype)
        t = tensor_type(arr.shape, elem)
        values = arr.reshape(-1).tolist()
        if elem == "i1":
            values = [int(v) for v in values]
        return ConstantOp(DenseIntOrFPElementsAttr.from_list(t, values))

    def verify_op(self) -> None:
        self._elem(self.result, "result")
        if self.value.type != self.result.type:
            raise VerifyException(
                f"{self.name}: result type {self.result.type} does not match value type {self.value.type}"
            )

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        elem = self.result_elem()
        shape = tuple(int(d) for d in shape_of(self.result.type))  # dense attrs are static
        # as int64, except ui64 (values up to 2^64 - 1); the astype below wraps to the element type
        values = np.asarray(self.value.get_values(),
                            dtype=np.float64 if elem in FLOAT_TYPES else np.uint64 if elem == "ui64" else np.int64)
        if values.size == 1:
            return np.full(shape, values.reshape(()), dtype=numpy_dtype(elem))
        return values.astype(numpy_dtype(elem)).reshape(shape)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)
        if self.attributes:
            printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        pos = parser.pos
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error(f"prim.constant: expected a dense elements attribute, found {value}", pos, parser.pos)
        value = _float_bits(value, parser.lexer.input.content[pos:parser.pos])
        attrs = parser.parse_optional_attr_dict()
        return cls.create(result_types=[value.type], properties={"value": value}, attributes=attrs)


_HEX = re.compile(r"0x[0-9A-Fa-f]+")
_SCALAR = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")


def _float_bits(value: DenseIntOrFPElementsAttr, text: str) -> DenseIntOrFPElementsAttr:
    """`value` with each hex literal of a float dense attribute read as MLIR reads it: the bit
    pattern of the element (`0xff800000` is -inf in f32). xDSL prints non-finite floats that way
    but parses the literal as an integer value (4286578688.0), so without this a printed and
    re-parsed constant holding -inf or nan would silently change value. A hex blob in quotes
    (`dense<"0x...">`) is parsed correctly by xDSL and left alone."""
    elem = value.type.get_element_type()
    body = text.split(":", 1)[0]
    if not isinstance(elem, (Float32Type, Float64Type)) or '"' in body or not _HEX.search(body):
        return value
    bits = np.uint32 if isinstance(elem, Float32Type) else np.uint64
    fdt = np.float32 if isinstance(elem, Float32Type) else np.float64
    out = [float(np.array(int(tok, 16), dtype=bits).view(fdt)) if tok.startswith("0x") else float(tok)
           for tok in _SCALAR.findall(body.split("<", 1)[1])]
    n = len(value.get_values())
    if len(out) == 1:  # a splat
        out *= n
    if len(out) != n:  # not a form this reader knows: keep xDSL's reading
        return value
    return DenseIntOrFPElementsAttr.from_list(value.type, out)


STRUCTURED_OPS: tuple[type[PrimOp], ...] = (
    ReduceSumOp, ReduceMaxOp, ReduceMinOp, ReduceMeanOp, BroadcastToOp, ReshapeOp, TransposeOp, MatmulOp, ConstantOp,
)
