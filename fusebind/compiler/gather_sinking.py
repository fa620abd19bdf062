"""Gather sinking: a gather of an elementwise result becomes the elementwise op of gathered operands.

    take_along(f(a, m), idx, axis)  ->  f(take_along(a, idx, axis), m)      (m of size 1 on axis)

Why: a gather reads its operand `x` at computed positions (`tensor.extract`), so when `x` is
computed in the same region the kernel must first store all of `x` in a buffer, a whole-size
intermediate (cross-entropy's log-probabilities: N x C stored to read N of them). An
elementwise op is pointwise, so gathering its operands first gives the same values, exactly, and
computes only the picked elements. Applied to a fixpoint, the gather reaches the region's inputs,
where it is an index map of an argument.

What is rewritten (`prim.take_along`, and `prim.gather` with one-dimensional indices, the
rank-preserving forms): the gather's `x` is produced by an elementwise op (`ElementwiseOp`) in a
function body (not inside a `fused.region`: a region is a recipe). Each operand is aligned to x's
rank (a reshape adds leading 1s); one with size 1 on the gathered axis is left as is (it
broadcasts against the gathered result), one of full size is gathered with the same indices and
properties (`in_bounds`, `error_axis`). At least one operand must be gathered: otherwise no
gather would remain to check the indices. When the elementwise result has other users it stays
for them and is cloned for the gather, which pays when the gather picks at most as many
elements as the op computes; a gather that picks more (a repeat) sinks only through a
single-use op. The rewritten op's shape must be the gather's (checked; otherwise nothing is
rewritten).

Must not: change a value (only pointwise ops are crossed) or drop an index check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from fusebind.compiler.passes import register_pass
from fusebind.dialect.prim import ElementwiseOp, ReshapeOp
from fusebind.dialect.prim_gather import GatherOp, IndexedOp
from fusebind.dialect.types import elem_of, is_static, shape_of, tensor_type


def _count(shape: tuple) -> int:
    return math.prod(shape)


class SinkGather(RewritePattern):
    """One gather one elementwise op down (see the module docstring)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: IndexedOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.parent_op(), func.FuncOp):
            return
        producer = op.x.owner
        if not isinstance(producer, ElementwiseOp) or len(producer.results) != 1:
            return
        idx_shape = shape_of(op.idx.type)
        if isinstance(op, GatherOp) and len(idx_shape) != 1:
            return
        x_shape, out_shape = shape_of(op.x.type), shape_of(op.results[0].type)
        if not (is_static(x_shape) and is_static(out_shape)):
            return
        if len(list(producer.results[0].uses)) > 1 and _count(out_shape) > _count(x_shape):
            return  # a clone would compute more elements than the original op
        axis, rank = op.axis_value(), len(x_shape)
        new_ops: list[Operation] = []
        operands: list[SSAValue] = []
        gathered = False
        made: dict[SSAValue, SSAValue] = {}  # x * x gathers x once
        for v in producer.operands:
            if v in made:
                operands.append(made[v])
                continue
            original = v
            shape = shape_of(v.type)
            if not is_static(shape):
                return
            if len(shape) < rank:
                shape = (1,) * (rank - len(shape)) + tuple(shape)
                r = ReshapeOp(v, shape)
                new_ops.append(r)
                v = r.results[0]
            if shape[axis] == 1:
                operands.append(v)
                made[original] = v
                continue
            g = type(op).create(operands=[v, op.idx], properties=dict(op.properties),
                                result_types=[tensor_type(type(op).infer_shape(tuple(shape), tuple(idx_shape),
                                                                               **op.shape_props()),
                                                          elem_of(v.type))])
            new_ops.append(g)
            operands.append(g.results[0])
            made[original] = g.results[0]
            gathered = True
        if not gathered:
            return
        try:
            shape = type(producer).infer_shape(*(shape_of(v.type) for v in operands), **producer.shape_props())
        except Exception:  # noqa: BLE001 - an operand combination this op does not take: leave it
            return
        if tuple(shape) != tuple(out_shape):
            return
        new = type(producer).create(operands=operands, properties=dict(producer.properties),
                                    attributes=dict(producer.attributes), result_types=[op.results[0].type])
        new_ops.append(new)
        rewriter.replace(op, new_ops, [new.results[0]])
        if not producer.results[0].uses:
            rewriter.erase(producer)


def sink_gathers(module: ModuleOp) -> None:
    """Apply `SinkGather` to a fixpoint in every function of `module`, in place."""
    PatternRewriteWalker(SinkGather(), apply_recursively=True).rewrite_module(module)


@register_pass
@dataclass(frozen=True)
class SinkGathersPass(ModulePass):
    """A gather of an elementwise result -> the op of gathered operands (`fusebind.compiler.gather_sinking`)."""

    name = "sink-gathers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        sink_gathers(op)
