"""The records `optimize_graph` returns: `Decision`, `WorkItem`, `OptimizeResult`.

This module owns what a verdict looks like (`Verdict`: `fused`, `gated`,
`unprofitable`, `illegal`, `too-big`), the line `fuse{remarks=true}` prints
for it, and the work-order item the JIT compiles. It holds data only: it
must not decide, price or touch IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from xdsl.dialects.builtin import ModuleOp

from fusebind.compiler.context import DEFAULT_BACKEND
from fusebind.dialect.fused import RegionOp

Verdict = Literal["fused", "gated", "unprofitable", "illegal", "too-big"]


@dataclass(frozen=True)
class Decision:
    """One verdict on one candidate region (or one refused merge)."""

    verdict: Verdict
    rule: str
    name: str
    function: str
    ops: tuple[str, ...]
    fused_id: int = 0
    detail: str = ""
    fused_cost: Any = None
    unfused_cost: Any = None
    backend: str = DEFAULT_BACKEND
    #: (operand index, result index) when the fused region may write that
    #: result into that operand's buffer (see `fusebind.compiler.inplace`).
    inplace: tuple[int, int] | None = None

    def remark(self) -> str:
        """The line `fuse{remarks=true}` prints."""
        where = f"@{self.name} in @{self.function}, {len(self.ops)} ops: {', '.join(self.ops)}"
        if self.verdict == "fused":
            return f"remark: fused @{self.name} id {self.fused_id} ({self.rule}; {self.detail}) in @{self.function}"
        if self.verdict == "gated":
            return f"remark: gated id {self.fused_id} (no kernel on {self.backend}): {where}; {self.detail}"
        return f"remark: rejected @{self.name} ({self.verdict}: {self.detail}) in @{self.function}"


@dataclass(frozen=True)
class WorkItem:
    """A gated region worth compiling: its registry id, name, a detached
    recipe region, its dtypes (inputs then outputs), and the catalog id it
    stands for (None for synthesized regions)."""

    fused_id: int
    name: str
    region: RegionOp
    dtypes: tuple[str, ...]
    static_id: int | None = None
    rule: str = ""


@dataclass(frozen=True)
class OptimizeResult:
    """The optimized (new) module, the deduplicated work order, the decisions."""

    module: ModuleOp
    work_order: tuple[WorkItem, ...]
    decisions: tuple[Decision, ...]

    def fused(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.verdict == "fused")

    def rejected(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.verdict != "fused")

    def remarks(self) -> list[str]:
        return [d.remark() for d in self.decisions]
