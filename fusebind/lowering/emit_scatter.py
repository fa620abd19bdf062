"""The lowering of `prim.scatter` inside a fused region (placeholder: not built yet)."""

from __future__ import annotations

from typing import Any

from fusebind.lowering.scalar_text import ScalarEmitError

KINDS: frozenset[str] = frozenset()


def emit(em: Any, op: Any, args: list[Any], result_type: Any) -> Any:
    raise ScalarEmitError(f"{op.name}: no lowering yet")
