"""Which axes of a traced prim function are the same axis, and how each reduction maps onto chunks.

Owns `analyze(func) -> Analysis`. Every dim of every value that is not 1 gets an *axis class*: a
union-find id shared by every dim that must be chunked alike (the operands of an elementwise op at
one broadcast position, a matmul's contraction dims, a transpose's permuted dims, a reshape that
only adds or drops 1s). A dim of size 1 has no class (`None`): it is one chunk of 1 everywhere.
From the classes, fusebind.dask.graph knows, per value, which dask index each of its dims
carries, so one fused kernel per chunk sees consistent block shapes.

It also classifies each reduction (`reduction_kind`):
- `rowwise`: its result flows back into a value that still has a reduced axis (softmax,
  normalisation): the reduced axes must be whole in every chunk, so they are rechunked to one
  chunk if the input splits them;
- otherwise a reduction over a chunked axis runs as a tree (a fused partial per chunk, then
  `dask.array.reduction`), and over whole axes inside the chunk's kernel.

Must not: build dask graphs or compile anything. An op it cannot map is an `UnsupportedOperation`
naming the op and what to do instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fusebind.api.errors import UnsupportedOperation

#: reductions that have a tree form along a chunked axis (argmax/argmin do not: they need indices)
TREE_REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod")

_WHAT_TO_DO = ("compute that step with dask.array before calling, or call fb.jit on a numpy array, or map an fb.jit "
               "function over the blocks with dask.array.map_blocks")


def unsupported(op: Any, why: str) -> UnsupportedOperation:
    return UnsupportedOperation(f"fusebind.dask.jit: {op.name} {why}; {_WHAT_TO_DO}")


class AxisClasses:
    """Union-find over logical axes; each class has one size."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.size: list[int] = []

    def new(self, size: int) -> int:
        self.parent.append(len(self.parent))
        self.size.append(int(size))
        return len(self.parent) - 1

    def find(self, c: int) -> int:
        while self.parent[c] != c:
            self.parent[c] = self.parent[self.parent[c]]
            c = self.parent[c]
        return c

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)  # the older class (an argument's) names the union
        return min(a, b)


@dataclass
class Analysis:
    """Axis classes of every value of one function (`axes[value]`: a class or None per dim)."""

    func: Any
    classes: AxisClasses
    axes: dict[Any, tuple[int | None, ...]] = field(default_factory=dict)
    ops: list[Any] = field(default_factory=list)
    order: dict[Any, int] = field(default_factory=dict)  # op -> its index in the body
    users: dict[Any, list[Any]] = field(default_factory=dict)  # value -> the ops that read it
    #: classes an op needs in one chunk (a reshape that merges or splits axes), with the op
    pinned: dict[int, Any] = field(default_factory=dict)

    def cls(self, value: Any) -> tuple[int | None, ...]:
        """The value's axis classes, resolved (None for a dim of 1)."""
        return tuple(None if c is None else self.classes.find(c) for c in self.axes[value])

    def reduced_classes(self, op: Any) -> set[int]:
        """The classes a reduction reduces over (dims of 1 have none)."""
        operand = self.cls(op.operands[0])
        return {operand[a] for a in op.axes_list() if operand[a] is not None}

    def rowwise(self, op: Any) -> bool:
        """Does the reduction's result flow into a value that still has one of its reduced axes
        (the reduced value broadcast back, as in x - x.max(axis=1, keepdims=True))? Then it needs
        whole rows in each chunk."""
        reduced = self.reduced_classes(op)
        if not reduced:
            return False
        seen: set[Any] = set()
        todo = [op.results[0]]
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            if reduced & {c for c in self.cls(v) if c is not None}:
                return True
            for user in self.users.get(v, ()):
                todo.extend(user.results)
        return False


def _shape(value: Any) -> tuple[int, ...]:
    from fusebind.dialect.types import shape_of

    return tuple(int(d) for d in shape_of(value.type))


def _aligned(a: Analysis, out_rank: int, operands: list[Any]) -> list[int | None]:
    """Broadcast (right-aligned) classes of `operands` over `out_rank` dims, unioned per dim."""
    result: list[int | None] = [None] * out_rank
    for v in operands:
        shape, classes = _shape(v), a.axes[v]
        for j, (d, c) in enumerate(zip(shape, classes)):
            i = out_rank - len(shape) + j
            if d == 1 or c is None:
                continue
            result[i] = c if result[i] is None else a.classes.union(result[i], c)
    return result


