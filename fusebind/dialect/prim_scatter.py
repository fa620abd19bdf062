"""`prim.scatter`: a copy of an operand with updates at positions along one axis (numpy's `.at`).

    %r = prim.scatter %x, %idx, %v {mode = "add", axis = 0} : (tensor<256xi64>, tensor<1000xi64>, tensor<1000xi64>) -> tensor<256xi64>

The updates are `np.put_along_axis`'s, over the *update shape* U: x's shape with its `axis` dim
replaced by idx's. `idx` has x's rank and broadcasts to U (its dims other than `axis` are x's or
1); `v` broadcasts to U as numpy broadcasts (right-aligned, dims of 1 repeat: a scalar update is a
0-d `v`). Update `j` (a multi-index of U, visited in C order) targets element `p(j)` of x, where
`p(j)` is `j` with its `axis` entry replaced by `idx[j]` (negative: counted from the end, as
numpy's). The result is x with, update after update:
- mode "set": `y[p(j)] = v[j]` (a repeated position: the last write wins, numpy's assignment);
  `v` has x's element type (the caller casts as numpy's assignment does);
- modes "add", "mul", "min", "max": `y[p(j)] = cast(ufunc(cast(y[p(j)], V), v[j]), X)`, i.e.
  `np.add.at` / `np.multiply.at` / `np.minimum.at` / `np.maximum.at`: `v`'s element type V is
  numpy's loop type (`np.result_type(X, V) == V` is required), every step casts back to x's
  element type X (numpy's unsafe cast, so integers wrap, and min / max see the cast values),
  and a repeated position accumulates in the order of the updates (float rounding included).
  min / max propagate NaN as np.minimum / np.maximum; on bool, add / max are `or`, mul / min `and`.

Any other numpy indexing reduces to this form: with indices known at trace time, x reshaped to
1-d and `idx` the flat positions in numpy's order (`np.arange(x.size).reshape(x.shape)[key]`).

An index outside `[-n, n)` (n = x's `axis` size) is `fb.IndexOutOfBounds` with numpy's message,
naming the first one in update order. A constant `idx` is range-checked by the verifier; the
reference checks before writing anything; a kernel checks through the error channel
(`Emitter.checked_index`). The unit property `in_bounds` is the caller's promise that every
index is in range (a call-time check of the jitted function's argument they come from): a
lowering then only normalizes and clamps (a broken promise still never writes outside x); the
reference checks regardless.

Accepted element types: any of the five for x and v, i32 / i64 for idx. Not an index map
(`INDEX_MAP` False: it writes), not elementwise: outside a region the executor runs its reference;
a region of its own lowers it as a loop over the updates (`lowering/emit_scatter.py`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, StringAttr, TensorType, UnitAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def, traits_def
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import IndexOutOfBounds, ShapeInferenceError
from fusebind.dialect.prim_base import PrimOp
from fusebind.dialect.prim_structured import ConstantOp
from fusebind.dialect.types import ALL_TYPES, Shape, elem_of, name_of_numpy_dtype, numpy_dtype, shape_of, tensor_type

Value = SSAValue | Operation

#: mode -> the numpy ufunc whose `.at` it is (None: assignment)
MODES: dict[str, np.ufunc | None] = {"set": None, "add": np.add, "mul": np.multiply, "min": np.minimum,
                                     "max": np.maximum}

#: the index bytes the reference moves per index byte (`reference_index_passes`): min and max (the
#: range check), three more passes when some are negative, and ufunc.at's own read with its
#: per-element dispatch (measured for 10^6 int64 indices into 256 bins: `normalized` ~1-3 copies'
#: time, np.add.at ~5)
REFERENCE_INDEX_PASSES = 4

#: the element types of an index tensor
INDEX_ELEMS = ("i32", "i64")


def bounds_message(index: int, axis: int, size: int) -> str:
    """numpy's words for an index outside its axis."""
    return f"index {index} is out of bounds for axis {axis} with size {size}"


