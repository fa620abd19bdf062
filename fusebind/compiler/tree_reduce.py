"""A fixed reduction tree for reductions over the leading axis, so they can run on the pool.

The thread split (`splitting.region_is_splittable`) cuts a region along axis 0, so it refuses a
reduction whose axes include axis 0: `x.sum()`, `x.sum(0)`, `x.mean()`, `x.max(0)`, ... ran on
one thread. This rewrite, in the spirit of XLA's tree-reduction rewrite, gives such a reduction a
tree whose shape depends on the array's shape alone, never on the threads:

    r = reduce(f(x, ...), axes A ∋ 0)            x: (N, d1, ..., dk), elements per row w = d1·…·dk
    ->  R rows a chunk (the chunk constants below), C = N // R chunks, M = C·R, T = N - M
        inner = reduce(f(x[:M].reshape(C, R, d...)), axes {1} ∪ (A \\ {0}) + 1, keepdims)  # (C, 1, ...)
        parts = inner.reshape(P)                  # (C, kept dims): a view, and a fusion boundary
        tail  = reduce(f(x[M:].reshape(1, T, d...)), {0} ∪ A + 1)                         # if T > 0
        r     = reduce(parts, axis 0) ⊕ tail      # ⊕: + · max min

- The inner stage keeps the new leading axis (chunks), so it is a row-wise region: splittable
  along axis 0 and run in chunks on the native pool, each chunk of rows reduced whole by the
  ordinary blocked accumulation (lowering/accumulate.py). The reshape after it is a shape-only op
  that fusion does not cross, so the inner region never merges with the outer one. The tail is
  reshaped too, so its slice is a view of its own, read by a vector loop (a slice inside a region
  is an index map: scalar loads, measured 7% of a 1e7 sum for a 4e4 tail).
- The outer stage reduces C partials (at most N / R, a few hundred) and the ragged tail (fewer
  than R rows, a view x[M:]: no copy of x, no padding) on one thread, and still fuses with the
  result's consumers (`x - x.mean(0, keepdims=True)`).
- Which chunk a value falls in and the order partials combine are fixed by the shape, and the
  1-thread call runs the same tree, so a result is bitwise the same at any thread count.
- Elementwise producers whose results are used only on the way to the reduction are rebuilt
  over the reshaped (and the tail's) operands, so `(x * x).sum()` still reads x once per stage.
  An operand of the full rank is sliced/reshaped on axis 0 (size N) or given a leading 1 (size
  1); a lower-rank operand broadcasts from the right and is kept.

Chunk constants (rows a chunk R, from the shape and the IR only): every axis reduced, R·w ~
TREE_CHUNK_ELEMS = 2^16 elements (256 KiB of f32: a chunk's rows stay in L2 and a 1e7 sum has ~150
chunks to balance two or more threads), or TREE_ROW_ELEMS = 2^10 when the inner stage is a fused row
kernel (`(x * x).sum()`); columns kept, R = max(TREE_COLUMN_ROWS = 512, 2^16 // w). Each is measured
(see the constants; bench/bench_tree_reduce.py). R then grows to the first of R..2R-1 that
divides N, so most shapes (1e7 = 128 · 78125) have no tail at all. Reductions
of fewer than TREE_MIN_ELEMS = 2^18 elements are left alone: the tree pays only with a split
(runtime SPLIT_THRESHOLD is 2^16), and small sums keep exactly the code they had.

Accuracy (docs/REDUCTIONS.md): each f32/f64 partial is a blocked sum of at most 2^16 values, rounded
once; f32 partials are combined in f64 (cast, sum, + tail, then /n for a mean, rounded once to f32),
so the bound 2·log2(n)·eps·Σ|x| keeps its slack. Integer sums and products wrap, which is
associative, so they equal numpy's exactly; max/min propagate NaN in both stages (np.maximum).

Rewritten: `prim.reduce_{sum,mean,max,min,prod}` in a function body (not inside a `fused.region`:
a region is a recipe) over a static f32, f64 or integer operand of at least TREE_MIN_ELEMS
elements whose axes include 0, when C >= 2 and the inner stage reduces something (R >= 2 or
another reduced axis). Narrow floats (f16, bf16) and bool are left on one thread.
Not rewritten: arg-reductions (argmax needs the chunk maxima and a gather of the local index).

Must not: change a value beyond the reassociation above, or depend on anything but the IR.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusebind.compiler.passes import register_pass
from fusebind.dialect.prim import (AddOp, CastOp, ConstantOp, DivOp, ElementwiseOp, MaxOp, MinOp, MulOp,
                                   ReduceMaxOp, ReduceMeanOp, ReduceMinOp, ReduceProdOp, ReduceSumOp,
                                   ReshapeOp, SliceOp)
from fusebind.dialect.errors import FusebindError
from fusebind.dialect.types import INT_TYPES, elem_of, is_static, numpy_dtype, shape_of, tensor_type

#: Elements of one leaf chunk (rows of the leading axis per chunk: this // elements per row).
TREE_CHUNK_ELEMS = 1 << 16
#: ... except where the inner stage is a fused row kernel (an elementwise producer, every trailing
#: axis reduced): its rows are kept at this length, the row length lowering/rowwise.py is tuned for
#: (it prefetches the next row whole; rows of 2^16 f32 measured 1.39x slower, of 2^10 1.05x).
TREE_ROW_ELEMS = 1 << 10
#: ... and where it sums down columns, at least this many rows: the chain-mode block grows from 16
#: to 32 rows at 512 (lowering/accumulate.py), and 64-row chunks of 4096x1024 column sums measured
#: 1.26x the one-pass time, 512-row ones 1.02x.
TREE_COLUMN_ROWS = 512
#: Reductions of fewer elements keep their one-pass kernel.
TREE_MIN_ELEMS = 1 << 18

#: reduction -> (the reduction of each stage, how the tail's result joins the chunks')
_STAGES: dict[type, tuple[type, type]] = {
    ReduceSumOp: (ReduceSumOp, AddOp),
    ReduceMeanOp: (ReduceSumOp, AddOp),
    ReduceMaxOp: (ReduceMaxOp, MaxOp),
    ReduceMinOp: (ReduceMinOp, MinOp),
    ReduceProdOp: (ReduceProdOp, MulOp),
}
_ELEMS = frozenset({"f32", "f64"}) | INT_TYPES


@dataclass(frozen=True)
class TreeShape:
    """The fixed tree of one reduction: R rows a chunk, C chunks, M = C*R rows in chunks, T in the tail."""

    rows: int
    chunks: int

    @property
    def main(self) -> int:
        return self.rows * self.chunks


def tree_shape(shape: tuple[int, ...], axes: tuple[int, ...], fused_rows: bool = False) -> TreeShape | None:
    """The tree for reducing `axes` of a static `shape`, or None when the reduction keeps one pass.
    `fused_rows`: the reduction has an elementwise producer to fuse with, so an inner stage that
    reduces every trailing axis is a fused row kernel (chunks of TREE_ROW_ELEMS)."""
    if not shape or 0 not in axes or math.prod(shape) < TREE_MIN_ELEMS:
        return None
    width = math.prod(shape[1:])
    if set(axes) == set(range(len(shape))):  # every axis: the inner stage reduces whole rows
        rows = max(1, (TREE_ROW_ELEMS if fused_rows else TREE_CHUNK_ELEMS) // width)
    else:  # columns kept: the inner stage sums down the chunk's rows (chain mode)
        rows = max(TREE_COLUMN_ROWS, TREE_CHUNK_ELEMS // width)
    rows = _dividing(shape[0], rows)
    chunks = shape[0] // rows
    if chunks < 2 or (rows == 1 and len(axes) == 1):
        return None  # one chunk, or an inner stage that reduces nothing
    return TreeShape(rows, chunks)


def _dividing(n: int, rows: int) -> int:
    """The smallest chunk of `rows` to 2·`rows` rows that divides `n` (no tail: a tail costs two
    shape steps, ~0.1-0.3 ms a call measured on a 1e7 sum), else `rows` (a ragged tail)."""
    if n % rows == 0:
        return rows
    return next((r for r in range(rows + 1, min(2 * rows, n // 2 + 1)) if n % r == 0), rows)


class _Builder:
    """New ops in order; `abandon` drops them (and their uses of existing values)."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def add(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def abandon(self) -> None:
        for op in reversed(self.ops):
            op.erase(safe_erase=False)
        self.ops.clear()


