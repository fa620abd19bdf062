"""`prim` math ops (placeholder: issue 14 fills it)."""

from __future__ import annotations

from fusebind.dialect.prim_base import PrimOp

MATH_OPS: tuple[type[PrimOp], ...] = ()