def normalized(idx: np.ndarray, axis: int, size: int) -> np.ndarray:
    """`idx` as int64 in [0, size) (negative counts from the end); `IndexOutOfBounds` (numpy's
    message) for the first index in C order outside [-size, size). Two reductions (min, max) when
    every index is in range; the negatives are rewritten only when there are some."""
    flat = np.asarray(idx).astype(np.int64, copy=False)
    if flat.size == 0:
        return flat
    lo, hi = int(flat.min()), int(flat.max())
    if lo < -size or hi >= size:
        bad = (flat < -size) | (flat >= size)
        raise IndexOutOfBounds(bounds_message(int(flat.reshape(-1)[int(np.flatnonzero(bad)[0])]), axis, size))
    if lo >= 0:
        return flat
    out = np.right_shift(flat, 63)  # -1 where negative, else 0: size added there (3 passes, one temporary;
    np.bitwise_and(out, size, out=out)  # np.where would make three and take ~20x as long)
    out += flat
    return out


def along_axis_key(pos: np.ndarray, axis: int) -> tuple[Any, ...]:
    """The fancy index that sends element j of `pos` to `j` with its `axis` entry replaced by
    `pos[j]` (np.put_along_axis's positions)."""
    rank = pos.ndim
    return tuple(pos if d == axis else np.arange(n).reshape((1,) * d + (n,) + (1,) * (rank - d - 1))
                 for d, n in enumerate(pos.shape))


