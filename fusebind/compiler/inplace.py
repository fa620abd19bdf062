"""The in-place epilogue marker of a `fused.region`.

This module owns one fact about a region: *result r may be written into the
buffer of operand k*. The optimizer stamps it (`mark_inplace`) on an
epilogue region whose operand is the result of a `prim.matmul` that nothing
else reads, or (under `THROUGH_RESHAPE`, on: why there) a row-major
`prim.reshape` of such a result (conv's (F, P) -> (N, F, *out): a view of
the same buffer, `matmul_buffer_of`) that nothing else reads; the executor reads it (`inplace_of`) and may then pass the same
buffer as that input and that output, so "BLAS does the matmul, the epilogue
runs in place" (PERFORMANCE.md) costs no extra output buffer or traffic.

The marker is the discardable attribute `fused.inplace = array<i64: k, r>`.
It describes how a region may be *run*, not its math, so canonical recipe
text (dedup, object cache keys) ignores it.

When it is sound (`inplace_operand`): the region has exactly one result, of
a static shape and the same type as operand k; every body op is elementwise
(`ElementwiseOp`), a `prim.constant`, or a `prim.broadcast_to` of a value
that does not derive from operand k; every value derived from operand k has
operand k's shape (operand k is never broadcast, reduced, reshaped or
transposed); no body op is dead. Then every output element is computed from
input elements at the same index, so a kernel that reads element i before
writing element i (any elementwise loop nest, fused or not: the loop writing
the one result runs after everything it reads) gives the same values in
place. Regions with reductions, shape ops or several results are never
marked.

Reading it back (`matmul_inplace_regions`, `argument_inplace_pairs`): the
executor re-checks a marker where the region stands (operand k read by the
region only, result r of its type and a static shape) and asks which regions
may write into a matmul temporary, and which (argument, result) pairs a
caller may pass as one array.

Must not: run or allocate anything (runtime), or change a region's math.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import Operation, SSAValue

from fusebind.dialect.fused import RegionOp, YieldOp
from fusebind.dialect.prim import BroadcastToOp, ConstantOp, ElementwiseOp, MatmulOp, ReshapeOp
from fusebind.dialect.types import elem_of, shape_of

#: The discardable attribute name: `array<i64: operand_index, result_index>`.
INPLACE_ATTR = "fused.inplace"

#: Whether an epilogue reads its matmul through a reshape in place (`matmul_buffer_of`), and the
#: matmul-epilogue rule starts after that reshape. It was off while an in-place fused kernel ran
#: its loop unvectorized (LLVM's runtime overlap check fails on the exact alias: conv's bias + relu
#: at 1x64x112x112 537 us in place vs 93 us into a separate buffer). On since the executor runs a
#: marked region as its in-place kernel variant (runtime/builder_inplace.py: operand k read from
#: the output's own memref, no check), which is faster than the separate buffer (docs/EPILOGUES.md).
THROUGH_RESHAPE = True


def _static(value: SSAValue) -> bool:
    return all(d is not None for d in shape_of(value.type))


def _body_is_same_index(region: RegionOp, k: int) -> bool:
    """Every value derived from block argument k keeps its shape, and the
    body holds only elementwise ops, constants and broadcasts of other values."""
    block = region.body.blocks[0]
    arg = block.args[k]
    shape = shape_of(arg.type)
    derived: set[SSAValue] = {arg}
    for op in block.ops:
        if isinstance(op, YieldOp):
            continue
        if not isinstance(op, (ElementwiseOp, ConstantOp, BroadcastToOp)):
            return False
        if any(not r.uses for r in op.results):
            return False
        if any(v in derived for v in op.operands):
            if isinstance(op, BroadcastToOp) or any(shape_of(r.type) != shape for r in op.results):
                return False
            derived.update(op.results)
    return True


def matmul_buffer_of(value: SSAValue, counts: Callable[[Operation], bool] = lambda op: True) -> SSAValue | None:
    """The `prim.matmul` result whose buffer `value` is, or None: `value`
    itself, or a `prim.reshape` of a matmul result that nothing but that
    reshape reads (uses by ops for which `counts(op)` is false ignored). A
    row-major reshape of the matmul's C-contiguous output is a view of the
    same buffer, element i at flat index i (conv's (F, P) -> (N, F, *out)),
    so the epilogue's same-index argument holds for it as for the matmul."""
    if isinstance(value.owner, MatmulOp):
        return value
    if THROUGH_RESHAPE and isinstance(value.owner, ReshapeOp):
        source = value.owner.operands[0]
        if (isinstance(source.owner, MatmulOp) and source.owner.parent_block() is value.owner.parent_block()
                and elem_of(source.type) == elem_of(value.type) and _static(source)
                and sum(1 for use in source.uses if counts(use.operation)) == 1):
            return source
    return None


def inplace_operand(region: RegionOp, members: Collection[Operation],
                    counts: Callable[[Operation], bool] = lambda op: True) -> int | None:
    """The index of an operand of `region` (not yet inserted: its operands are
    the outside values) whose buffer result 0 may reuse, or None.

    The operand must be the result of a `prim.matmul` (an executor temporary,
    never a caller's array), or its single-use reshape (`matmul_buffer_of`),
    read by no op outside `members` (the ops the
    region replaces), and have the result's type. Uses by ops for which
    `counts(op)` is false are ignored (the optimizer passes "is an op of the
    block", so regions built but not inserted yet, `region` included, do not
    count as readers)."""
    if len(region.results) != 1 or not _static(region.results[0]):
        return None
    out_type = region.results[0].type
    for k, value in enumerate(region.operands):
        if value.type != out_type or matmul_buffer_of(value, counts) is None:
            continue
        if any(use.operation not in members and use.operation is not region and counts(use.operation)
               for use in value.uses):
            continue
        if list(region.operands).count(value) != 1:
            continue
        if _body_is_same_index(region, k):
            return k
    return None


def mark_inplace(region: RegionOp, operand_index: int, result_index: int = 0) -> None:
    """Stamp the marker: result `result_index` may be written into the buffer
    of operand `operand_index`."""
    region.attributes[INPLACE_ATTR] = DenseArrayBase.from_list(i64, [operand_index, result_index])


def inplace_of(region: Operation) -> tuple[int, int] | None:
    """(operand index, result index) when `region` carries the marker, else None.
    This is what the executor asks before giving a region step its buffers."""
    attr = region.attributes.get(INPLACE_ATTR)
    if not isinstance(attr, DenseArrayBase):
        return None
    values = tuple(int(v) for v in attr.get_values())
    if len(values) != 2:
        return None
    return values[0], values[1]


def _checked_markers(block: Any) -> Iterator[tuple[RegionOp, int, int, SSAValue]]:
    """(region, k, r, operand k) for each region of `block` whose marker
    still holds where it stands (re-checked, not trusted): k and r in range,
    operand k read only by the region, of result r's type, static shape."""
    for op in block.ops:
        if not isinstance(op, RegionOp):
            continue
        marker = inplace_of(op)
        if marker is None:
            continue
        k, r = marker
        if not (0 <= k < len(op.operands) and 0 <= r < len(op.results)):
            continue
        value = op.operands[k]
        if len(list(value.uses)) != 1 or value.type != op.results[r].type or not _static(value):
            continue
        yield op, k, r, value


def matmul_inplace_regions(block: Any) -> dict[RegionOp, tuple[int, int]]:
    """Regions of `block` whose result r may be written into operand k's
    buffer: operand k is a `prim.matmul` result of the same block (an
    executor temporary), or its single-use reshape (`matmul_buffer_of`: the
    executor then allocates the matmul's output as a view of the result's
    buffer), as `_checked_markers` re-checks."""
    out = {}
    for op, k, r, value in _checked_markers(block):
        source = matmul_buffer_of(value)
        if source is not None and source.owner.parent_block() is block and value.owner.parent_block() is block:
            out[op] = (k, r)
    return out


def argument_inplace_pairs(block: Any, returned: list[SSAValue]) -> frozenset[tuple[int, int]]:
    """(argument i, result j) pairs a caller may pass as one array: a marked
    region (the body reads operand k at the index it writes result r) whose
    operand k is block argument i, read by nothing else, and whose result r
    is `returned[j]` and returned once, with argument i's type."""
    args = list(block.args)
    pairs = set()
    for op, k, r, value in _checked_markers(block):
        result = op.results[r]
        if not any(value is a for a in args) or sum(v is result for v in returned) != 1:
            continue
        pairs.add((next(i for i, a in enumerate(args) if a is value),
                   next(j for j, v in enumerate(returned) if v is result)))
    return frozenset(pairs)
