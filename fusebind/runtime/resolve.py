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

Which row runs (`choose_row`): among the rows that fit, the cheapest priced
row wins (lowest predicted ns; an unpriced row never wins over a priced
one); an exact tie in ns goes to the more trusted estimate (measured >
declared > composed), and a tie in both to the newest row (the last
registered: a kernel adopted after fusebind compiled one for the region
replaces it unless it is predicted slower). The choice is made again on
every table generation (plans are cached per generation), and the
`ResolvedKernel` says which row won and why every other row lost
(`describe`, shown by `explain`).

Must not: compile anything, or write the table (that is static_kernels.py and
the JIT); it only reads the snapshot it is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Sequence

from fusebind.dialect.errors import FusebindError, FusebindTypeError
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


def fmt_cost(cost: Cost) -> str:
    """`0.486 us (9e+03 flop, 8e+03 B, composed)` or `UNKNOWN_COST`."""
    if not cost.is_known:
        return "UNKNOWN_COST"
    return f"{cost.ns / 1000:.3g} us ({cost.flops:.3g} flop, {cost.bytes:.3g} B, {cost.trust})"  # type: ignore[union-attr]


@dataclass(frozen=True)
class ResolvedKernel:
    """The row a node resolved to: `index` is its position (registration
    order) among the `of` rows bound for (key, dtypes, backend); `why` says
    why it won, `losers` lists (index, row, why) for every other row."""

    key: BindingKey
    dtypes: tuple[DType, ...]
    backend: str
    row: BindingRow
    index: int = field(default=0, compare=False)
    of: int = field(default=1, compare=False)
    why: str = field(default="the only row bound", compare=False)
    losers: tuple[tuple[int, BindingRow, str], ...] = field(default=(), compare=False)

    @property
    def kernel(self) -> Kernel:
        return self.row.kernel

    @property
    def cost(self) -> Cost:
        return self.row.cost

    def describe(self, indent: str = "  ") -> list[str]:
        """Lines naming the kernel (key, dtypes, backend, source, row, cost and
        trust) and why each other row of its slot lost."""
        lines = [f"{indent}kernel: {self.key!r} {_fmt(self.dtypes)} on {self.backend!r}, row {self.index} of "
                 f"{self.of}: {self.row.source}, {fmt_cost(self.cost)} -- {self.why}{_shapes_note(self.row)}"]
        for i, row, why in self.losers:
            lines.append(f"{indent}  row {i} not used: {row.source}, {fmt_cost(row.cost)} -- {why}"
                         f"{_shapes_note(row)}")
        return lines


def _shapes_note(row: BindingRow) -> str:
    note = row_shapes(row)
    return f" [{note}]" if note else ""


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
        raise FusebindTypeError(f"compile_one: {node.name} is neither a prim op nor a fused.region")
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


def row_is_dynamic(row: BindingRow) -> bool:
    """Was the row's kernel compiled with dynamic dims (`CAP_SHAPE_DYNAMIC`, or a `?` in its
    shape cap): it serves more than one shape, so its cost is composed again per shape."""
    return CAP_SHAPE_DYNAMIC in row.caps or any(c.startswith(SHAPE_CAP_PREFIX) and "?" in c for c in row.caps)


def row_shapes(row: BindingRow) -> str:
    """How the row's kernel takes shapes, for `explain`: `static kernel for 8x64,64`, `dynamic
    kernel for ?x64,64`, `dynamic kernel for any shape`, or `` for a row that does not say."""
    if CAP_SHAPE_DYNAMIC in row.caps:
        return "dynamic kernel for any shape"
    for c in sorted(row.caps):
        if c.startswith(SHAPE_CAP_PREFIX):
            shapes = c[len(SHAPE_CAP_PREFIX):] or "scalar"
            return f"{'dynamic' if '?' in c else 'static'} kernel for {shapes}"
    return ""