@irdl_op_definition
class ScatterOp(PrimOp):
    """x with v written or combined at put_along_axis positions `idx` along `axis` (numpy's `.at`)."""

    name = "prim.scatter"
    KIND: ClassVar[str] = "scatter"
    INDEX_OPERANDS: ClassVar[tuple[int, ...]] = (1,)
    x = operand_def(TensorType)
    idx = operand_def(TensorType)
    v = operand_def(TensorType)
    result = result_def(TensorType)
    mode = prop_def(StringAttr)
    axis = prop_def(IntegerAttr)
    in_bounds = opt_prop_def(UnitAttr)
    traits = traits_def(Pure())
    DTYPES: ClassVar[frozenset[str]] = ALL_TYPES
    DTYPE_OPERANDS: ClassVar[tuple[str, ...] | None] = ("x", "v")

    def __init__(self, x: Value, idx: Value, v: Value, mode: str, axis: int, in_bounds: bool = False):
        x, idx, v = SSAValue.get(x), SSAValue.get(idx), SSAValue.get(v)
        out = type(self).infer_shape(shape_of(x.type), shape_of(idx.type), shape_of(v.type), axis=axis)
        props: dict[str, Any] = {"mode": StringAttr(mode), "axis": IntegerAttr(int(axis), i64)}
        if in_bounds:
            props["in_bounds"] = UnitAttr()
        super().__init__(operands=[x, idx, v], result_types=[tensor_type(out, elem_of(x.type))], properties=props)

    # --- facts -----------------------------------------------------------
    def mode_value(self) -> str:
        return self.mode.data

    def axis_value(self) -> int:
        return int(self.axis.value.data)

    def is_in_bounds(self) -> bool:
        """The caller promises every index is in [-n, n) (it checked them before the call)."""
        return self.in_bounds is not None

    def flops(self) -> float | None:
        """One combine per update (none for "set")."""
        n = 1
        for d in type(self).update_shape(shape_of(self.x.type), shape_of(self.idx.type), self.axis_value()):
            if d is None:
                return None
            n *= d
        return 0.0 if self.mode_value() == "set" else float(n)

    def reference_index_passes(self, operand: int) -> int:
        """How many times the reference (arm 0, or the op outside a region) moves the bytes of
        operand #operand: the indices ~REFERENCE_INDEX_PASSES times (their range check and
        normalization on numpy temporaries, which a kernel does in registers), the others once
        (compiler/cost.py asks; so a region holding the scatter alone is priced below it)."""
        return REFERENCE_INDEX_PASSES if operand == 1 else 1

    def shape_props(self) -> dict[str, Any]:
        return {"axis": self.axis_value()}

    @classmethod
    def update_shape(cls, shape: Shape, ishape: Shape, axis: int) -> Shape:
        """U: x's shape with the `axis` dim idx's (the updates, visited in C order)."""
        return tuple(ishape[d] if d == axis else n for d, n in enumerate(shape))

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """x's shape; idx has x's rank and broadcasts to the update shape off `axis`, v
        broadcasts to it (numpy's rule)."""
        shape, ishape, vshape = operand_shapes
        axis, rank = int(props["axis"]), len(shape)
        if rank == 0:
            raise ShapeInferenceError(f"{cls.name}: the operand is 0-d; it needs an axis to scatter along")
        if not 0 <= axis < rank:
            raise ShapeInferenceError(f"{cls.name}: axis {axis} is out of range for the rank-{rank} operand "
                                      f"(expected 0 <= axis < {rank})")
        if len(ishape) != rank:
            raise ShapeInferenceError(f"{cls.name}: indices have rank {len(ishape)} and the operand rank {rank}; "
                                      "they must be equal")
        for d, (a, b) in enumerate(zip(shape, ishape)):
            if d != axis and b != 1 and a is not None and b is not None and a != b:
                raise ShapeInferenceError(f"{cls.name}: dim {d}: indices size {b} is neither 1 nor the operand "
                                          f"size {a} (only axis {axis} may differ)")
        update = cls.update_shape(shape, ishape, axis)
        if len(vshape) > rank or any(b != 1 and a is not None and b is not None and a != b
                                     for a, b in zip(update[rank - len(vshape):], vshape)):
            raise ShapeInferenceError(f"{cls.name}: values of shape {_fmt(vshape)} do not broadcast to the update "
                                      f"shape {_fmt(update)}")
        return tuple(shape)

    # --- verification -------------------------------------------------------
    def verify_op(self) -> None:
        mode = self.mode_value()
        if mode not in MODES:
            raise VerifyException(f"{self.name}: mode '{mode}' is not one of {', '.join(MODES)}")
        x_elem = self._elem(self.x, "operand")
        i_elem = self._elem(self.idx, "indices")
        v_elem = self._elem(self.v, "values")
        if i_elem not in INDEX_ELEMS:
            raise VerifyException(f"{self.name}: indices element type {i_elem} is not supported; expected i32 or i64")
        if mode == "set" and v_elem != x_elem:
            raise VerifyException(f"{self.name}: mode 'set' needs values of the operand's element type {x_elem}, "
                                  f"found {v_elem} (cast them first)")
        loop = np.result_type(numpy_dtype(x_elem), numpy_dtype(v_elem))
        if mode != "set" and loop != numpy_dtype(v_elem):
            raise VerifyException(f"{self.name}: values of element type {v_elem} are not numpy's loop type for an "
                                  f"operand of {x_elem} (cast them to {name_of_numpy_dtype(loop)} first)")
        self._check_inferred(x_elem)
        owner = self.idx.owner
        size = shape_of(self.x.type)[self.axis_value()]
        if isinstance(owner, ConstantOp) and size is not None:
            try:
                normalized(owner.reference(), self.axis_value(), size)
            except IndexOutOfBounds as err:
                raise VerifyException(f"{self.name}: constant indices: {err}") from None

    # --- syntax: {mode = "add", axis = 0[, in_bounds]} ------------------------
    def _print_props(self, printer: Printer) -> None:
        printer.print_string(f' {{mode = "{self.mode_value()}", axis = {self.axis_value()}'
                             f'{", in_bounds" if self.is_in_bounds() else ""}}}')

    # --- reference ---------------------------------------------------------
    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        x, idx, v = (np.asarray(a) for a in arrays)
        axis = self.axis_value()
        update = type(self).update_shape(x.shape, idx.shape, axis)
        pos = np.broadcast_to(normalized(idx, axis, x.shape[axis]), update)
        y = np.array(x, dtype=numpy_dtype(self.result_elem()), copy=True)
        ufunc = MODES[self.mode_value()]
        key = along_axis_key(pos, axis)
        v = np.broadcast_to(v, update)
        if ufunc is None:
            y[key] = v  # numpy's assignment: a repeated position keeps the last value
        else:
            with np.errstate(all="ignore"):  # numpy's ufunc.at: integers wrap, casts are unsafe
                ufunc.at(y, key, v)
        return y


def _fmt(shape: Shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


SCATTER_OPS: tuple[type[PrimOp], ...] = (ScatterOp,)
