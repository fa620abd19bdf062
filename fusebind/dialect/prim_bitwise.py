"""`prim` bitwise ops (placeholder: issue 14 fills it)."""

from __future__ import annotations

from fusebind.dialect.prim_base import PrimOp

BITWISE_OPS: tuple[type[PrimOp], ...] = ()
