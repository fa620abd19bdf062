"""Reductions beyond sum/max/min/mean: `prim.reduce_prod`, `prim.reduce_argmax`, `prim.reduce_argmin`.

- reduce_prod: every numeric type; numpy's np.prod in the element type (integers wrap as
  numpy's do; a float product may be reassociated, so it matches np.prod within rounding).
- reduce_argmax / reduce_argmin: every numeric type over exactly one axis (`axes = [k]`),
  result i64 (numpy's intp): the first index of the extreme value, and on floats the first
  NaN when the slice holds one (numpy's rule). An empty axis has no answer: the API layer
  raises numpy's ValueError before building the op; the reference raises it too.

The lowering of the arg reductions is `lowering/accumulate_arg.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import irdl_op_definition
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import FusebindValueError
from fusebind.dialect.prim_base import int_list
from fusebind.dialect.prim_structured import ReductionOp, Value
from fusebind.dialect.types import NUMERIC_TYPES, elem_of, shape_of, tensor_type


@irdl_op_definition
class ReduceProdOp(ReductionOp):
    """np.prod over axes in the element type (an empty axis gives 1)."""

    name = "prim.reduce_prod"
    KIND: ClassVar[str] = "reduce_prod"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0

    def _ref(self, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        return np.prod(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


class ArgReductionOp(ReductionOp):
    """The index (i64) of the extreme element along one axis; numpy's first-occurrence and NaN rules."""

    DTYPES: ClassVar[frozenset[str]] = NUMERIC_TYPES
    FLOPS_PER_ELEMENT: ClassVar[float] = 2.0  # a compare and a select per element
    NUMPY_NAME: ClassVar[str]

    def __init__(self, x: Value, axes: Sequence[int], keepdims: bool = False):
        x = SSAValue.get(x)
        rank = len(shape_of(x.type))
        if len(axes) != 1:
            raise FusebindValueError(f"{self.name}: reduces exactly one axis, got axes {list(axes)}")
        a = axes[0] + rank if axes[0] < 0 else axes[0]
        if not 0 <= a < rank:
            raise FusebindValueError(f"{self.name}: axis {axes[0]} out of range for rank {rank}")
        props: dict[str, Attribute] = {"axes": int_list([a])}
        if keepdims:
            props["keepdims"] = UnitAttr()
        shape = type(self).infer_shape(shape_of(x.type), axes=[a], keepdims=keepdims)
        super(ReductionOp, self).__init__(operands=[x], result_types=[tensor_type(shape, "i64")], properties=props)

    def verify_op(self) -> None:
        self._elem(self.x, "operand")
        if len(self.axes_list()) != 1:
            raise VerifyException(f"{self.name}: reduces exactly one axis, found axes {list(self.axes_list())}")
        self._check_inferred("i64")

    def _ref(self, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        if x.shape[axes[0]] == 0:
            raise FusebindValueError(f"attempt to get {self.NUMPY_NAME} of an empty sequence")
        return getattr(np, self.NUMPY_NAME)(x, axis=axes[0], keepdims=keepdims)


@irdl_op_definition
class ReduceArgMaxOp(ArgReductionOp):
    name = "prim.reduce_argmax"
    KIND: ClassVar[str] = "reduce_argmax"
    NUMPY_NAME: ClassVar[str] = "argmax"


@irdl_op_definition
class ReduceArgMinOp(ArgReductionOp):
    name = "prim.reduce_argmin"
    KIND: ClassVar[str] = "reduce_argmin"
    NUMPY_NAME: ClassVar[str] = "argmin"


REDUCTION_OPS: tuple[type[ReductionOp], ...] = (ReduceProdOp, ReduceArgMaxOp, ReduceArgMinOp)
