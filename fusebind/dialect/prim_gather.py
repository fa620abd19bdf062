"""Gather `prim` ops: reads of an operand at positions held in an integer tensor (index maps).

    %r = prim.gather %x, %idx {axis = 0} : (tensor<5x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
    %r = prim.take_along %x, %idx {axis = 1} : (tensor<4x5xf32>, tensor<4x1xi32>) -> tensor<4x1xf32>

`prim.gather` is `np.take(x, idx, axis=axis)` (mode "raise"): `idx` an i32 / i64 tensor of any
rank; the result shape is `x.shape[:axis] + idx.shape + x.shape[axis+1:]` and element
`(a..., j..., b...)` is `x[a..., idx[j...], b...]`.

`prim.take_along` is `np.take_along_axis(x, idx, axis)`: `idx` has x's rank; the dims other than
`axis` broadcast against each other (numpy 2), and the result's `axis` dim is idx's. Element
`(a, j, b)` is `x[a, idx[a, j, b], b]` (broadcast).

For both: a negative index counts from the end; one outside `[-n, n)` (n the size of `axis`) is
an error, `fb.IndexOutOfBounds` with numpy's message ("index 7 is out of bounds for axis 0 with
size 5"). When `idx` is a `prim.constant` the verifier checks its range (so a lowering of a
compile-time index needs no runtime check); otherwise the reference checks it before reading,
and a lowering checks it in the kernel (`Emitter.checked_index`, the kernel ABI's error channel).
The unit property `in_bounds` says the caller has already checked every index (a call-time check
of the jitted function's argument the indices are read from, `Graph.checks`): a lowering then
only normalizes negative indices, and clamps so that a broken promise still cannot read outside
`x`; the reference checks regardless. The optional `error_axis` is the axis an out-of-range
message names when it is not `axis` (the op reads an intermediate whose axes are numbered
differently from the array the user indexed, as advanced indexing builds).

Accepted element types: any of the five for `x`; i32 / i64 for `idx`. FLOPS 0. Their category
is `ShapeOp` (they move elements without arithmetic): outside a fused region the executor runs
the numpy reference; inside one they lower to a `linalg.generic` with an identity output map
that reads `idx` through its indexing map and `x` with `tensor.extract`
(`lowering/emit_gather.py`), which elementwise fusion folds into its consumer (`INDEX_MAP`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, TensorType, UnitAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import IndexOutOfBounds, ShapeInferenceError
from fusebind.dialect.prim_base import PrimOp, cast_result
from fusebind.dialect.prim_structured import ConstantOp, ShapeOp
from fusebind.dialect.types import Shape, elem_of, numpy_dtype, shape_of, tensor_type

Value = SSAValue | Operation

#: the element types an index tensor may have
INDEX_TYPES = ("i32", "i64")

#: the index bytes the reference moves per index byte (see IndexedOp.reference_index_passes):
#: the range check's min and max, the take's own read, and (negatives) a compare, add and where
REFERENCE_INDEX_PASSES = 4


def out_of_bounds_message(index: int, axis: int, size: int) -> str:
    """numpy's words for an index outside its axis."""
    return f"index {index} is out of bounds for axis {axis} with size {size}"


def check_range(idx: np.ndarray, axis: int, size: int) -> np.ndarray:
    """`idx` (any integer array) normalized to [0, size) as int64 (negative counts from the end);
    raises `IndexOutOfBounds` naming the first index (in C order) outside [-size, size)."""
    arr = np.asarray(idx)
    if arr.size == 0:
        return arr.astype(np.int64)
    lo, hi = int(arr.min()), int(arr.max())  # two passes, no temporaries, in the common case
    if lo < -size or hi >= size:
        flat = arr.reshape(-1)
        first = int(flat[int(np.flatnonzero((flat < -size) | (flat >= size))[0])])
        raise IndexOutOfBounds(out_of_bounds_message(first, axis, size))
    out = arr.astype(np.int64, copy=False)
    if lo < 0:
        out = np.where(out < 0, out + size, out)
    return out


def constant_indices(op: PrimOp) -> np.ndarray | None:
    """The values of `op`'s index operand when it is a `prim.constant` (known when compiling), else None."""
    owner = op.operands[1].owner
    return owner.reference() if isinstance(owner, ConstantOp) else None


