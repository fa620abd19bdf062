"""`prim.gather` (placeholder: not built yet)."""

from __future__ import annotations

from fusebind.dialect.prim_base import PrimOp

GATHER_OPS: tuple[type[PrimOp], ...] = ()
