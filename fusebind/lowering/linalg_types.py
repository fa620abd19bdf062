"""The shared vocabulary of linalg emission: kernel specs, MLIR type strings, IR attribute readers.

Owns: `TensorSpec` and `EmittedKernel` (what a caller of `emit_linalg` gets back); `Dim` and
`Value` (an SSA tensor value while emitting: its name, dims and element type), and
`broadcast_dims` (numpy broadcasting of such dims, by `dialect.types.broadcast_shapes`); the
element type names with the `MAX_TENSOR_BYTES` cap (`ELEMENT_BYTES` is the element table's);
the `tensor<...>` / `memref<...>` type strings (`ttype`, `mtype`, `storage`: i1 is stored as a
byte, `ui8` as its signless `i8`); and the duck-typed readers of prim op attributes (`ints`, `flag`, `op_attr`, `op_kind`),
which accept every form the dialect stores.

Must not: emit ops or keep emission state (that is `emitter.py`), drive a kernel (`emit.py`),
import any other lowering module than `scalar_text` (everything in emission imports this one),
or import `mlir`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from fusebind.dialect.types import ELEMENT_BYTES, ELEMENT_TYPES, ELEMENTS, broadcast_shapes
from fusebind.lowering.scalar_text import ScalarEmitError, mt

Dim = int | str  # a static size, or the SSA name of an `index` value

# The largest static tensor a kernel may name: 2^62 bytes leaves int64 headroom for
# MLIR's size, stride and byte-offset arithmetic (see the module docstring).
MAX_TENSOR_BYTES = 1 << 62


@dataclass(frozen=True)
class TensorSpec:
    """An argument of a kernel: element type and shape (None = dynamic dim)."""

    elem: str
    shape: tuple[int | None, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class EmittedKernel:
    """The MLIR text of one kernel and the facts its caller needs."""

    text: str
    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    rowwise: bool = False  # emitted as one loop over rows (rowwise.py)

    @property
    def entry(self) -> str:
        """The one external symbol: MLIR's C-interface wrapper."""
        return f"_mlir_ciface_{self.name}"


def element_name(t: Any) -> str:
    """Element type name ('f32', 'i64', 'ui8', ...) of an xDSL scalar or tensor type."""
    elem = t.get_element_type() if hasattr(t, "get_element_type") else t
    width = getattr(elem, "width", None)
    if width is not None and hasattr(width, "data"):
        unsigned = getattr(getattr(getattr(elem, "signedness", None), "data", None), "name", "") == "UNSIGNED"
        return f"{'ui' if unsigned else 'i'}{width.data}"
    text = str(elem)
    if text in ELEMENTS or text.startswith("i"):
        return text
    raise ScalarEmitError(f"element type {text} is not supported; expected one of {', '.join(ELEMENT_TYPES)}")


def broadcast_dims(shapes: Sequence[Sequence[Dim]], what: str) -> list[Dim]:
    """numpy broadcasting of shapes whose dims are ints or SSA names: the rule is
    `dialect.types.broadcast_shapes`, with a name read as a dynamic dim (never 1). A static
    size other than 1 wins; else the first name; else 1. `what` names the op in the error."""
    out = broadcast_shapes(*([None if isinstance(d, str) else d for d in s] for s in shapes))
    if out is None:
        raise ScalarEmitError(f"{what}: shapes {[list(s) for s in shapes]} do not broadcast")
    rank = len(out)
    return [d if d is not None else next(s[j - rank + len(s)] for s in shapes
                                         if j - rank + len(s) >= 0 and isinstance(s[j - rank + len(s)], str))
            for j, d in enumerate(out)]


def shape_of(t: Any) -> tuple[int | None, ...]:
    return tuple(None if d < 0 else int(d) for d in t.get_shape())


def storage(elem: str) -> str:
    """How an element is stored in tensors and memrefs: its signless MLIR type (`ui8` as `i8`:
    the unsigned ops carry the sign), i1 as a byte (numpy bool's layout).

    Besides matching numpy, this keeps i1 out of memrefs: MLIR 22's memref-to-llvm
    asserts (aborting the process) on sub-byte stores.
    """
    return "i8" if elem == "i1" else mt(elem)


def ttype(shape: Sequence[Dim], elem: str) -> str:
    dims = "".join(f"{d if isinstance(d, int) else '?'}x" for d in shape)
    return f"tensor<{dims}{storage(elem)}>"


def mtype(spec: TensorSpec, strided: bool) -> str:
    dims = "".join(f"{'?' if d is None else d}x" for d in spec.shape)
    layout = ""
    if strided and spec.rank:
        layout = ", strided<[" + ", ".join("?" * 1 for _ in spec.shape) + "], offset: ?>"
    return f"memref<{dims}{storage(spec.elem)}{layout}>"


def ints(value: Any) -> list[int]:
    """Axes / permutations in whatever form the dialect stores them."""
    if value is None:
        return []
    if hasattr(value, "get_values"):
        return [int(v) for v in value.get_values()]
    if hasattr(value, "data") and isinstance(value.data, (tuple, list)):
        return [int(getattr(v, "value", v).data if hasattr(getattr(v, "value", v), "data") else v) for v in value.data]
    if hasattr(value, "value") and hasattr(value.value, "data"):
        return [int(value.value.data)]
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def flag(value: Any) -> bool:
    if hasattr(value, "value") and hasattr(value.value, "data"):
        return bool(value.value.data)
    if hasattr(value, "data"):
        return bool(value.data)
    return bool(value)


def op_attr(op: Any, *names: str) -> Any:
    for n in names:
        if hasattr(op, n):
            v = getattr(op, n)
            if not callable(v):
                return v
        for table in ("properties", "attributes"):
            d = getattr(op, table, {})
            if n in d:
                return d[n]
    return None


def op_kind(op: Any) -> str:
    kind = getattr(type(op), "KIND", None)
    if kind:
        return str(kind)
    return str(op.name).partition(".")[2]


@dataclass
class Value:
    name: str
    shape: list[Dim]
    elem: str


def out_spec(v: Value, dynamic: bool) -> TensorSpec:
    return TensorSpec(v.elem, tuple(None if (dynamic or isinstance(d, str)) else d for d in v.shape))


def read_by_maps(op: Any) -> bool:
    """Every user of `op`'s result reads it through `linalg.generic` indexing maps (an elementwise
    op, a reduction, a broadcast or an index map), so a strided view of it needs no copy."""
    def by_maps(user: Any) -> bool:
        kind = op_kind(user)
        return (hasattr(user, "scalar_body") or kind.startswith("reduce") or kind == "broadcast_to"
                or bool(getattr(type(user), "INDEX_MAP", False)))
    return all(by_maps(use.operation) for use in op.results[0].uses)
