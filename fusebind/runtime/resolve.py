"""Resolving one IR node to a bound kernel: `compile_one`.

Owns `compile_one(node, table, backend)`, the `KernelMiss` error and the
static request of a primitive node (which op attributes select its static
kernel row). Every kind of node goes through the same table lookup:
a primitive `prim.<KIND>` through `BindingKey.static(KIND)`, a `fused.region`
through its runtime arm `BindingKey.runtime_fused(id)` (or, for a static
catalog id, `BindingKey.static("fused.<name>")`). The lookup is
dtype-precise: the dtype tuple lists the node's inputs, then its outputs.
A static catalog key serves every shape, and a runtime row may have been
bound for other shapes or ranks than the region asks (a kernel compiled for
1024 elements, a hand-bound C kernel), so every fused.region row must also
fit the region: the kernel's ranks, and its shape caps (`CAP_SHAPE_DYNAMIC`
fits any shape, `shape_cap(...)` only those shapes; a row without either is
trusted). A row that does not fit is a miss: the region runs arm 0.

Must not: compile anything, or write the table (that is static_kernels.py and
the JIT); it only reads the snapshot it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fusebind.dialect.errors import FusebindError
from fusebind.compiler.catalog import RUNTIME_FUSED_BASE, static_kernel_op
from fusebind.compiler.cost import Cost, cheaper
from fusebind.runtime.bindings import BindingKey, BindingRow, BindingTable
from fusebind.runtime.dtypes import DType
from fusebind.runtime.fused_kernels import CAP_SHAPE_DYNAMIC, SHAPE_CAP_PREFIX, shape_cap_fits
from fusebind.runtime.kernel import Kernel


class KernelMiss(FusebindError, LookupError):
    """No kernel is bound for a node: names the key, dtypes, backend, what is
    bound for that key, and how to fix it."""

    def __init__(self, message: str, key: BindingKey | None, dtypes: tuple[DType, ...], backend: str) -> None:
        super().__init__(message)
        self.key = key
        self.dtypes = dtypes
        self.backend = backend


@dataclass(frozen=True)
class ResolvedKernel:
    """The row a node resolved to."""

    key: BindingKey
    dtypes: tuple[DType, ...]
    backend: str
    row: BindingRow

    @property
    def kernel(self) -> Kernel:
        return self.row.kernel

    @property
    def cost(self) -> Cost:
        return self.row.cost


def _elem(value: Any) -> str:
    from fusebind.dialect.types import elem_of

    return elem_of(value.type)


def node_dtypes(node: Any) -> tuple[DType, ...]:
    """The binding dtype tuple of a node: operand element types, then results."""
    return tuple(DType.parse(_elem(v)) for v in (*node.operands, *node.results))


def _fmt(dtypes: tuple[DType, ...]) -> str:
    return "(" + ", ".join(d.value for d in dtypes) + ")"


def static_attrs(node: Any) -> tuple[int, dict[str, Any]]:
    """(rank, attributes) that select the static kernel of a primitive node,
    in the form `static_kernels.ensure_static_kernel` takes them."""
    from fusebind.dialect.prim import CompareOp, ReductionOp, TransposeOp
    from fusebind.dialect.types import shape_of

    if isinstance(node, ReductionOp):
        rank = len(shape_of(node.operands[0].type))
        axes = tuple(sorted({int(a) % rank for a in node.axes_list()})) if rank else ()
        return rank, {"axes": axes, "keepdims": node.keepdims is not None}
    rank = len(shape_of(node.results[0].type))
    if isinstance(node, TransposeOp):
        return rank, {"perm": tuple(int(p) for p in node.perm_list())}
    if isinstance(node, CompareOp):
        return rank, {"predicate": node.predicate.data}
    return rank, {}


def required_caps(node: Any) -> frozenset[str]:
    """Caps a static row must carry to run `node` (rank and attributes)."""
    rank, attrs = static_attrs(node)
    caps = {f"attr:{k}={tuple(v) if isinstance(v, (list, tuple)) else v}" for k, v in attrs.items()}
    return frozenset(caps | {f"rank={rank}"})


def binding_key_of(node: Any, fused_id: int | None = None) -> BindingKey | None:
    """The key a node resolves through (None: a region without an id)."""
    if node.name == "fused.region":
        fid = fused_id if fused_id else node.id
        if not fid:
            return None
        if fid >= RUNTIME_FUSED_BASE:
            return BindingKey.runtime_fused(fid)
        op = static_kernel_op(fid)
        return None if op is None else BindingKey.static(op)
    kind = getattr(node, "KIND", None)
    if kind is None:
        raise TypeError(f"compile_one: {node.name} is neither a prim op nor a fused.region")
    return BindingKey.static(kind)


def _node_shapes(node: Any) -> list[tuple[int | None, ...]]:
    from fusebind.dialect.types import shape_of

    return [tuple(shape_of(v.type)) for v in (*node.operands, *node.results)]


def region_row_fits(row: BindingRow, node: Any) -> bool:
    """Can `row` (a static catalog or runtime-fused row) run this fused.region:
    the kernel's ranks equal the region's, and its shape caps allow its shapes
    (`shape_cap_fits`; a `?` dim fits any size, a dynamic region dim only a `?`)."""
    shapes = _node_shapes(node)
    sig = row.kernel.signature
    if [r for _, r in (*sig.inputs, *sig.outputs)] != [len(s) for s in shapes]:
        return False
    if CAP_SHAPE_DYNAMIC in row.caps:
        return True
    exact = [c for c in row.caps if c.startswith(SHAPE_CAP_PREFIX)]
    if not exact:
        return True
    return any(shape_cap_fits(c, shapes) for c in exact)


def _best(rows: tuple[BindingRow, ...]) -> BindingRow:
    """The priced row predicted fastest, else the first registered."""
    best = rows[0]
    for row in rows[1:]:
        if cheaper(row.cost, best.cost):
            best = row
    return best


def compile_one(node: Any, table: BindingTable, backend: str, *, fused_id: int | None = None) -> ResolvedKernel:
    """Resolve `node` (a prim op or a fused.region) to its kernel row in `table`.

    `fused_id` overrides the region's own id (an id the JIT adopted for it).
    Raises `KernelMiss` when nothing is bound for the exact dtypes on `backend`.
    """
    dtypes = node_dtypes(node)
    key = binding_key_of(node, fused_id)
    label = node.name + (f" @{node.region_name}" if node.name == "fused.region" else "")
    if key is None:
        raise KernelMiss(
            f"fusebind: {label} has no FusedOpId (fused_id = 0, unassigned) for dtypes {_fmt(dtypes)} on backend "
            f"{backend!r}; adopt it first with adopt_runtime_fused(name, region, kernel, dtypes, backend), "
            "or run its arm 0 (the primitives)", None, dtypes, backend)
    rows = table.lookup(key, dtypes, backend)
    want: frozenset[str] = frozenset()
    shape_filtered = False
    if not key.is_runtime and node.name != "fused.region":
        want = required_caps(node)
        rows = tuple(r for r in rows if want <= r.caps)
    elif rows:  # a fused.region, static catalog or runtime key: the row must fit its ranks and shapes
        fitting = tuple(r for r in rows if region_row_fits(r, node))
        shape_filtered = len(fitting) < len(rows)
        rows = fitting
    if rows:
        return ResolvedKernel(key, dtypes, backend, _best(rows))
    nearby = table.describe_nearby(key, backend)
    shapes = ", ".join("x".join("?" if d is None else str(d) for d in s) or "scalar" for s in _node_shapes(node))
    fits = (f" (the rows bound there do not fit the region's ranks or shapes [{shapes}])"
            if shape_filtered else "")
    if key.is_runtime:
        what = f" for these dtypes and shapes{fits}" if shape_filtered else ""
        fix = (f"adopt a kernel{what} with adopt_runtime_fused(name, region, kernel, dtypes, backend) "
               "(the JIT does this for regions in its work order), or run the region's arm 0")
    elif node.name == "fused.region":
        fix = (f"bind a kernel under {key!r} for these dtypes and shapes{fits} with "
               "bind_catalog_kernel (the JIT does this for catalog regions in its work order), "
               "or run the region's arm 0")
    else:
        rank, attrs = static_attrs(node)
        args = "".join(f", {k}={v!r}" for k, v in attrs.items())
        fix = (f"build it with fusebind.runtime.static_kernels.ensure_static_kernel({key.op!r}, "
               f"{tuple(d.value for d in dtypes)!r}, {rank}{args})")
    caps = f" with caps {{{', '.join(sorted(want))}}}" if want else ""
    raise KernelMiss(
        f"fusebind: no kernel for {label} under {key!r} with dtypes {_fmt(dtypes)}{caps} on backend "
        f"{backend!r}; {nearby}. Fix: {fix}", key, dtypes, backend)