def _fresh(a: Analysis, shape: tuple[int, ...]) -> tuple[int | None, ...]:
    return tuple(None if d == 1 else a.classes.new(d) for d in shape)


def _visit(a: Analysis, op: Any) -> tuple[int | None, ...]:
    """The classes of `op`'s one result."""
    from fusebind.dialect.prim import (BroadcastToOp, ConstantOp, ElementwiseOp, MatmulOp, ReductionOp, ReshapeOp,
                                       TransposeOp)

    out_shape = _shape(op.results[0])
    if isinstance(op, ConstantOp):
        return _fresh(a, out_shape)
    if isinstance(op, ElementwiseOp):
        got = _aligned(a, len(out_shape), list(op.operands))
        return tuple(None if d == 1 else (c if c is not None else a.classes.new(d)) for d, c in zip(out_shape, got))
    if isinstance(op, ReductionOp):
        classes = a.axes[op.operands[0]]
        axes = set(op.axes_list())
        if op.keepdims is not None:
            return tuple(None if i in axes else c for i, c in enumerate(classes))
        return tuple(c for i, c in enumerate(classes) if i not in axes)
    if isinstance(op, TransposeOp):
        classes = a.axes[op.operands[0]]
        return tuple(classes[p] for p in op.perm_list())
    if isinstance(op, BroadcastToOp):
        got = _aligned(a, len(out_shape), [op.operands[0]])
        return tuple(None if d == 1 else (c if c is not None else a.classes.new(d)) for d, c in zip(out_shape, got))
    if isinstance(op, ReshapeOp):
        src = op.operands[0]
        kept = [(d, c) for d, c in zip(_shape(src), a.axes[src]) if d != 1]
        if [d for d, _ in kept] == [d for d in out_shape if d != 1]:  # only 1s added or dropped
            it = iter(c for _, c in kept)
            return tuple(None if d == 1 else next(it) for d in out_shape)
        out = _fresh(a, out_shape)  # merges or splits axes: every axis it touches must be one chunk
        for c in [c for _, c in kept] + [c for c in out if c is not None]:
            if c is not None:
                a.pinned[c] = op
        return out
    if isinstance(op, MatmulOp):
        lhs, rhs = op.operands
        la, ra = a.axes[lhs], a.axes[rhs]
        ls, rs = _shape(lhs), _shape(rhs)
        batch_rank = len(out_shape) - 2
        batch: list[int | None] = [None] * batch_rank
        for shape, classes in ((ls[:-2], la[:-2]), (rs[:-2], ra[:-2])):
            for j, (d, c) in enumerate(zip(shape, classes)):
                i = batch_rank - len(shape) + j
                if d != 1 and c is not None:
                    batch[i] = c if batch[i] is None else a.classes.union(batch[i], c)
        if la[-1] is not None and ra[-2] is not None:
            a.classes.union(la[-1], ra[-2])  # the contraction: one chunking of k on both sides
        return (*batch, la[-2], ra[-1])
    raise unsupported(op, "is not mapped onto dask chunks (fusebind.dask maps elementwise ops, broadcasts, "
                          "transposes, reshapes that add or drop 1s, reductions and matmul)")


def analyze(func: Any) -> Analysis:
    """The axis classes of `func` (a func.func of prim ops with static shapes)."""
    from fusebind.dialect.prim import PrimOp

    a = Analysis(func, AxisClasses())
    block = func.body.blocks[0]
    for arg in block.args:
        a.axes[arg] = _fresh(a, _shape(arg))
    for i, op in enumerate(block.ops):
        a.order[op] = i
        for v in op.operands:
            a.users.setdefault(v, []).append(op)
        if op.name == "func.return":
            a.ops.append(op)
            continue
        if not isinstance(op, PrimOp) or len(op.results) != 1:
            raise unsupported(op, "is not a prim op with one result")
        a.axes[op.results[0]] = _visit(a, op)
        a.ops.append(op)
    return a