def _rank(index: int, row: BindingRow, excluded: bool) -> tuple[Any, ...]:
    """Sort key of a fitting row (the greatest wins): not excluded, priced,
    cheapest, most trusted, newest."""
    c = row.cost
    if not c.is_known:
        return (not excluded, False, 0.0, -1, index)
    return (not excluded, True, -c.ns, c.trust_rank, index)  # type: ignore[union-attr]


def _lost_because(row: BindingRow, winner: BindingRow, excluded: bool) -> str:
    c, w = row.cost, winner.cost
    if excluded:
        return "failed verify in this function: not run again"
    if not c.is_known:
        return ("unpriced (UNKNOWN_COST): a priced row wins" if w.is_known
                else "unpriced like the winner, and older: a tie goes to the newest row")
    if cheaper(w, c):
        return f"costlier than the row chosen ({c.ns / 1000:.3g} us > {w.ns / 1000:.3g} us)"  # type: ignore[union-attr]
    if c.trust_rank < w.trust_rank:  # type: ignore[union-attr]
        return f"same predicted time, less trusted ({c.trust} < {w.trust})"  # type: ignore[union-attr]
    return "same predicted time and trust, older: a tie goes to the newest row"


def choose_row(rows: Sequence[BindingRow], excluded: Collection[int] = ()) -> tuple[int, str, list[tuple[int, str]]]:
    """The rule of the module docstring over fitting `rows` (registration
    order): (index of the winner, why it won, [(index, why it lost)]).
    `excluded`: kernel addresses to pass over (verify found them wrong),
    chosen only when nothing else fits."""
    ranks = [_rank(i, r, r.address in excluded) for i, r in enumerate(rows)]
    win = max(range(len(rows)), key=lambda i: ranks[i])
    winner = rows[win]
    losers = [(i, _lost_because(r, winner, r.address in excluded)) for i, r in enumerate(rows) if i != win]
    if len(rows) == 1:
        why = "the only row that fits"
    elif not winner.cost.is_known:
        why = "no row that fits is priced; the newest is taken"
    else:
        tied = any(rk[1:4] == ranks[win][1:4] for i, rk in enumerate(ranks) if i != win)
        why = "the cheapest priced row that fits" + (" (the newest of a tie)" if tied else "")
    if winner.address in excluded:
        why = "failed verify in this function, but nothing else fits"
    return win, why, losers


def compile_one(node: Any, table: BindingTable, backend: str, *, fused_id: int | None = None,
                exclude: Collection[tuple[BindingKey, int]] = ()) -> ResolvedKernel:
    """Resolve `node` (a prim op or a fused.region) to its kernel row in `table`
    (`choose_row` among the rows that fit).

    `fused_id` overrides the region's own id (an id the JIT adopted for it).
    `exclude`: (key, kernel address) pairs to pass over unless nothing else fits.
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
    bound = table.lookup(key, dtypes, backend)
    want: frozenset[str] = frozenset()
    if not key.is_runtime and node.name != "fused.region":
        want = required_caps(node)
        fit = [want <= r.caps for r in bound]
        misfit = f"lacks the caps this op needs {{{', '.join(sorted(want))}}}"
    else:  # a fused.region, static catalog or runtime key: the row must fit its ranks and shapes
        fit = [region_row_fits(r, node) for r in bound]
        misfit = "does not fit the region's ranks or shapes"
    shape_filtered = not all(fit) and not want  # a region row declined for its ranks or shapes
    fitting = [i for i, ok in enumerate(fit) if ok]
    if fitting:
        excluded = {address for k, address in exclude if k == key}
        win, why, lost = choose_row([bound[i] for i in fitting], excluded)
        losers = [(fitting[j], bound[fitting[j]], reason) for j, reason in lost]
        losers += [(i, bound[i], misfit) for i, ok in enumerate(fit) if not ok]
        return ResolvedKernel(key, dtypes, backend, bound[fitting[win]], fitting[win], len(bound), why,
                              tuple(sorted(losers, key=lambda t: t[0])))
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