class IndexedOp(ShapeOp):
    """The common part of gather and take_along: operands (x, idx), an `axis` property."""

    # both operands named here, in this order: IRDL lists a subclass's fields before its base's
    x = operand_def(TensorType)
    idx = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    in_bounds = opt_prop_def(UnitAttr)
    error_axis = opt_prop_def(IntegerAttr)
    DTYPE_OPERANDS: ClassVar[tuple[str, ...] | None] = ("x",)
    INDEX_MAP: ClassVar[bool] = True
    INDEX_OPERANDS: ClassVar[tuple[int, ...]] = (1,)

    def __init__(self, x: Value, idx: Value, axis: int, in_bounds: bool = False, error_axis: int | None = None):
        x, idx = SSAValue.get(x), SSAValue.get(idx)
        out = type(self).infer_shape(shape_of(x.type), shape_of(idx.type), axis=axis)
        props: dict[str, Any] = {"axis": IntegerAttr(int(axis), i64)}
        if error_axis is not None and error_axis != axis:
            props["error_axis"] = IntegerAttr(int(error_axis), i64)
        if in_bounds:
            props["in_bounds"] = UnitAttr()
        super().__init__(operands=[x, idx], result_types=[tensor_type(out, elem_of(x.type))], properties=props)

    def gathered_bytes(self, operand: int) -> int | None:
        """Bytes this op reads of operand #operand if that is `x` (one element per result
        element: a gather reads what it picks, not all of x); None for the indices or a dynamic
        shape (compiler/cost.py asks)."""
        shape = self.result_shape()
        if operand != 0 or any(d is None for d in shape):
            return None
        return int(np.prod(shape, dtype=np.int64)) * numpy_dtype(elem_of(self.x.type)).itemsize

    def reference_index_passes(self, operand: int) -> int:
        """How many times the reference (arm 0) moves the index operand's bytes: the range check,
        the normalization and the take (`check_range`, REFERENCE_INDEX_PASSES); a constant index
        is checked when compiling, but the reference still reads it (compiler/cost.py asks)."""
        return 1 if operand != 1 or constant_indices(self) is not None else REFERENCE_INDEX_PASSES

    def region_alone(self) -> bool:
        """A gather by traced indices is compiled in a region even with no elementwise neighbour
        (the fusion rules ask this): its kernel reads only the rows it needs. One by constant
        indices (a lone flip, roll, pad...) runs its reference: no compile for a copy."""
        return constant_indices(self) is None

    def shown_axis(self) -> int:
        """The axis an out-of-range message names: `error_axis` (numpy's axis of the array the
        user indexed, when this op reads an intermediate, as advanced indexing builds) or `axis`."""
        return self.axis_value() if self.error_axis is None else int(self.error_axis.value.data)

    def is_in_bounds(self) -> bool:
        """The caller promises every index is in [-n, n) (it checked them before the call)."""
        return self.in_bounds is not None

    def axis_value(self) -> int:
        return int(self.axis.value.data)

    def shape_props(self) -> dict[str, Any]:
        return {"axis": self.axis_value()}

    @classmethod
    def _check_axis(cls, rank: int, axis: int) -> None:
        if not 0 <= axis < rank:
            raise ShapeInferenceError(f"{cls.name}: axis {axis} is out of range for the rank-{rank} operand "
                                      f"(expected 0 <= axis < {rank})")

    def verify_op(self) -> None:
        elem = self._elems_agree()
        i_elem = self._elem(self.idx, "indices")
        if i_elem not in INDEX_TYPES:
            raise VerifyException(f"{self.name}: indices element type {i_elem} is not supported; expected i32 or i64")
        self._check_inferred(elem)
        size = shape_of(self.x.type)[self.axis_value()]
        values = constant_indices(self)
        if values is not None and size is not None:
            try:
                check_range(values, self.shown_axis(), size)
            except IndexOutOfBounds as err:
                raise VerifyException(f"{self.name}: constant indices: {err}") from None

    def _print_props(self, printer: Printer) -> None:
        shown = f", error_axis = {self.shown_axis()}" if self.error_axis is not None else ""
        printer.print_string(f" {{axis = {self.axis_value()}{shown}{', in_bounds' if self.is_in_bounds() else ''}}}")


@irdl_op_definition
class GatherOp(IndexedOp):
    """np.take(x, idx, axis) with mode "raise"."""

    name = "prim.gather"
    KIND: ClassVar[str] = "gather"

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """`x.shape[:axis] + idx.shape + x.shape[axis+1:]`."""
        shape, ishape = operand_shapes
        axis = int(props["axis"])
        cls._check_axis(len(shape), axis)
        return tuple(shape[:axis]) + tuple(ishape) + tuple(shape[axis + 1:])

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        x, idx = np.asarray(arrays[0]), np.asarray(arrays[1])
        axis = self.axis_value()
        pos = check_range(idx, self.shown_axis(), x.shape[axis])
        return cast_result(self, np.take(x, pos, axis=axis))


@irdl_op_definition
class TakeAlongOp(IndexedOp):
    """np.take_along_axis(x, idx, axis), numpy 2's broadcasting of the other dims."""

    name = "prim.take_along"
    KIND: ClassVar[str] = "take_along"

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """The other dims broadcast (1 against n; a dynamic dim against a static one is that one);
        the `axis` dim is idx's."""
        shape, ishape = operand_shapes
        axis = int(props["axis"])
        if len(ishape) != len(shape):
            raise ShapeInferenceError(f"{cls.name}: indices have rank {len(ishape)} and the operand rank "
                                      f"{len(shape)}; they must be equal")
        cls._check_axis(len(shape), axis)
        out: list[int | None] = []
        for d, (a, b) in enumerate(zip(shape, ishape)):
            if d == axis:
                out.append(b)
            elif a == 1 or a is None and b not in (None, 1):
                out.append(b)
            elif b == 1 or b is None or a == b:
                out.append(a)
            else:
                raise ShapeInferenceError(f"{cls.name}: dim {d}: operand size {a} and indices size {b} do not "
                                          "broadcast")
        return tuple(out)

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        x, idx = np.asarray(arrays[0]), np.asarray(arrays[1])
        axis = self.axis_value()
        pos = check_range(idx, self.shown_axis(), x.shape[axis])
        return cast_result(self, np.ascontiguousarray(np.take_along_axis(x, pos, axis=axis)))


GATHER_OPS: tuple[type[PrimOp], ...] = (GatherOp, TakeAlongOp)
