"""Layout `prim` ops: ops that read their operand's elements at other indices (index maps).

`prim.slice` is numpy basic slicing of every dim at once:

    %r = prim.slice %x {starts = [1, 0], limits = [5, 4], strides = [2, 1]} : tensor<6x4xf32> -> tensor<2x4xf32>

Result dim i has `len(range(starts[i], limits[i], strides[i]))` elements and
element `(j_0, j_1, ...)` of the result is element `(starts_i + j_i * strides_i)`
of the operand. The bounds are numpy's *normalized* ones (`slice.indices(n)`):
- a stride is nonzero; a negative stride walks the dim backwards, so `x[::-1]`
  is one slice and no flip op is needed (decided so because the index map
  `d * stride + start` is an affine map for either sign; a lowering that
  needs positive strides, `tensor.extract_slice`, is not used);
- stride > 0: `0 <= start <= n` and `0 <= limit <= n`;
- stride < 0: `-1 <= start <= n - 1` and `-1 <= limit <= n - 1` (a limit of -1
  is "past the front", which is what `slice.indices` gives for `x[::-1]`).
A dynamic dim (`?`) is not bounds-checked here; its result size is still the
length of the range, known statically.

Accepted element types: any of the five. FLOPS 0. Its category is `ShapeOp`:
outside a fused region the executor runs its numpy reference (no static kernel,
as for reshape and broadcast_to); the reference returns a contiguous copy,
because the executor only knows reshape/broadcast_to results as views of their
operand (a view of a reused plan buffer must not be returned uncopied). Inside
a region it lowers to an index map that elementwise fusion folds into its
consumer (`lowering/emitter.py`).

`prim.concat` is np.concatenate of one or more operands along a static axis:

    %r = prim.concat %a, %b {axis = 1} : (tensor<6x4xf32>, tensor<6x2xf32>) -> tensor<6x6xf32>

The operands have one element type and one rank, agree on every dim but `axis`
(0 <= axis < rank: the API normalizes numpy's negative axes), and the result's
`axis` dim is the sum of theirs (dynamic if one of them is). A zero-length
operand is allowed (it contributes nothing). Same category as slice: arm 0 runs
its numpy reference; in a region it is an index map (`lowering/emit_concat.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, prop_def, result_def, var_operand_def
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import ShapeInferenceError
from fusebind.dialect.prim_base import PrimOp, cast_result, int_list, int_list_values
from fusebind.dialect.prim_structured import ShapeOp
from fusebind.dialect.types import Shape, elem_of, shape_of, tensor_type

Value = SSAValue | Operation


def slice_length(start: int, limit: int, stride: int) -> int:
    """The number of elements of `range(start, limit, stride)`."""
    return len(range(start, limit, stride))


def slice_key(start: int, limit: int, stride: int) -> slice:
    """The Python slice that selects `range(start, limit, stride)` of a dim. A bound of -1 (only a
    negative stride has one) is 'past the front': as a limit a Python slice spells it None; as a
    start the range is empty (Python would read -1 as the last element)."""
    if start < 0:
        return slice(0, 0, 1)
    return slice(start, None if limit < 0 else limit, stride)


@irdl_op_definition
class SliceOp(ShapeOp):
    """numpy basic slicing `x[s_0:l_0:k_0, s_1:l_1:k_1, ...]` with normalized static bounds."""

    name = "prim.slice"
    KIND: ClassVar[str] = "slice"
    INDEX_MAP: ClassVar[bool] = True
    starts = prop_def(DenseArrayBase)
    limits = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    LIST_PROPS: ClassVar[tuple[str, ...]] = ("starts", "limits", "strides")

    def __init__(self, x: Value, starts: Sequence[int], limits: Sequence[int], strides: Sequence[int]):
        x = SSAValue.get(x)
        out = type(self).infer_shape(shape_of(x.type), starts=starts, limits=limits, strides=strides)
        super().__init__(operands=[x], result_types=[tensor_type(out, elem_of(x.type))],
                         properties={"starts": int_list(starts), "limits": int_list(limits),
                                     "strides": int_list(strides)})

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """Dim i is `len(range(starts[i], limits[i], strides[i]))`; bounds checked per dim."""
        (shape,) = operand_shapes
        starts, limits, strides = (tuple(int(v) for v in props[k]) for k in ("starts", "limits", "strides"))
        rank = len(shape)
        if not len(starts) == len(limits) == len(strides) == rank:
            raise ShapeInferenceError(
                f"{cls.name}: starts, limits and strides need one entry per dim of the rank-{rank} operand; "
                f"found {len(starts)}, {len(limits)} and {len(strides)}")
        out = []
        for i, (n, s, lim, k) in enumerate(zip(shape, starts, limits, strides)):
            if k == 0:
                raise ShapeInferenceError(f"{cls.name}: dim {i}: stride must be nonzero")
            if n is not None:
                lo, hi = (0, n) if k > 0 else (-1, n - 1)
                for what, v in (("start", s), ("limit", lim)):
                    if not lo <= v <= hi:
                        raise ShapeInferenceError(
                            f"{cls.name}: dim {i}: {what} {v} is out of range [{lo}, {hi}] for size {n} "
                            f"and stride {k}")
            out.append(slice_length(s, lim, k))
        return tuple(out)

    def shape_props(self) -> dict[str, Any]:
        return {"starts": self.starts_list(), "limits": self.limits_list(), "strides": self.strides_list()}

    def starts_list(self) -> tuple[int, ...]:
        return int_list_values(self.starts)

    def limits_list(self) -> tuple[int, ...]:
        return int_list_values(self.limits)

    def strides_list(self) -> tuple[int, ...]:
        return int_list_values(self.strides)

    def verify_op(self) -> None:
        self._check_inferred(self._elems_agree())

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        x = np.asarray(arrays[0])
        key = tuple(slice_key(*b) for b in zip(self.starts_list(), self.limits_list(), self.strides_list()))
        return cast_result(self, np.ascontiguousarray(x[key]))


@irdl_op_definition
class ConcatOp(ShapeOp):
    """np.concatenate(xs, axis) of one or more operands of one element type (see the module docstring)."""

    name = "prim.concat"
    KIND: ClassVar[str] = "concat"
    INDEX_MAP: ClassVar[bool] = True
    x = var_operand_def(TensorType)  # replaces ShapeOp's single operand: one or more
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)

    def __init__(self, xs: Sequence[Value], axis: int):
        xs = [SSAValue.get(v) for v in xs]
        if not xs:
            raise ShapeInferenceError(f"{self.name}: needs at least one operand")
        out = type(self).infer_shape(*(shape_of(v.type) for v in xs), axis=axis)
        super().__init__(operands=[xs], result_types=[tensor_type(out, elem_of(xs[0].type))],
                         properties={"axis": IntegerAttr(int(axis), i64)})

    def axis_value(self) -> int:
        return int(self.axis.value.data)

    def shape_props(self) -> dict[str, Any]:
        return {"axis": self.axis_value()}

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """Every dim but `axis` of the first operand (all operands agree there), and the sum of the
        operands' sizes along `axis` (dynamic if one of them is)."""
        axis = int(props["axis"])
        if not operand_shapes:
            raise ShapeInferenceError(f"{cls.name}: needs at least one operand")
        first = operand_shapes[0]
        rank = len(first)
        if not 0 <= axis < rank:
            raise ShapeInferenceError(f"{cls.name}: axis {axis} is out of range for rank-{rank} operands "
                                      f"(expected 0 <= axis < {rank})")
        out: list[int | None] = list(first)
        for i, shape in enumerate(operand_shapes[1:], 1):
            if len(shape) != rank:
                raise ShapeInferenceError(f"{cls.name}: operand {i} has rank {len(shape)}, operand 0 has rank {rank}")
            for d, (n, m) in enumerate(zip(first, shape)):
                if d == axis:
                    continue
                if n is not None and m is not None and n != m:
                    raise ShapeInferenceError(f"{cls.name}: operand {i} has size {m} in dim {d}, operand 0 has size "
                                              f"{n} (only dim {axis}, the axis, may differ)")
                if out[d] is None:
                    out[d] = m
        sizes = [s[axis] for s in operand_shapes]
        out[axis] = None if any(n is None for n in sizes) else sum(sizes)  # type: ignore[arg-type]
        return tuple(out)

    def _elems_agree(self) -> str:
        elems = [self._elem(v, "operand") for v in self.x]
        for i, e in enumerate(elems[1:], 1):
            if e != elems[0]:
                raise VerifyException(f"{self.name}: operand {i} element type {e} differs from operand 0 element "
                                      f"type {elems[0]}")
        r = self._elem(self.result, "result")
        if r != elems[0]:
            raise VerifyException(f"{self.name}: result element type {r} differs from operand element type {elems[0]}")
        return r

    def verify_op(self) -> None:
        if not self.x:
            raise VerifyException(f"{self.name}: needs at least one operand")
        self._check_inferred(self._elems_agree())

    def _print_props(self, printer: Printer) -> None:
        printer.print_string(f" {{axis = {self.axis_value()}}}")

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        return cast_result(self, np.concatenate([np.asarray(a) for a in arrays], axis=self.axis_value()))


LAYOUT_OPS: tuple[type[PrimOp], ...] = (SliceOp, ConcatOp)