class _Abort(FusebindError):
    """This reduction keeps its one-pass form (an operand the tree cannot reshape). Internal: the
    pass catches it; a FusebindError like every exception class of fusebind's."""


def _clonable(value: SSAValue, full: tuple[int, ...], block: Any) -> bool:
    """An elementwise result of the full shape in this block, read by one op only: rebuilt per part."""
    owner = value.owner
    return (isinstance(owner, ElementwiseOp) and owner.parent_block() is block and len(owner.results) == 1
            and tuple(shape_of(value.type)) == full and len({u.operation for u in value.uses}) == 1)


def _clone_cone(value: SSAValue, full: tuple[int, ...], block: Any, part: Any, b: _Builder,
                memo: dict[SSAValue, SSAValue]) -> SSAValue:
    """`value` rebuilt for one part of the tree (`part` maps a leaf): an elementwise producer of the
    full shape, used only here, is cloned over its rebuilt operands; anything else is a leaf."""
    if value in memo:
        return memo[value]
    owner = value.owner
    if _clonable(value, full, block):
        operands = [_clone_cone(v, full, block, part, b, memo) for v in owner.operands]
        try:
            shape = type(owner).infer_shape(*(shape_of(v.type) for v in operands), **owner.shape_props())
        except Exception as err:  # noqa: BLE001 - an operand combination this op does not take
            raise _Abort from err
        new = b.add(type(owner).create(operands=operands, properties=dict(owner.properties),
                                       attributes=dict(owner.attributes),
                                       result_types=[tensor_type(tuple(shape), elem_of(value.type))]))
    else:
        new = part(value)
    memo[value] = new
    return new


