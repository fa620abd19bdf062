"""The kernel ABI as data: element dtypes, kernel signatures, memref descriptors.

This module owns `DType` (one member per entry of the element table, the
narrow floats and other integer widths included; its numpy dtypes and ctypes come
from the element table `fusebind.dialect.types.ELEMENTS`), `KernelSignature` and the ctypes memref
descriptor structs of the kernel ABI (docs/INTERNAL-API.md, docs/KERNEL-ABI.md).
It lives in `lowering` because lowering is what produces kernels of this ABI;
`fusebind.runtime.dtypes` re-exports every name, so runtime code and users keep
importing them from there. Must not: import mlir, llvmlite or `fusebind.runtime`.
"""

from __future__ import annotations

import ctypes
import enum
import functools
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from fusebind.dialect.errors import FusebindInternalError, FusebindTypeError, FusebindValueError
from fusebind.dialect.types import ELEMENT_TYPES, ELEMENTS, NUMPY_NAMES, element_of_numpy


class DType(enum.Enum):
    """An element type a kernel reads or writes."""

    F32 = "f32"
    F64 = "f64"
    I32 = "i32"
    I64 = "i64"
    I1 = "i1"
    F16 = "f16"
    BF16 = "bf16"
    I8 = "i8"
    I16 = "i16"
    U8 = "ui8"
    U16 = "ui16"
    U32 = "ui32"
    U64 = "ui64"

    @classmethod
    def parse(cls, value: "DType | str") -> "DType":
        """`DType.parse("f32")`; a DType is returned as is."""
        if isinstance(value, DType):
            return value
        if isinstance(value, str) and value.strip().lower() in ELEMENT_TYPES:
            return cls(value.strip().lower())
        names = ", ".join(ELEMENT_TYPES)
        raise FusebindValueError(f"unknown dtype {value!r}: expected one of {names}")

    @classmethod
    def from_numpy(cls, dtype: Any) -> "DType":
        """The DType of a numpy dtype (or anything `np.dtype()` accepts)."""
        np_dtype = np.dtype(dtype)
        name = element_of_numpy(np_dtype)  # (bfloat16 without importing ml_dtypes)
        if name is not None:
            return cls(name)
        names = ", ".join(NUMPY_NAMES)
        raise FusebindValueError(f"numpy dtype {np_dtype} has no fusebind DType: supported are {names}")

    @property
    def numpy(self) -> np.dtype:
        return ELEMENTS[self.value].numpy  # (bfloat16: imports ml_dtypes on first use)

    @property
    def mlir(self) -> str:
        """The signless MLIR type lowering writes: f32, f64, i32, i64, i1, bf16, ...; `ui8` -> `i8`."""
        return ELEMENTS[self.value].mlir

    @property
    def ctype(self) -> type:
        return _CTYPES[self]

    @property
    def itemsize(self) -> int:
        return ELEMENTS[self.value].nbytes

    def __repr__(self) -> str:
        return f"DType.{self.name}"

    def __str__(self) -> str:
        return self.value


# Derived from the one element table; the C type is numpy's for the same layout
# (c_float, c_double, c_int32, c_int64, c_bool).
# f16 and bf16 have no ctypes type: their descriptors point at 16-bit words (so bf16's dtype, and
# ml_dtypes, are not needed here)
_CTYPES: dict[DType, type] = {d: np.ctypeslib.as_ctypes_type(np.uint16 if ELEMENTS[d.value].kind == "float"
                                                             and ELEMENTS[d.value].bits == 16
                                                             else ELEMENTS[d.value].numpy)
                              for d in DType}
if tuple(d.value for d in DType) != tuple(ELEMENTS):
    raise FusebindInternalError(f"DType {[d.value for d in DType]} differs from the element table {tuple(ELEMENTS)}")


def parse_dtypes(dtypes: Iterable["DType | str"]) -> tuple[DType, ...]:
    """A dtype tuple from DTypes or names; a bare string is refused because
    "f32" would otherwise read as three one-letter names."""
    if isinstance(dtypes, (str, DType)):
        raise FusebindTypeError(
            f"dtypes must be a sequence such as ('f32', 'f32'), got the single value {dtypes!r}"
        )
    return tuple(DType.parse(d) for d in dtypes)


