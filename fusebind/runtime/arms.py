"""Arms of a region step: what `explain` shows and what verify mode checks.

Owns `ArmStats` (calls and seconds per arm), `RegionDecision` (why a region
runs the arm it runs, with the `ResolvedKernel` its fused arm resolved to),
`describe_decisions` (the `explain` lines), and verify mode's comparison
(`verify_results`): arm 0 runs beside the fused arm and the results are
compared; a mismatch raises `FusedArmMismatch`, or with
`verify_action="warn"` warns (`FusedArmMismatchWarning`) and reports False,
so the caller returns arm 0's values and never chooses that kernel again.

Must not: build or run steps (builder.py, plan.py), choose a kernel row
(resolve.py), or price arms (compiler/cost.py).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusebind.compiler.cost import Cost
from fusebind.dialect.errors import FusebindError
from fusebind.dialect.types import is_bfloat16
from fusebind.runtime.resolve import ResolvedKernel, fmt_cost


class FusedArmMismatch(FusebindError, ArithmeticError):
    """Verify mode: a region's fused arm disagrees with its arm 0."""

    def __init__(self, message: str, region: str, fused_id: int) -> None:
        super().__init__(message)
        self.region = region
        self.fused_id = fused_id


class FusedArmMismatchWarning(UserWarning):
    """Verify mode with `verify_action="warn"`: the same finding as a warning."""



@dataclass
class ArmStats:
    """Calls and seconds per arm, summed over every plan of an executor
    (seconds only under `PlanOptions.profile`; they stay 0 otherwise)."""

    arm0_calls: int = 0
    fused_calls: int = 0
    arm0_seconds: float | None = 0.0  # None in a report of calls that were not timed
    fused_seconds: float | None = 0.0


@dataclass
class RegionDecision:
    """Why a region runs the arm it runs (for `explain`)."""

    name: str
    fused_id: int
    ops: list[str]
    arm0_cost: Cost
    fused_cost: Cost
    arm: str  # "fused" or "arm 0"
    reason: str
    splits: int = 1
    inplace: tuple[int, int] | None = None  # (operand, result) when the fused arm writes in place
    #: the row the fused arm resolved to (key, dtypes, backend, row, why it won); None on a miss
    kernel: ResolvedKernel | None = None


def verify_results(decision: RegionDecision, fused: list[np.ndarray], ref: list[Any], action: str) -> bool:
    """True when the fused arm's results agree with arm 0's. A mismatch
    raises `FusedArmMismatch`, or with action "warn" warns and returns False
    (the caller then returns arm 0's values)."""
    agree = True
    for i, (f, r) in enumerate(zip(fused, ref)):
        r = np.asarray(r)
        floating = f.dtype.kind == "f" or is_bfloat16(f.dtype)
        if floating:
            # narrow floats: the fused arm rounds once, arm 0 after every op (docs/DTYPES.md): 16 of their eps
            eps = float(np.finfo(f.dtype).eps)
            rtol, atol = ((1e-4, 1e-5) if f.dtype == np.float32 else (1e-9, 1e-12) if f.dtype == np.float64
                          else (16 * eps, 16 * eps))
            ok = np.allclose(f.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(f, r)
        if ok:
            continue
        diff = np.abs(f.astype(np.float64) - r.astype(np.float64))
        worst = float(np.nanmax(diff)) if diff.size else 0.0
        bad = int(np.count_nonzero(~np.isclose(f.astype(np.float64), r.astype(np.float64), equal_nan=True))) \
            if floating else int(np.count_nonzero(f != r))
        msg = (f"fusebind verify: region @{decision.name} (FusedOpId {decision.fused_id}) result #{i}: the fused "
               f"arm differs from arm 0 in {bad} of {f.size} elements (max abs difference {worst:.6g}); "
               "the fused kernel bound for this region is wrong: rebuild or unbind it")
        if action != "warn":
            raise FusedArmMismatch(msg, decision.name, decision.fused_id)
        warnings.warn(msg + "; arm 0's values are returned and this kernel is not run again for this "
                      "function", FusedArmMismatchWarning, stacklevel=4)
        agree = False
    return agree


def verify_failed_reason(fused_id: int) -> str:
    return (f"fused arm (FusedOpId {fused_id}) differed from arm 0 under verify (warned): arm 0's values are "
            "returned, and this kernel does not run again for this function")


def describe_decisions(decisions: list[RegionDecision]) -> list[str]:
    """Readable lines for `explain`: per region its costs, the kernel its
    fused arm resolved to (key, dtypes, backend, row, source, cost and trust,
    and why each other row lost), and the arm that runs and why."""
    lines = []
    for d in decisions:
        ident = f"FusedOpId {d.fused_id}" if d.fused_id else "FusedOpId unassigned"
        lines.append(f"region @{d.name} ({ident}): {len(d.ops)} ops [{', '.join(d.ops)}]")
        lines.append(f"  arm 0 (primitives): {fmt_cost(d.arm0_cost)}")
        lines.append(f"  fused arm:          {fmt_cost(d.fused_cost)}")
        k = d.kernel
        if k is not None:
            lines += k.describe("  ")
        split = f", split over {d.splits} threads" if d.splits > 1 else ""
        runs = f" {k.key!r} row {k.index} ({k.row.source})" if k is not None and d.arm == "fused" else ""
        lines.append(f"  chosen: {d.arm}{runs} -- {d.reason}{split}")
    return lines