def _leaf_mapper(full: tuple[int, ...], tree: TreeShape, b: _Builder, tail: bool):
    """How a leaf enters the chunks (`tail=False`: x[:M] as (C, R, ...)) or the tail (x[M:])."""
    n, rank = full[0], len(full)

    def part(v: SSAValue) -> SSAValue:
        s = tuple(shape_of(v.type))
        if not is_static(s):
            raise _Abort
        if len(s) < rank:
            return v  # broadcasts from the right: never meets axis 0
        if len(s) > rank or s[0] not in (1, n):
            raise _Abort
        if s[0] == 1:
            return b.add(ReshapeOp(v, (1, 1, *s[1:])))
        lo, hi = (tree.main, n) if tail else (0, tree.main)
        if (lo, hi) != (0, n):
            v = b.add(SliceOp(v, [lo] + [0] * (rank - 1), [hi, *s[1:]], [1] * rank))
        return b.add(ReshapeOp(v, (1, n - tree.main, *s[1:]) if tail else (tree.chunks, tree.rows, *s[1:])))

    return part


def _rewrite(op: Any) -> bool:
    """Replace one reduction by its tree (module docstring); False when it keeps one pass."""
    x = op.x
    full = tuple(shape_of(x.type))
    elem = elem_of(x.type)
    if elem not in _ELEMS or not is_static(full):
        return False
    axes, keep = tuple(op.axes_list()), op.keepdims is not None
    block = op.parent_block()
    tree = tree_shape(full, axes, fused_rows=_clonable(x, full, block))
    if tree is None:
        return False
    stage, join = _STAGES[type(op)]
    b = _Builder()
    try:
        main = _clone_cone(x, full, block, _leaf_mapper(full, tree, b, False), b, {})
        if tuple(shape_of(main.type)) != (tree.chunks, tree.rows, *full[1:]):
            raise _Abort
        rest = [a for a in axes if a != 0]
        inner = b.add(stage(main, [1] + [a + 1 for a in rest], keepdims=True))
        kept = tuple((1,) if a in axes else (full[a],) for a in range(1, len(full))) if keep else \
            tuple((full[a],) for a in range(1, len(full)) if a not in axes)
        parts = b.add(ReshapeOp(inner, (tree.chunks, *(d for (d,) in kept))))
        wide = elem == "f32" and stage is ReduceSumOp
        if wide:
            parts = b.add(CastOp(parts, "f64"))
        total = b.add(stage(parts, [0], keepdims=keep))
        if tree.main < full[0]:
            t = _clone_cone(x, full, block, _leaf_mapper(full, tree, b, True), b, {})
            if tuple(shape_of(t.type)) != (1, full[0] - tree.main, *full[1:]):
                raise _Abort
            t = b.add(stage(t, [0] + [a + 1 for a in axes]))
            if keep:
                t = b.add(ReshapeOp(t, tuple(shape_of(op.results[0].type))))
            if wide:
                t = b.add(CastOp(t, "f64"))
            total = b.add(join(total, t))
        if isinstance(op, ReduceMeanOp):
            count = math.prod(full[a] for a in axes)
            total = b.add(DivOp(total, b.add(ConstantOp.from_array(np.array(count, numpy_dtype(elem_of(total.type)))))))
        if wide:
            total = b.add(CastOp(total, "f32"))
        if total.type != op.results[0].type:
            raise _Abort
    except _Abort:
        b.abandon()
        return False
    Rewriter.insert_op(b.ops, InsertPoint.before(op))
    op.results[0].replace_all_uses_with(total)
    _erase_dead(op)
    return True


def _erase_dead(op: Operation) -> None:
    """Erase `op` and then its producers left without users (the cone the tree rebuilt)."""
    work = [op]
    while work:
        o = work.pop()
        if any(r.uses for r in o.results) or o.parent_block() is None:
            continue
        producers = [v.owner for v in o.operands if isinstance(v.owner, ElementwiseOp | ConstantOp)]
        Rewriter.erase_op(o)
        work.extend(producers)


def tree_reduce(module: ModuleOp) -> int:
    """Give every qualifying reduction of every function its fixed tree, in place; how many."""
    targets = [op for op in module.walk() if type(op) in _STAGES and isinstance(op.parent_op(), func.FuncOp)]
    return sum(_rewrite(op) for op in targets)


@register_pass
@dataclass(frozen=True)
class TreeReducePass(ModulePass):
    """Reductions over axis 0 -> a fixed tree of chunk reductions (`fusebind.compiler.tree_reduce`)."""

    name = "tree-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        tree_reduce(op)
