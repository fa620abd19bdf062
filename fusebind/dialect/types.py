"""Element types and tensor types of the `prim` dialect.

Owns `ELEMENTS`, the one table of element type facts: for each scalar type IR
text names, its kind, bit width, numpy dtype (hence byte width and C type),
LLVM IR type and the signless MLIR type lowering writes for it (`ui8` is
stored and computed as `i8`, with unsigned ops). Every other element-type
mapping of fusebind derives from it (the kernel ABI's `DType` in
lowering/abi.py, the byte widths and float/int sets of lowering).
`ELEMENT_TYPES` are the ones the prim dialect supports: `f32 f64 i32 i64 i1`,
plus each family of `FAMILIES` that is switched on (`f16 bf16`: narrow floats,
stored narrow and computed in f32; `i8 i16 ui8 ui16 ui32 ui64`: the other
integer widths). i1 is stored as i8; a sum of f16 accumulates in f32.
Also owns the xDSL attributes of these types and the shape convention used
throughout the dialect: a shape is a tuple whose entries are ints (static) or
`None` (dynamic). Integers named `iN` are signless in the IR and read as signed
(two's complement), like numpy's int32/int64; `uiN` are unsigned.
bfloat16's numpy dtype is ml_dtypes' (whose import costs ~1 s of CPU), so it is resolved on
first use (`ElementInfo.numpy`, `bfloat16_dtype`) and `is_bfloat16` answers without importing
ml_dtypes: a bfloat16 array can only exist once ml_dtypes is loaded (docs/COMPILE_LATENCY.md).
It must not import anything from other fusebind packages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

from fusebind.dialect.errors import FusebindValueError

@dataclass(frozen=True)
class ElementInfo:
    """The facts of one scalar type, as IR text names it."""

    name: str  # the MLIR / xDSL name: "f32", "i1", ...
    kind: str  # "float", "int" (signless, read as signed), "uint" (unsigned) or "bool"
    bits: int  # the width of a value (i1: 1; stored as a byte, see `nbytes`)
    #: numpy's dtype of the same values in the same layout, or a function giving it (bfloat16's,
    #: whose module is imported only when asked); read it as `numpy`
    dtype_source: Any
    llvm: str  # the LLVM IR type: "float", "double", "i32", ...
    prim: bool  # a prim element type (else only in the MLIR text lowering writes)
    family: str = "base"  # the `FAMILIES` entry that switches it on ("base": always on)
    _resolved: list = field(default_factory=list, compare=False, repr=False)

    @property
    def numpy(self) -> np.dtype:
        """numpy's dtype of the same values in the same layout (bfloat16: imports ml_dtypes)."""
        if not self._resolved:
            src = self.dtype_source
            self._resolved.append(np.dtype(src() if callable(src) and not isinstance(src, type) else src))
        return self._resolved[0]

    @property
    def nbytes(self) -> int:
        # from the width, not `numpy`, so byte counts never import ml_dtypes (i1 is stored as a byte)
        return max(1, self.bits // 8)

    @property
    def mlir(self) -> str:
        """The signless MLIR type lowering computes in: `ui8` -> `i8`; others are their name."""
        return f"i{self.bits}" if self.kind == "uint" else self.name


#: The element families beyond the base five, and whether each is on (a prim type: verifiers,
#: the tracer, the binding table and static kernels accept it). A family is switched on when its
#: lowering is complete; until then its types are refused with the usual "unsupported dtype" error.
FAMILIES: dict[str, bool] = {
    "narrow_float": True,  # f16 bf16 (storage narrow, arithmetic in f32)
    "int_widths": True,  # i8 i16 ui8 ui16 ui32 ui64
}


def _info(name: str, kind: str, bits: int, numpy: type | Callable[[], Any], llvm: str,
          family: str = "base") -> ElementInfo:
    src = numpy if callable(numpy) and not isinstance(numpy, type) else np.dtype(numpy)
    return ElementInfo(name, kind, bits, src, llvm, family == "base" or FAMILIES[family], family)


_BF16: list[np.dtype] = []


def bfloat16_dtype() -> np.dtype:
    """ml_dtypes' bfloat16 (the one JAX uses), importing ml_dtypes on the first call."""
    if not _BF16:
        import ml_dtypes  # only here: programs without bfloat16 never pay its import

        _BF16.append(np.dtype(ml_dtypes.bfloat16))
    return _BF16[0]


def is_bfloat16(dt: Any) -> bool:
    """Whether `dt` (a dtype or anything `np.dtype` takes) is ml_dtypes' bfloat16. Without ml_dtypes
    loaded no bfloat16 dtype exists in the process, so the answer is False without importing it."""
    if "ml_dtypes" not in sys.modules:
        return False
    try:
        return np.dtype(dt) == bfloat16_dtype()
    except TypeError:
        return False


#: Every scalar type fusebind names, in `ELEMENT_TYPES` order (messages list them so).
ELEMENTS: dict[str, ElementInfo] = {e.name: e for e in (
    _info("f32", "float", 32, np.float32, "float"),
    _info("f64", "float", 64, np.float64, "double"),
    _info("i32", "int", 32, np.int32, "i32"),
    _info("i64", "int", 64, np.int64, "i64"),
    _info("i1", "bool", 1, np.bool_, "i1"),
    _info("f16", "float", 16, np.float16, "half", "narrow_float"),
    _info("bf16", "float", 16, bfloat16_dtype, "bfloat", "narrow_float"),
    _info("i8", "int", 8, np.int8, "i8", "int_widths"),
    _info("i16", "int", 16, np.int16, "i16", "int_widths"),
    _info("ui8", "uint", 8, np.uint8, "i8", "int_widths"),
    _info("ui16", "uint", 16, np.uint16, "i16", "int_widths"),
    _info("ui32", "uint", 32, np.uint32, "i32", "int_widths"),
    _info("ui64", "uint", 64, np.uint64, "i64", "int_widths"),
)}

ELEMENT_TYPES: tuple[str, ...] = tuple(n for n, e in ELEMENTS.items() if e.prim)
FLOAT_TYPES: frozenset[str] = frozenset(n for n in ELEMENT_TYPES if ELEMENTS[n].kind == "float")
#: every integer type, signed and unsigned (`SIGNED_INT_TYPES`/`UINT_TYPES` split them)
INT_TYPES: frozenset[str] = frozenset(n for n in ELEMENT_TYPES if ELEMENTS[n].kind in ("int", "uint"))
SIGNED_INT_TYPES: frozenset[str] = frozenset(n for n in ELEMENT_TYPES if ELEMENTS[n].kind == "int")
UINT_TYPES: frozenset[str] = frozenset(n for n in ELEMENT_TYPES if ELEMENTS[n].kind == "uint")
NUMERIC_TYPES: frozenset[str] = FLOAT_TYPES | INT_TYPES
ALL_TYPES: frozenset[str] = frozenset(ELEMENT_TYPES)
#: Bytes per element in tensors and memrefs, for every name in `ELEMENTS` (i1: one byte).
ELEMENT_BYTES: dict[str, int] = {n: e.nbytes for n, e in ELEMENTS.items()}

Shape = tuple[int | None, ...]

_FLOAT_ATTRS = {"f16": Float16Type, "bf16": BFloat16Type, "f32": Float32Type, "f64": Float64Type}


def element_type(name: str) -> Attribute:
    """The xDSL attribute for an element type name (`"f32"` → `f32`)."""
    info = ELEMENTS.get(name) if isinstance(name, str) else None
    if info is None or not info.prim:
        raise FusebindValueError(f"unknown element type {name!r}; expected one of {', '.join(ELEMENT_TYPES)}")
    if info.kind == "float":
        return _FLOAT_ATTRS[info.name]()
    return IntegerType(info.bits, Signedness.UNSIGNED if info.kind == "uint" else Signedness.SIGNLESS)


def element_type_name(attr: Attribute) -> str:
    """The name of an xDSL element type (`f32` → `"f32"`); raises ValueError otherwise."""
    for name, cls in _FLOAT_ATTRS.items():
        if isinstance(attr, cls) and name in ELEMENT_TYPES:
            return name
    if isinstance(attr, IntegerType):
        sign = attr.signedness.data.name
        name = {"SIGNLESS": "i", "UNSIGNED": "ui"}.get(sign, "?") + str(attr.width.data)
        if name in ELEMENT_TYPES:
            return name
    raise FusebindValueError(f"unsupported element type {attr}; expected one of {', '.join(ELEMENT_TYPES)}")


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of an element type name (`"i1"` → bool)."""
    info = ELEMENTS.get(name) if isinstance(name, str) else None
    if info is None or not info.prim:
        raise FusebindValueError(f"unknown element type {name!r}; expected one of {', '.join(ELEMENT_TYPES)}")
    return info.numpy


#: the prim element types whose dtype is numpy's own, by dtype (bfloat16 is asked apart: `is_bfloat16`)
_EAGER: dict[np.dtype, str] = {ELEMENTS[n].dtype_source: n for n in ELEMENT_TYPES
                               if isinstance(ELEMENTS[n].dtype_source, np.dtype)}
#: numpy's name of each prim element type's dtype, in `ELEMENT_TYPES` order, for messages (no import)
NUMPY_NAMES: tuple[str, ...] = tuple(str(ELEMENTS[n].dtype_source) if n in _EAGER.values() else "bfloat16"
                                     for n in ELEMENT_TYPES)


def element_of_numpy(dtype: Any) -> str | None:
    """The prim element type name of a numpy dtype object, or None for any other value; bfloat16
    is recognised without importing ml_dtypes (see `is_bfloat16`)."""
    if not isinstance(dtype, np.dtype):
        return None
    name = _EAGER.get(dtype)
    if name is not None:
        return name
    if "bf16" in ELEMENT_TYPES and is_bfloat16(dtype):
        return "bf16"
    return next((n for d, n in _EAGER.items() if d == dtype), None)  # (equal but hashed apart: none known)


class NumpyDtypeNames(Mapping):
    """The read-only mapping numpy dtype -> prim element type name (`SUPPORTED` of the api) that
    looks bfloat16 up without importing ml_dtypes; only iterating it resolves bfloat16's dtype."""

    def __getitem__(self, dtype: Any) -> str:
        name = element_of_numpy(dtype)
        if name is None:
            raise KeyError(dtype)
        return name

    def __contains__(self, dtype: object) -> bool:
        return element_of_numpy(dtype) is not None

    def __iter__(self) -> Iterator[np.dtype]:
        return (ELEMENTS[n].numpy for n in ELEMENT_TYPES)

    def __len__(self) -> int:
        return len(ELEMENT_TYPES)


def name_of_numpy_dtype(dtype: np.dtype) -> str:
    """The element type name of a numpy dtype; raises ValueError for other dtypes."""
    try:
        name = element_of_numpy(np.dtype(dtype))
    except TypeError:
        name = None
    if name is not None:
        return name
    raise FusebindValueError(f"numpy dtype {dtype} has no fusebind element type; use one of {', '.join(ELEMENT_TYPES)}")


def tensor_type(shape: Iterable[int | None], name: str) -> TensorType:
    """A ranked tensor type; shape entries `-1` or `None` are dynamic (`?`)."""
    dims = [DYNAMIC_INDEX if d is None or d == -1 else int(d) for d in shape]
    for d in dims:
        if d < 0 and d != DYNAMIC_INDEX:
            raise FusebindValueError(f"invalid dimension {d}; use -1 or None for a dynamic one")
    return TensorType(element_type(name), dims)


def shape_of(t: Attribute) -> Shape:
    """The shape of a tensor type, with `None` for dynamic dimensions."""
    if not isinstance(t, TensorType):
        raise FusebindValueError(f"expected a ranked tensor type, found {t}")
    return tuple(None if d == DYNAMIC_INDEX or d < 0 else d for d in t.get_shape())


def elem_of(t: Attribute) -> str:
    """The element type name of a tensor type."""
    if not isinstance(t, TensorType):
        raise FusebindValueError(f"expected a ranked tensor type, found {t}")
    return element_type_name(t.element_type)


def format_shape(shape: Sequence[int | None]) -> str:
    """`(4, ?)`-style text for messages; a 1-d shape keeps its trailing comma."""
    parts = ["?" if d is None else str(d) for d in shape]
    if len(parts) == 1:
        return f"({parts[0]},)"
    return "(" + ", ".join(parts) + ")"


def is_static(shape: Sequence[int | None]) -> bool:
    return all(d is not None for d in shape)


def num_elements(shape: Sequence[int | None]) -> int | None:
    """Element count of a static shape, `None` when any dimension is dynamic."""
    n = 1
    for d in shape:
        if d is None:
            return None
        n *= d
    return n


def compatible(a: Sequence[int | None], b: Sequence[int | None]) -> bool:
    """Same rank and every dimension equal or dynamic on either side."""
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def broadcast_shapes(*shapes: Sequence[int | None]) -> Shape | None:
    """numpy broadcasting of shapes with dynamic dims; `None` if they cannot broadcast.

    A dynamic dim against a static `s != 1` gives `s` (the `?` must be `s` or 1
    at run time); against 1 or another `?` it stays dynamic.
    """
    rank = max((len(s) for s in shapes), default=0)
    out: list[int | None] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        static = {d for d in dims if d is not None and d != 1}
        if len(static) > 1:
            return None
        if static:
            out.append(static.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def broadcasts_to(src: Sequence[int | None], dst: Sequence[int | None]) -> bool:
    """Whether `np.broadcast_to(src-shaped, dst)` can succeed (dynamic dims allowed)."""
    if len(src) > len(dst):
        return False
    off = len(dst) - len(src)
    for i, d in enumerate(src):
        t = dst[off + i]
        if d is None or d == 1 or t is None:
            continue
        if d != t:
            return False
    return True
