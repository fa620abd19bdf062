"""Row-wise emission: regions whose reductions run over trailing axes become
one loop over rows, with the whole prim chain applied to one row at a time.

Owns: `plan_rows` (decides whether a block is row-wise and tags every value)
and `emit_rows` (the `scf.for` nest over the leading dims, the row slices
of the inputs, the per-row chain through the ordinary `Emitter`, and the
in-place write of each result row into a subview of its output memref).
A row is read from memory once and written once (`prefetch_next_row` asks for
the next row's lines while this one computes: a 4 KiB row is one page, and the
hardware streamers stop at page ends); row-sized intermediates are
hoisted out of the loop and promoted to the stack by the pass pipeline
(`buffer-loop-hoisting`, `promote-buffers-to-stack`), never malloc'd per row.

An elementwise row that is reduced and used again (softmax's exp) is emitted
with its reduction in one pass (`map_reduce`; for float sums `accumulate.blocked_map_sum`:
each block computes, stores and sums its part of the row), and the
last use of such a stored row overwrites it (`elementwise_into`), so the row is
written straight into the output and scaled there in place. Elementwise values
used only by a float sum are inlined into it (`exprs.deferred_ops`).
Softmax 4096x1024: 1.77x -> 1.22-1.26x SOL, numpy/fusebind 3.4x -> 4.0x.

Tags: `row` = rank R with leading dims equal to the batch dims (sliced per
row, leading dims dropped); `rowscalar` = a reduction without keepdims (one
value per row: rank 0 in the loop); `bcast` = does not vary over rows (rank
<= R-L, or rank R with leading dims 1), used whole in every row.
Must not: import `mlir` or the driver `emit.py` (it imports this module); change what non-row
regions emit (they never come here).
Owns also: `prefetch_next_row`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from fusebind.lowering import accumulate, exprs
from fusebind.lowering.emit_dispatch import emit_op, narrowed
from fusebind.lowering.emitter import Emitter, compute_elem
from fusebind.lowering.linalg_types import (ELEMENT_BYTES, Dim, TensorSpec, Value, broadcast_dims, element_name, flag, ints, mtype, op_attr, op_kind,
                                            out_spec, storage, ttype)
from fusebind.lowering.scalar_text import TextScalarBuilder, is_float

ROW, ROWSCALAR, BCAST = "row", "rowscalar", "bcast"


@dataclass(frozen=True)
class RowPlan:
    """How a block runs row by row: `lead` leading dims are looped over."""

    rank: int
    lead: int
    batch: tuple[int | None, ...]
    tags: dict[Any, str]

    def slice_kinds(self, shape: Sequence[int | None]) -> tuple[str, ...]:
        """For a rank-R value: per leading dim, 'iv' (follows the loop) or 'zero' (size 1, broadcast)."""
        return tuple("zero" if (d == 1 and b != 1) else "iv" for d, b in zip(shape[: self.lead], self.batch))


def _shape(t: Any) -> tuple[int | None, ...]:
    return tuple(None if d < 0 else int(d) for d in t.get_shape())


def plan_rows(block: Any) -> RowPlan | str:
    """A `RowPlan` if `block` is row-wise, else a one-line reason why not."""
    terminator = block.last_op
    ops = [op for op in block.ops if op is not terminator]
    reductions = [op for op in ops if op_kind(op).startswith("reduce")]
    if not reductions:
        return "no reduction"
    first = _shape(reductions[0].operands[0].type)
    rank = len(first)
    lead = -1
    for op in reductions:
        shape = _shape(op.operands[0].type)
        axes_attr = op_attr(op, "axes")
        axes = sorted({a % len(shape) for a in ints(axes_attr)}) if shape else []
        if axes_attr is None:
            axes = list(range(len(shape)))
        if len(shape) != rank or not axes or axes != list(range(axes[0], rank)) or axes[0] < 1:
            return f"{op.name} does not reduce the trailing axes of a rank-{rank} value"
        if lead not in (-1, axes[0]):
            return "reductions over different numbers of trailing axes"
        lead = axes[0]
    batch = first[:lead]
    tags: dict[Any, str] = {}

    def full_tag(shape: tuple[int | None, ...]) -> str | None:
        if len(shape) <= rank - lead:
            return BCAST
        if len(shape) != rank:
            return None
        kinds = []
        for d, b in zip(shape[:lead], batch):
            if d == 1 and b != 1:
                kinds.append("zero")
            elif d is None or b is None or d == b:
                kinds.append("iv")
            else:
                return None
        return BCAST if all(k == "zero" for k in kinds) else ROW

    for arg in block.args:
        tag = full_tag(_shape(arg.type))
        if tag is None:
            return f"argument of shape {_shape(arg.type)} does not follow the rows {batch}"
        tags[arg] = tag
    if not any(t == ROW for t in tags.values()):
        return "no input varies over the rows"
    for op in ops:
        kind = op_kind(op)
        if len(op.results) != 1:
            return f"{op.name} has {len(op.results)} results"
        res = op.results[0]
        in_tags = [tags[o] for o in op.operands]
        if hasattr(op, "scalar_body"):
            if ROWSCALAR in in_tags:
                if any(t == ROW or (t == BCAST and len(_shape(o.type)) != 0) for t, o in zip(in_tags, op.operands)):
                    return f"{op.name} mixes a per-row scalar with a row-shaped value"
                tags[res] = ROWSCALAR
            elif ROW in in_tags:
                shape = _shape(res.type)
                if full_tag(shape) != ROW:
                    return f"{op.name} result {shape} does not follow the rows {batch}"
                tags[res] = ROW
            else:
                tags[res] = BCAST
        elif kind.startswith("reduce"):
            if in_tags[0] != ROW:
                return f"{op.name} reduces a value that does not vary over the rows"
            keep = op_attr(op, "keepdims")
            tags[res] = ROW if (keep is not None and flag(keep)) else ROWSCALAR
        elif kind == "constant":
            tag = full_tag(_shape(res.type))
            if tag is None:
                return f"constant of shape {_shape(res.type)} does not follow the rows {batch}"
            tags[res] = tag
        else:
            return f"{op.name} ({kind}) is not emitted row by row"
    for v in terminator.operands:
        if tags[v] == BCAST:
            return "a result does not vary over the rows"
    return RowPlan(rank, lead, tuple(batch), tags)


def subview_type(full: Sequence[Any], memref_shape: Sequence[int | None], lead: int, elem: str) -> str:
    """Type of the rank-reduced subview of one row (sizes `full`, leading `lead` dims of size 1)
    of an identity-layout memref of shape `memref_shape` (None = dynamic)."""
    strides: list[str] = []
    acc: int | None = 1
    for d in reversed(memref_shape[lead:]):
        strides.append("?" if acc is None else str(acc))
        acc = acc * d if (acc is not None and d is not None) else None
    strides.reverse()
    dims = "".join(f"{d if isinstance(d, int) else '?'}x" for d in full[lead:])
    return f"memref<{dims}{storage(elem)}, strided<[{', '.join(strides)}], offset: ?>>"


def slice_row(em: Any, value: Any, plan: RowPlan, ivs: list[str]) -> Any:
    """The row of a full-tensor `value` (a `linalg_types.Value`) at the loop indices: leading dims dropped."""
    shape = value.shape
    if len(shape) <= plan.rank - plan.lead:
        return value  # a broadcast value: used whole in every row
    kinds = plan.slice_kinds([d if isinstance(d, int) else None for d in shape])
    offsets = [iv if k == "iv" else "0" for k, iv in zip(kinds, ivs)] + ["0"] * (len(shape) - plan.lead)
    sizes = ["1"] * plan.lead + [str(d) for d in shape[plan.lead:]]
    name = em.fresh("row")
    inner = list(shape[plan.lead:])
    em.lines.append(f"{name} = tensor.extract_slice {value.name}[{', '.join(offsets)}] [{', '.join(sizes)}] "
                    f"[{', '.join(['1'] * len(shape))}] : {ttype(shape, value.elem)} to {ttype(inner, value.elem)}")
    return Value(name, inner, value.elem)


def open_loops(em: Any, plan: RowPlan, batch_dims: Sequence[Any]) -> list[str]:
    """`scf.for` over each leading dim (sizes: ints or SSA names); returns the induction variables."""
    ivs = []
    for size in batch_dims:
        iv = em.fresh("i")
        bound = em.index(size) if isinstance(size, int) else size
        em.lines.append(f"scf.for {iv} = {em.index(0)} to {bound} step {em.index(1)} {{")
        ivs.append(iv)
    return ivs


def out_row(em: Any, k: int, full_shape: Sequence[Any], memref_shape: Sequence[int | None], out_mtype: str,
            elem: str, ivs: list[str], lead: int) -> tuple[str, str, list[str]]:
    """A subview of `%out{k}` at the loop indices: (name, its type, the line defining it)."""
    name = em.fresh("ov")
    offsets = ivs[:lead] + ["0"] * (len(full_shape) - lead)
    sizes = ["1"] * lead + [str(d) for d in full_shape[lead:]]
    view_t = subview_type(full_shape, memref_shape, lead, elem)
    line = (f"{name} = memref.subview %out{k}[{', '.join(offsets)}] [{', '.join(sizes)}] "
            f"[{', '.join(['1'] * len(full_shape))}] : {out_mtype} to {view_t}")
    return name, view_t, [line]


CACHE_LINE = 64
# How far ahead to prefetch. Softmax 4096x1024 f32, interleaved mins (bench/RESULTS.md):
# quiet host: 1 row (4 KiB) ahead 1.37-1.41x SOL, 2 rows 1.42-1.46x, none 1.43-1.72x;
# with the other core busy: 1 row 1.71x, none 3.2x.
PREFETCH_AHEAD_BYTES = 4096


def prefetch_next_row(em: Any, plan: RowPlan, ivs: list[str], memref: str, mtype: str, elem: str,
                      shape: Sequence[Any]) -> list[str]:
    """Lines that prefetch (into L1) a row ahead of the current one of the identity-layout input `memref`.

    The row is the same slice `PREFETCH_AHEAD_BYTES` further along the innermost leading dim
    (at least one row, one when the row size is dynamic; clamped to the last row; earlier
    leading dims unchanged). One `memref.prefetch` per cache line, in an
    `scf.for` over the trailing dims. Empty when the input does not vary along that dim or its
    element size is unknown. `shape`: dims as ints or SSA index names.
    """
    kinds = plan.slice_kinds([d if isinstance(d, int) else None for d in shape])
    nbytes = ELEMENT_BYTES.get(elem)
    if nbytes is None or kinds[-1] != "iv" or len(shape) <= plan.lead:
        return []
    bound = shape[plan.lead - 1]
    if isinstance(bound, int) and bound <= 1:
        return []
    lines: list[str] = []
    nxt, last, clamped = em.fresh("pn"), em.fresh("pl"), em.fresh("pc")
    bound_name = em.index(bound) if isinstance(bound, int) else bound
    trailing = list(shape[plan.lead:])
    row_bytes = nbytes
    for d in trailing:
        row_bytes = row_bytes * d if isinstance(d, int) and row_bytes is not None else None
    ahead = 1 if row_bytes is None else max(1, -(-PREFETCH_AHEAD_BYTES // max(row_bytes, 1)))
    lines.append(f"{nxt} = arith.addi {ivs[-1]}, {em.index(ahead)} : index")
    lines.append(f"{last} = arith.subi {bound_name}, {em.index(1)} : index")
    lines.append(f"{clamped} = arith.minui {nxt}, {last} : index")
    lead_idx = [iv if k == "iv" else em.index(0) for k, iv in zip(kinds[:-1], ivs[:-1])] + [clamped]
    inner: list[str] = []
    for depth, d in enumerate(trailing):
        iv = em.fresh("pj")
        step = max(1, CACHE_LINE // nbytes) if depth == len(trailing) - 1 else 1
        size = em.index(d) if isinstance(d, int) else d
        lines.append(f"scf.for {iv} = {em.index(0)} to {size} step {em.index(step)} {{")
        inner.append(iv)
    lines.append(f"memref.prefetch {memref}[{', '.join(lead_idx + inner)}], read, locality<3>, data : {mtype}")
    lines.extend("}" for _ in trailing)
    return lines


@dataclass(frozen=True)
class _MulBy:
    """Stands in for an elementwise op whose scalar body is a multiply (see `_is_row_division`)."""

    name: str

    def scalar_body(self, b: TextScalarBuilder, x: str, y: str) -> str:
        return b.mul(x, y)


def _is_row_division(op: Any, args: list[Value]) -> bool:
    """A float `div` of a row by one value per row (every dim of the divisor's row is 1)."""
    if op_kind(op) != "div" or len(args) != 2 or not is_float(args[0].elem) or args[0].elem != args[1].elem:
        return False
    num, den = args
    return all(d == 1 for d in den.shape) and any(d != 1 for d in num.shape)


def _last_uses(block: Any) -> dict[Any, int]:
    """Each value's last use, as a position among the block's ops (the terminator counts)."""
    last: dict[Any, int] = {}
    for pos, op in enumerate(block.ops):
        for o in op.operands:
            last[o] = pos
    return last


def _map_reduce_pairs(block: Any, ops: list[Any], plan: Any) -> dict[Any, Any]:
    """Elementwise ops to emit in one loop with the reduction of their result (`map_reduce`):
    the result is a row, is reduced by its first user, and is used again later (else the
    op is inlined into the reduction and nothing is stored)."""
    pairs: dict[Any, Any] = {}
    for op in ops:
        if not op_kind(op).startswith("reduce"):
            continue
        src = op.operands[0]
        producer = getattr(src, "op", None)
        if producer is None or producer not in ops or not hasattr(producer, "scalar_body"):
            continue
        if plan.tags.get(src) != ROW or op_kind(producer) == "div" or element_name(src.type) == "i1":
            continue
        users = [u for u in block.ops if src in u.operands]  # the terminator too
        if len(users) > 1 and users[0] is op and len(op.results) == 1:
            pairs[producer] = op
    return pairs


def emit_rows(em: Emitter, block: Any, values: dict[Any, Value], plan: RowPlan,
              dynamic: bool, strided: bool = False) -> tuple[list[TensorSpec], list[str]]:
    """Row-wise form: a loop nest over the leading dims, the chain on one row.
    Returns the output specs and the lines after the loop (none: rows are written in the loop)."""
    terminator = block.last_op
    first_row = next(values[a] for a in block.args if plan.tags[a] == ROW)
    batch: list[Dim] = list(first_row.shape[: plan.lead])
    ivs = open_loops(em, plan, batch)
    if not strided:
        for i, a in enumerate(block.args):
            if plan.tags[a] == ROW:
                v = values[a]
                spec = TensorSpec(v.elem, tuple(d if isinstance(d, int) else None for d in v.shape))
                em.lines.extend(prefetch_next_row(em, plan, ivs, f"%in{i}", mtype(spec, False),
                                                     storage(v.elem), v.shape))
    views_at = len(em.lines)
    row_values: dict[Any, Value] = {}
    for a in block.args:
        row_values[a] = slice_row(em, values[a], plan, ivs)
    ops = [op for op in block.ops if op is not terminator]
    last_use = _last_uses(block)
    pairs = _map_reduce_pairs(block, ops, plan)  # elementwise op -> the reduction it is emitted with
    reduced_with: dict[Any, Any] = {r: e for e, r in pairs.items()}
    inlined = exprs.deferred_ops(block, ops, accumulate.is_blocked,
                                 {e for e, r in pairs.items() if accumulate.is_blocked(r)})
    stored: set[Any] = set()  # row values a map_reduce wrote (a buffer of their own)
    for pos, op in enumerate(ops):
        if op in pairs:
            continue  # emitted together with its reduction
        if op in inlined:  # emitted inside the float sum that uses it
            row_values[op.results[0]] = exprs.make_expr(op, [row_values[o] for o in op.operands])
            continue
        if op in reduced_with:
            e = reduced_with[op]
            e_args = [row_values[o] for o in e.operands]
            if accumulate.is_blocked(op):
                mapped, v = accumulate.blocked_map_sum(em, op, exprs.make_expr(e, e_args),
                                                       compute_elem(element_name(op.results[0].type)), plan.lead)
            else:
                mapped, v = em.map_reduce(e, e_args, compute_elem(element_name(e.results[0].type)), op,
                                          compute_elem(element_name(op.results[0].type)), plan.lead)
            row_values[e.results[0]] = mapped
            stored.add(e.results[0])
            row_values[op.results[0]] = v
            continue
        args = [row_values[o] for o in op.operands]
        out_elem = compute_elem(element_name(op.results[0].type))  # a narrow float row stays f32 until written
        # The last use of a stored row may overwrite it: softmax's exp row is scaled in
        # place, so the row is written to the output once, by the map_reduce pass.
        # Not a row with a size-1 dim: that generic reads its `outs`, and when a later op
        # broadcasts the result along that dim, linalg-fuse-elementwise-ops keeps the
        # overwritten row as an output of the fused loop, which then scales it once per
        # iteration of the broadcast dim (a wrong answer; pipeline.fusion_hazards).
        dest = next((k for k, o in enumerate(op.operands) if o in stored and last_use[o] == pos
                     and args[k].elem == out_elem != "i1" and hasattr(op, "scalar_body")
                     and 1 not in args[k].shape), None)
        if _is_row_division(op, args):
            # x / s with s one value per row: one division per row, then multiplies
            # (vdivps is ~10x a vmulps; x * (1/s) is within 2 ulp of x / s)
            elem = compute_elem(args[1].elem)  # a narrow row's sums are read widened: 1/s in f32
            recip = em._map_unary(args[1], lambda bb, v: bb.div(bb.constant(1.0, elem), v), elem)
            if dest == 0:
                v = em.elementwise_into(_MulBy(op.name), [args[0], recip], out_elem, 0)
            else:
                v = em.elementwise(_MulBy(op.name), [args[0], recip], out_elem)
        elif dest is not None and list(args[dest].shape) == broadcast_dims([a.shape for a in args], op.name):
            v = em.elementwise_into(op, args, out_elem, dest)
        else:
            v = emit_op(em, op, args, plan.lead)
        if op_kind(op) == "constant":
            v = slice_row(em, v, plan, ivs)
        row_values[op.results[0]] = v
    outputs: list[TensorSpec] = []
    views: list[str] = []
    writes: list[str] = []
    for k, r in enumerate(terminator.operands):
        v = narrowed(em, row_values[r], element_name(r.type))  # a narrow float leaves rounded once
        full: list[Dim] = batch + list(v.shape) if plan.tags[r] == ROW else list(batch)
        spec = out_spec(Value("", full, v.elem), dynamic)
        outputs.append(spec)
        name, view_t, view_lines = out_row(em, k, full, spec.shape, mtype(spec, False), storage(v.elem), ivs,
                                              plan.lead if plan.tags[r] == ROW else len(full))
        views.extend(view_lines)
        writes.append(f"bufferization.materialize_in_destination {v.name} in restrict writable {name} : "
                      f"({ttype(v.shape, v.elem)}, {view_t}) -> ()")
    # the views come first in the loop body, so eliminate-empty-tensors can write each row in place
    em.lines[views_at:views_at] = views
    em.lines.extend(writes)
    em.lines.extend("}" for _ in ivs)
    return outputs, []