@functools.lru_cache(maxsize=None)
def memref_descriptor(dtype: DType, rank: int) -> type[ctypes.Structure]:
    """The ctypes struct of a ranked memref descriptor:
    `{T* allocated; T* aligned; int64 offset; int64 sizes[r]; int64 strides[r]}`."""
    if rank < 0:
        raise FusebindValueError(f"memref rank must be >= 0, got {rank}")
    ptr = ctypes.POINTER(dtype.ctype)
    fields: list[tuple[str, Any]] = [("allocated", ptr), ("aligned", ptr), ("offset", ctypes.c_int64)]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRef{rank}D_{dtype.value}", (ctypes.Structure,), {"_fields_": fields})


Operand = tuple[DType, int]

#: the status operand of an ABI v2 kernel (docs/KERNEL-ABI.md): a memref<4xi64> after the outputs,
#: zeroed by the caller; a kernel that finds a bad index stores [check code (1-based), index, size]
STATUS_OPERAND: Operand = (DType.I64, 1)
STATUS_WORDS = 4


@dataclass(frozen=True)
class KernelSignature:
    """The C signature of a kernel: one memref descriptor pointer per
    argument, `inputs` in order then `outputs`, each a (DType, rank).

    `status`: kernel ABI v2 (docs/KERNEL-ABI.md): one more pointer after the outputs, to a
    `memref<4xi64>` the caller zeroes before the call and reads after it (the error channel of
    checked indices). It is not an output: `dtypes` (the binding row) does not include it."""

    inputs: tuple[Operand, ...]
    outputs: tuple[Operand, ...]
    status: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _operands(self.inputs, "inputs"))
        object.__setattr__(self, "outputs", _operands(self.outputs, "outputs"))
        if not self.outputs:
            raise FusebindValueError("KernelSignature needs at least one output: kernels write outputs in place")
        if not isinstance(self.status, bool):
            raise FusebindTypeError(f"KernelSignature.status must be a bool (True: ABI v2), got {self.status!r}")

    @property
    def abi(self) -> int:
        """The kernel ABI version: 1 (inputs, outputs), 2 (+ the status operand)."""
        return 2 if self.status else 1

    @property
    def dtypes(self) -> tuple[DType, ...]:
        """The binding-table dtype tuple: inputs in order, then outputs."""
        return tuple(d for d, _ in (*self.inputs, *self.outputs))

    @property
    def operands(self) -> tuple[Operand, ...]:
        """Every C argument in order: inputs, outputs, then the status operand (v2)."""
        return (*self.inputs, *self.outputs, *((STATUS_OPERAND,) if self.status else ()))

    def flat(self) -> "KernelSignature":
        """The same C function seen as ABI v1: the status operand as one more output. (What code
        that passes every operand alike, such as the call thunk, calls a v2 kernel through.)"""
        return KernelSignature(self.inputs, self.operands[len(self.inputs):]) if self.status else self

    @property
    def argtypes(self) -> tuple[Any, ...]:
        """ctypes argtypes: a pointer to each operand's descriptor struct (status included)."""
        return tuple(ctypes.POINTER(memref_descriptor(d, r)) for d, r in self.operands)

    def cfunctype(self) -> Any:
        return _cfunctype(self.argtypes)

    def __str__(self) -> str:
        def fmt(ops: tuple[Operand, ...]) -> str:
            return ", ".join(f"memref<{r}d x {d.value}>" for d, r in ops)

        return f"({fmt(self.inputs)}) -> ({fmt(self.outputs)})" + (" + status memref<4xi64>" if self.status else "")


@functools.lru_cache(maxsize=None)
def _cfunctype(argtypes: tuple[Any, ...]) -> Any:
    return ctypes.CFUNCTYPE(None, *argtypes)


def _operands(values: Any, what: str) -> tuple[Operand, ...]:
    out = []
    for item in values:
        try:
            dtype, rank = item
        except (TypeError, ValueError):
            raise FusebindTypeError(f"KernelSignature.{what}: each entry must be (dtype, rank), got {item!r}") from None
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise FusebindValueError(f"KernelSignature.{what}: rank must be an int >= 0, got {rank!r}")
        out.append((DType.parse(dtype), rank))
    return tuple(out)
