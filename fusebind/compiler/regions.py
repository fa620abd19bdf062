"""Building `fused.region` ops from sets of ops, and splicing them into a block.

This module owns the IR side of fusion: `build_region` (a detached region
computing some ops of a block; small constants are cloned in), the helpers
that keep built-but-unused regions harmless (`discard_region`) or copy one
out for the work order (`detached_recipe`), and `splice_regions`, which
replaces each accepted op set by its region and restores a topological
order. It must not decide what to fuse or price anything.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from fusebind.dialect.errors import FusebindInternalError
from fusebind.compiler.graph import DataflowGraph
from fusebind.dialect.fused import RegionOp, YieldOp
from fusebind.dialect.prim import ConstantOp
from fusebind.dialect.types import elem_of, shape_of

#: Constants with at most this many elements are cloned into a region rather
#: than passed in (scalars of GELU, epsilons): the recipe then holds its math.
MAX_INLINED_CONSTANT_ELEMENTS = 64


def inlined_constant(op: Operation | None) -> bool:
    """Is `op` a constant `build_region` clones into a region rather than passing in?"""
    if not isinstance(op, ConstantOp):
        return False
    shape = shape_of(op.results[0].type)
    return all(d is not None for d in shape) and math.prod(shape) <= MAX_INLINED_CONSTANT_ELEMENTS  # type: ignore[misc]


def build_region(graph: DataflowGraph, ops: tuple[Operation, ...], name: str, fused_id: int = 0) -> RegionOp:
    """A `fused.region` computing `ops` (not inserted anywhere; its operands
    are the outside values the ops read, its results the values used outside).
    Small constants are cloned in rather than passed as operands."""
    inside = set(ops)
    constants: list[Operation] = []
    inputs: list[SSAValue] = []
    for v in graph.external_inputs(ops, inside):
        if isinstance(v.owner, Operation) and inlined_constant(v.owner):
            constants.append(v.owner)
        else:
            inputs.append(v)
    outputs = graph.escaping_results(ops, inside)
    block = Block(arg_types=[v.type for v in inputs])
    mapper: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args))
    for arg, v in zip(block.args, inputs):
        arg.name_hint = v.name_hint
    for op in (*constants, *ops):
        block.add_op(op.clone(value_mapper=mapper))
    block.add_op(YieldOp(*[mapper[v] for v in outputs]))
    return RegionOp(inputs, [v.type for v in outputs], Region(block), name=name, fused_id=fused_id)


def discard_region(region: RegionOp) -> None:
    """Drop a built region nobody will insert: it must not keep uses of the
    block's values (they would look like outside users to later checks)."""
    region.drop_all_references()


def region_dtypes(region: RegionOp) -> tuple[str, ...]:
    """Element types of the region's operands, then its results."""
    return tuple(elem_of(v.type) for v in (*region.operands, *region.results))


def detached_recipe(region: RegionOp, fused_id: int) -> RegionOp:
    """A copy of `region` under `fused_id` that uses no value of the block
    (its operands are arguments of a holder block): a work-order recipe."""
    holder = Block(arg_types=[v.type for v in region.operands])
    clone = region.clone(value_mapper=dict(zip(region.operands, holder.args)))
    holder.add_op(clone)
    clone.properties["fused_id"] = IntegerAttr(fused_id, i64)
    return clone


def splice_regions(block: Block, regions: Sequence[tuple[RegionOp, tuple[Operation, ...], list[SSAValue]]]) -> None:
    """Replace each `(region, ops, outputs)` in `block`: the region goes where
    its first op was, the uses of `outputs` outside `ops` read the region's
    results, the ops (and the inlined constants nobody reads any more) are
    erased, and the block is put back in topological order."""
    if not regions:
        return
    for region, ops, outputs in regions:
        block.insert_op_before(region, ops[0])
        for old, new in zip(outputs, region.results):
            old.replace_uses_with_if(new, lambda use, inside=set(ops): use.operation not in inside)
    constants: dict[Operation, None] = {}
    for _, ops, _ in regions:
        for op in ops:
            for v in op.operands:
                if inlined_constant(v.owner if isinstance(v.owner, Operation) else None):
                    constants[v.owner] = None  # type: ignore[index]
        for op in reversed(ops):
            block.erase_op(op, safe_erase=False)
    for const in constants:  # cloned into the regions; drop the copies nobody reads now
        if not any(r.uses for r in const.results):
            block.erase_op(const)
    _topological_reorder(block)


def _topological_reorder(block: Block) -> None:
    """Stable topological order of `block` (current order breaks ties): a
    region is inserted where its first op was, but its inputs may be defined
    by ops that were between its ops."""
    ops = list(block.ops)
    pos = {op: i for i, op in enumerate(ops)}
    indeg = [0] * len(ops)
    users: list[list[int]] = [[] for _ in ops]
    for i, op in enumerate(ops):
        prods = {pos[v.owner] for v in op.operands if isinstance(v.owner, Operation) and v.owner in pos}
        for p in prods:
            users[p].append(i)
        indeg[i] = len(prods)
    heap = [i for i in range(len(ops)) if indeg[i] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, u)
    if len(order) != len(ops):  # pragma: no cover - convexity of each region prevents it
        raise FusebindInternalError("optimize_graph: fused regions form a cycle; this is a bug in the convexity check")
    if order == list(range(len(ops))):
        return
    for op in ops:
        op.detach()
    for i in order:
        block.add_op(ops[i])
