"""`JitStats`: the counters a `fusebind.jit` function shows (`JitFunction.stats`), and how an
executor's counters add into them (`add_counts`). Split from api/jit.py (one job each);
api/jit.py re-exports `JitStats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fusebind.runtime.arms import ArmStats

#: the order `JitStats` shows its fields in
_STATS_ORDER = ("calls", "traces", "plans", "plan_hits", "compiles", "object_cache_hits", "arm0_calls",
                "fused_calls", "run_seconds", "arm0_seconds", "fused_seconds")


@dataclass(repr=False)
class JitStats(ArmStats):
    """Summed over every signature, and counted for every call (fast-path
    calls too): calls, traces, plans built, plan_hits (calls that reused the
    cached plan of their signature), compiles (kernels really compiled),
    object_cache_hits (kernels loaded from the on-disk object cache instead),
    and the runtime's `ArmStats` it extends: arm0_calls / fused_calls (region
    runs per arm; a region still queued for compilation runs as primitives and
    counts as arm 0).

    Timed only with `fb.jit(profile=True)`: run_seconds (time running plans;
    the kernel call on the fast path), arm0_seconds and fused_seconds (time
    in region runs per arm). Without profile they are None, and the repr
    says "seconds: not measured (pass profile=True)"."""

    calls: int = 0
    traces: int = 0
    plans: int = 0
    plan_hits: int = 0
    compiles: int = 0
    object_cache_hits: int = 0
    profile: bool = False
    run_seconds: float | None = None
    arm0_seconds: float | None = None  # ArmStats' fields, unmeasured (None) until profiled
    fused_seconds: float | None = None

    @property
    def cache_hits(self) -> int:
        """The old name of `plan_hits` (plan-cache hits, not object-cache hits)."""
        return self.plan_hits

    def __repr__(self) -> str:
        from fusebind.runtime.executor_stats import format_stats

        return format_stats("JitStats", {name: getattr(self, name) for name in _STATS_ORDER}, self.profile)


def add_counts(totals: list[Any], st: Any) -> None:
    """Add an executor's counters to `totals` (JitFunction.stats's order)."""
    for i, v in enumerate((st.calls, st.plans, st.plan_hits, st.compiles, st.object_cache_hits, st.arms.arm0_calls,
                           st.arms.fused_calls, st.run_seconds or 0.0, st.arms.arm0_seconds or 0.0,
                           st.arms.fused_seconds or 0.0)):
        totals[i] += v
