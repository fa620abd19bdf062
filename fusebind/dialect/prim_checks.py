"""The checking `prim` op: a value passed through unless a data-dependent condition holds, when
the call raises numpy's error (np.nanargmax's "All-NaN slice encountered").

    %r = prim.check %idx, %all_nan {message = "numpy.nanargmax: All-NaN slice encountered"}
           : (tensor<4xi64>, tensor<4xi1>) -> tensor<4xi64>

The result is `x` (broadcast with `cond` like numpy); if any element of `cond` is true the op
raises `FusebindValueError(message)` (a ValueError, as numpy's) instead. It is how a numpy
function whose error depends on the values (numpy checks after computing) keeps numpy's answer or
raises at the call, never returning a made-up value.

A kernel cannot raise (the kernel ABI v2 status reports only bad indices), so the op is not
kernel-computable (`kernel_computable`): the fusion rules leave it outside every region and the
executor runs its reference, after the regions that computed `x` and `cond` (both small: a
reduction's result). It is elementwise for fb.vmap's sake (a batched condition broadcasts).

Must not: return `x` when `cond` holds anywhere, or be given a scalar body.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import FusebindValueError
from fusebind.dialect.prim_base import cast_result
from fusebind.dialect.prim_elementwise import ElementwiseOp, Value
from fusebind.dialect.types import ALL_TYPES, elem_of, shape_of, tensor_type


@irdl_op_definition
class CheckOp(ElementwiseOp):
    """`x`, or numpy's ValueError `message` when any element of `cond` is true (module docstring)."""

    name = "prim.check"
    KIND: ClassVar[str] = "check"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES
    DTYPE_OPERANDS: ClassVar[tuple[str, ...] | None] = ("x",)
    x = operand_def(TensorType)
    cond = operand_def(TensorType)
    result = result_def(TensorType)
    message = prop_def(StringAttr)

    def __init__(self, x: Value, cond: Value, message: str):
        x, cond = SSAValue.get(x), SSAValue.get(cond)
        shape = type(self).infer_shape(shape_of(x.type), shape_of(cond.type))
        super().__init__(operands=[x, cond], result_types=[tensor_type(shape, elem_of(x.type))],
                         properties={"message": StringAttr(message)})

    def message_value(self) -> str:
        return self.message.data

    def verify_op(self) -> None:
        c = self._elem(self.cond, "condition")
        if c != "i1":
            raise VerifyException(f"{self.name}: condition element type {c} is not i1")
        self._check_inferred(self._elem(self.x, "operand"))

    def kernel_computable(self) -> bool:
        """Never: a kernel cannot raise a ValueError (see the module docstring)."""
        return False

    def scalar_body(self, b: Any, *args: Any) -> Any:
        raise VerifyException(f"{self.name}: has no scalar body (a kernel cannot raise '{self.message_value()}')")

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        x, cond = (np.asarray(a) for a in arrays)
        if cond.any():
            raise FusebindValueError(self.message_value())
        shape = np.broadcast_shapes(x.shape, cond.shape)
        return cast_result(self, x if x.shape == shape else np.broadcast_to(x, shape).copy())


CHECK_OPS: tuple[type[ElementwiseOp], ...] = (CheckOp,)
