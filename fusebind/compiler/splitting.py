"""Which fused regions a kernel can run in chunks along axis 0 (IR analysis).

Owns `region_is_splittable`: the runtime's thread split and the JIT's choice
of a dynamic-shape kernel both ask it. Reads only the region's IR.
Must not: know about kernels, threads or the binding table.
"""

from __future__ import annotations

from typing import Any

from fusebind.dialect.prim import ConstantOp, ElementwiseOp, ReductionOp
from fusebind.dialect.types import is_static, shape_of


def region_is_splittable(region: Any) -> bool:
    """Regions a kernel compiled for dynamic shapes can run in chunks along
    axis 0: every operand and result has rank >= 1 and the same static
    leading size, the body is elementwise ops, scalar constants and reductions
    that keep axis 0, and every operand has the same full shape (no broadcast operands: a kernel
    compiled for dynamic shapes has every dim `?`, so it cannot know that a size-1 dim of an operand
    broadcasts; a (1, C, 1, 1) bias of a (1, C, H, W) tensor has the full rank and the same leading
    size, and was read as if it were full-shaped)."""
    body = list(region.body.blocks[0].ops)[:-1]
    if not body:
        return False
    for op in body:
        if isinstance(op, ConstantOp):
            if shape_of(op.results[0].type):
                return False  # only scalar constants broadcast into any chunk
        elif isinstance(op, ReductionOp):
            if 0 in op.axes_list():
                return False
        elif not isinstance(op, ElementwiseOp):
            return False
    shapes = [shape_of(v.type) for v in (*region.operands, *region.results)]
    if not all(is_static(s) and len(s) >= 1 for s in shapes):
        return False
    rank = max(len(s) for s in shapes)
    operand_shapes = {tuple(s) for s in shapes[:len(region.operands)]}
    return (len({s[0] for s in shapes}) == 1 and all(len(s) == rank for s in operand_shapes)
            and len(operand_shapes) <= 1)
