"""The `fusebind` command's timing: interleaved medians (`time_interleaved`) and the
per-step table of `fusebind run --profile` (`profile_rows`, `format_profile`).

The steps are timed by `fusebind.runtime.step_profile.profile_steps` (the plan's steps
called one by one under its lock); this module turns them into rows with the share of
the call each takes and renders the table. "% of the call" is a step's median over the
sum of every step's median: the time the plan's steps take, without the argument
checks and result copies of a call (those are the difference to the `fusebind` time
of the report, which times whole calls).

Must not: compile or choose anything, or print elsewhere than the stream it is given.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np


def time_interleaved(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Median seconds per call of each function, the candidates interleaved
    round by round (the machine is noisy; see PERFORMANCE.md)."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in samples.items()}


def profile_rows(executor: Any, arrays: Sequence[np.ndarray], repeat: int) -> list[dict[str, Any]]:
    """One row per step of the plan for `arrays`: step, region (or op), kernel, arm,
    median seconds and percent of the steps' total."""
    from fusebind.runtime.step_profile import profile_steps

    steps = profile_steps(executor, arrays, max(1, repeat))
    total = sum(s.seconds for s in steps)
    return [{"step": s.step, "region": s.what, "kernel": s.kernel, "arm": s.arm, "seconds": s.seconds,
             "percent": 100.0 * s.seconds / total if total > 0 else 0.0} for s in steps]


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def format_profile(rows: Sequence[dict[str, Any]], repeat: int) -> str:
    """The table: one line per step, the slowest first marked by their share."""
    if not rows:
        return "profile: the plan has no steps (it returns its arguments)"
    head = ("step", "region / op", "kernel", "arm", "time", "% of call")
    body = [(str(r["step"]), r["region"], r["kernel"], r["arm"], _us(r["seconds"]), f"{r['percent']:.1f}%")
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    right = {0, 4, 5}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    total = sum(r["seconds"] for r in rows)
    out = [f"profile: time per step (median of {max(1, repeat)} runs of the plan's steps; "
           f"% of the {_us(total)} they take together)", line(head), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    return "\n".join(out)
