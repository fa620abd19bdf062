"""An executor's counters: `ExecutorStats` and its repr (`format_stats`, which `fb.jit`'s
`JitStats` shares). Split from executor.py (one job each); executor.py re-exports both.
Must not: import the executor (it imports this).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fusebind.runtime.arms import ArmStats
from fusebind.runtime.jit import JitCompiler


#: what a stats repr says in place of the seconds when calls were not timed
NOT_TIMED = "seconds: not measured (pass profile=True)"


@dataclass
class ExecutorStats:
    """What an executor did, counted for every call (fast-path calls too).

    calls: calls that returned; plans: plans built; plan_hits: calls that
    reused the cached plan of their signature (a fast-path call is one);
    compiles: kernels this executor's JIT really compiled; object_cache_hits:
    kernels it loaded from the on-disk object cache instead of compiling;
    arms: calls per arm of region steps (a region still queued for
    compilation runs as primitives and counts as an arm-0 call).
    With `profile` (Executor(profile=True)): `run_seconds` (time running
    plans: the whole plan on the slow path, the kernel call on the fast
    path) and seconds per arm; without it these are None."""

    calls: int = 0
    plans: int = 0
    plan_hits: int = 0
    arms: ArmStats = field(default_factory=ArmStats)
    compiler: JitCompiler | None = field(default=None, repr=False)
    profile: bool = False
    run_seconds: float | None = None

    @property
    def compiles(self) -> int:
        return self.compiler.compiles if self.compiler is not None else 0

    @property
    def object_cache_hits(self) -> int:
        return self.compiler.object_cache_hits if self.compiler is not None else 0

    @property
    def cache_hits(self) -> int:
        """The old name of `plan_hits` (plan-cache hits, not object-cache hits)."""
        return self.plan_hits

    def as_dict(self) -> dict[str, float | int | None]:
        a = self.arms
        return {"calls": self.calls, "plans": self.plans, "plan_hits": self.plan_hits, "compiles": self.compiles,
                "object_cache_hits": self.object_cache_hits, "arm0_calls": a.arm0_calls,
                "fused_calls": a.fused_calls, "run_seconds": self.run_seconds, "arm0_seconds": a.arm0_seconds,
                "fused_seconds": a.fused_seconds}

    def __repr__(self) -> str:
        return format_stats("ExecutorStats", self.as_dict(), self.profile)


def format_stats(name: str, fields: dict[str, Any], profile: bool) -> str:
    """`Name(calls=3, ..., fused_seconds=1.2e-05)`, or without profile the
    counters and `seconds: not measured (pass profile=True)`."""
    shown = [f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items()
             if profile or not k.endswith("seconds")]
    return f"{name}(" + ", ".join(shown + ([] if profile else [NOT_TIMED])) + ")"
