"""The `prim` dialect: primitive tensor ops over builtin ranked tensors.

This module gathers the op classes (defined in `prim_elementwise`,
`prim_division`, `prim_structured` and `prim_layout`, on the base in `prim_base`), builds `PRIM_OPS` (KIND →
class) and the `Prim` dialect, and registers every op in the op registry
(`registry.py`) so the built-ins come first there. Adding an op means adding
one class to one of those modules and listing it in its tuple there.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from fusebind.dialect.prim_base import PrimOp
from fusebind.dialect.registry import register_builtin_ops
from fusebind.dialect.prim_elementwise import (
    ELEMENTWISE_OPS,
    AbsOp,
    AddOp,
    BinaryOp,
    CastOp,
    CompareOp,
    ElementwiseOp,
    ErfOp,
    ExpOp,
    FloatUnaryOp,
    LogOp,
    MaxOp,
    MinOp,
    MulOp,
    NegOp,
    ReluOp,
    RsqrtOp,
    SelectOp,
    SigmoidOp,
    SqrtOp,
    SubOp,
    TanhOp,
    UnaryOp,
)
from fusebind.dialect.prim_division import (
    DIVISION_OPS,
    DivOp,
    FloorDivOp,
    IntegerPowerError,
    KernelFormError,
    PowOp,
    RemOp,
)
from fusebind.dialect.prim_structured import (
    STRUCTURED_OPS,
    BroadcastToOp,
    ConstantOp,
    MatmulOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceMinOp,
    ReduceSumOp,
    ReductionOp,
    ReshapeOp,
    ShapeOp,
    TransposeOp,
    matmul_shape,
    reduced_shape,
)
from fusebind.dialect.prim_bitwise import BITWISE_OPS
from fusebind.dialect.prim_gather import GATHER_OPS
from fusebind.dialect.prim_layout import LAYOUT_OPS, SliceOp
from fusebind.dialect.prim_math import MATH_OPS
from fusebind.dialect.prim_scatter import SCATTER_OPS
from fusebind.dialect.prim_reductions import REDUCTION_OPS, ReduceArgMaxOp, ReduceArgMinOp, ReduceProdOp
from fusebind.dialect.prim_scan import SCAN_OPS
from fusebind.dialect.prim_checks import CHECK_OPS
from fusebind.dialect.prim_window import WINDOW_OPS

ALL_PRIM_OPS: tuple[type[PrimOp], ...] = (ELEMENTWISE_OPS + DIVISION_OPS + STRUCTURED_OPS + LAYOUT_OPS + GATHER_OPS
                                          + SCATTER_OPS + MATH_OPS + BITWISE_OPS + REDUCTION_OPS + SCAN_OPS
                                          + CHECK_OPS + WINDOW_OPS)

PRIM_OPS: dict[str, type[PrimOp]] = {op.KIND: op for op in ALL_PRIM_OPS}

Prim = Dialect("prim", list(ALL_PRIM_OPS), [])

# The built-ins are the registry's first entries: nothing else can run before this module is imported.
register_builtin_ops(ALL_PRIM_OPS)

__all__ = [
    "ALL_PRIM_OPS", "PRIM_OPS", "Prim", "PrimOp", "ElementwiseOp", "UnaryOp", "FloatUnaryOp", "BinaryOp",
    "ReductionOp", "ShapeOp", "NegOp", "AbsOp", "ReluOp", "ExpOp", "LogOp", "SqrtOp", "RsqrtOp", "TanhOp",
    "SigmoidOp", "ErfOp", "AddOp", "SubOp", "MulOp", "DivOp", "FloorDivOp", "RemOp", "MaxOp", "MinOp", "PowOp",
    "CompareOp", "SelectOp", "CastOp", "ReduceSumOp", "ReduceMaxOp", "ReduceMinOp", "ReduceMeanOp",
    "BroadcastToOp", "ReshapeOp", "TransposeOp", "MatmulOp", "ConstantOp", "SliceOp", "matmul_shape", "reduced_shape",
    "IntegerPowerError", "KernelFormError",
]
