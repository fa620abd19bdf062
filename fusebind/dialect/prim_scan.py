"""The scan `prim` op: a running sum, product, maximum or minimum along one axis (np.cumsum /
np.cumprod / np.maximum.accumulate / np.minimum.accumulate).

    %r = prim.scan %x {kind = "sum", axis = 1} : tensor<4x5xf32> -> tensor<4x5xf32>

Element `(a, j, b)` of the result is `x[a, 0, b] (+|*) x[a, 1, b] (+|*) ... x[a, j, b]`, combined
in that order (numpy's cumsum / cumprod are sequential, not pairwise), in the element type:
integers wrap as numpy's do. `max` / `min` combine as np.maximum / np.minimum do (the running value
first: a NaN propagates, a tie returns the new element, so the sign of a zero is numpy's). The shape and element type are the operand's. Accepted element
types: f32, f64, i32, i64 (the API casts to numpy's result dtype first: bool and int32 scan in
int64 on numpy 2). `axis` is normalized (0 <= axis < rank); a rank-0 operand has no axis to scan
(the API flattens it first, as `axis=None` does).

Its category is `ShapeOp` (it is not an index map, so the elementwise rule does not take it): the
scan rule (`compiler/scan_rule.py`) gives each scan a region of its own with its private
elementwise producers, where it lowers to scalar loops in numpy's order (`lowering/emit_scan.py`);
outside a region (arm 0, the interpreter) it runs its numpy reference.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, prop_def
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import ShapeInferenceError
from fusebind.dialect.prim_base import cast_result
from fusebind.dialect.prim_structured import ShapeOp, Value
from fusebind.dialect.types import NUMERIC_TYPES, Shape, elem_of, shape_of, tensor_type

#: the scan kinds and the numpy function each one is
SCAN_KINDS: dict[str, Any] = {"sum": np.cumsum, "prod": np.cumprod, "max": np.maximum.accumulate,
                              "min": np.minimum.accumulate}


@irdl_op_definition
class ScanOp(ShapeOp):
    """np.cumsum / np.cumprod / np.maximum.accumulate / np.minimum.accumulate along one normalized axis,
    in the element type (see the module docstring)."""

    name = "prim.scan"
    KIND: ClassVar[str] = "scan"
    FLOPS_PER_ELEMENT: ClassVar[float] = 1.0
    DTYPES: ClassVar[frozenset[str]] = NUMERIC_TYPES
    kind = prop_def(StringAttr)
    axis = prop_def(IntegerAttr)

    def __init__(self, x: Value, kind: str, axis: int):
        x = SSAValue.get(x)
        shape = shape_of(x.type)
        a = int(axis) + len(shape) if int(axis) < 0 else int(axis)
        type(self).infer_shape(shape, kind=kind, axis=a)
        super().__init__(operands=[x], result_types=[tensor_type(shape, elem_of(x.type))],
                         properties={"kind": StringAttr(kind), "axis": IntegerAttr(a, i64)})

    def reference_index_passes(self, operand: int) -> int:
        """Passes the numpy reference makes over the operand, for the Layer-1 cost (the hook a
        gather's reference uses, compiler/cost.py): np.cumsum's scan, then `cast_result`'s copy of
        the result, against a region's one pass (so a lone scan prices as a region,
        compiler/scan_rule.py)."""
        return 2

    def kind_value(self) -> str:
        return self.kind.data

    def axis_value(self) -> int:
        return int(self.axis.value.data)

    def shape_props(self) -> dict[str, Any]:
        return {"kind": self.kind_value(), "axis": self.axis_value()}

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """The operand's shape; `kind` one of SCAN_KINDS and `axis` in [0, rank)."""
        (shape,) = operand_shapes
        kind, axis = props["kind"], int(props["axis"])
        if kind not in SCAN_KINDS:
            raise ShapeInferenceError(f"{cls.name}: kind '{kind}' is not one of {', '.join(SCAN_KINDS)}")
        if not 0 <= axis < len(shape):
            raise ShapeInferenceError(f"{cls.name}: axis {axis} is out of range [0, {len(shape)}) for a "
                                      f"rank-{len(shape)} operand")
        return tuple(shape)

    def verify_op(self) -> None:
        elem = self._elems_agree()
        self._check_inferred(elem)

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        x = np.asarray(arrays[0])
        if self.kind_value() not in SCAN_KINDS:
            raise VerifyException(f"{self.name}: kind '{self.kind_value()}' is not one of {', '.join(SCAN_KINDS)}")
        return cast_result(self, SCAN_KINDS[self.kind_value()](x, axis=self.axis_value(), dtype=x.dtype))


SCAN_OPS: tuple[type[Any], ...] = (ScanOp,)
