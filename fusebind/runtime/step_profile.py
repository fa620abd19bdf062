"""Time per step of a plan: what `fusebind run --profile` prints (cli_profile.py draws the table).

Owns `plan_and_func(executor, arrays)` (the current plan and the optimized function it was
built from: `build_plan` makes one step per op of that function's block, in order, so step
i is op i) and `profile_steps(executor, arrays, repeat)`: the plan's steps run `repeat`
times on `arrays`, each step timed on its own, as `StepTime` records (region or op, the
kernel it called, the arm, the median seconds per call).

Why a module of its own and not a flag on the plan: the plan's steps are on the hot path and
carry no clock unless `profile=True`, and that clock is per arm, not per step. Here the steps
are called one by one from a loop of this module, under the plan's lock, as `Plan.run` calls
them; nothing is wrapped or changed, so profiling costs nothing when it is not asked for.
The time of one step includes its call overhead from Python (a step is one closure call).
The results of these runs are dropped (the returned values of `Plan.run`, and its copies of
them, are not part of the steps); the arm counters of the executor count these calls too.

Must not: change a plan or its steps, or be imported on the call path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fusebind.dialect.errors import FusebindInternalError, FusebindValueError

__all__ = ["StepTime", "plan_and_func", "profile_steps"]


@dataclass(frozen=True)
class StepTime:
    """One step of a plan and its median time per call."""

    step: int
    what: str  # "region @name" or the op's name
    kernel: str  # the kernel key the step calls, "primitives (N ops)" or "numpy reference"
    arm: str  # "fused", "arm 0" (a region's primitives) or "primitive" (an op outside regions)
    seconds: float


def plan_and_func(executor: Any, arrays: Sequence[np.ndarray]) -> tuple[Any, Any]:
    """(the current plan for `arrays`, the optimized function it was built from)."""
    shapes = tuple(tuple(a.shape) for a in arrays)
    for _ in range(3):  # a background compile may move the table between the two calls
        plan = executor.plan_for(arrays)
        table = executor.session.table
        func = executor.optimized_func(table, shapes)
        if plan.generation == table.generation:
            break
    return plan, func


def _kernel_of(op: Any, executor: Any) -> str:
    from fusebind.runtime.resolve import KernelMiss, compile_one

    try:
        return repr(compile_one(op, executor.session.table, executor.options.backend).key)
    except KernelMiss:
        return "numpy reference"


def profile_steps(executor: Any, arrays: Sequence[Any], repeat: int = 20) -> list[StepTime]:
    """Each step of the plan for `arrays`, timed over `repeat` runs (the median)."""
    from fusebind.dialect.fused import RegionOp

    if not isinstance(repeat, int) or repeat < 1:
        raise FusebindValueError(f"profile_steps: repeat must be an int >= 1, got {repeat!r}")
    arrays = [np.asarray(a) for a in arrays]
    executor.check_arguments(arrays)
    plan, func = plan_and_func(executor, arrays)
    block = func.body.blocks[0]
    ops = [op for op in block.ops if op is not block.last_op]
    if len(ops) != len(plan.steps):  # build_plan makes one step per op: anything else is a bug here
        raise FusebindInternalError(f"profile_steps: {len(plan.steps)} steps for {len(ops)} ops of "
                                    f"@{executor.name}")
    labels: list[tuple[str, str, str]] = []
    regions = iter(plan.decisions)
    for op in ops:
        if isinstance(op, RegionOp):
            d = next(regions)
            kernel = repr(d.kernel.key) if d.arm == "fused" and d.kernel is not None else f"primitives ({len(d.ops)} ops)"
            labels.append((f"region @{d.name}", kernel, d.arm))
        else:
            labels.append((op.name, _kernel_of(op, executor), "primitive"))
    samples: list[list[float]] = [[] for _ in plan.steps]
    clock = time.perf_counter
    with plan.lock:  # the steps share the plan's buffers, as in Plan.run
        for _ in range(repeat):
            env: list[Any] = [None] * plan.n_slots
            for s, a in zip(plan.arg_slots, arrays):
                env[s] = a
            for i, step in enumerate(plan.steps):
                t = clock()
                step(env)
                samples[i].append(clock() - t)
    return [StepTime(i, what, kernel, arm, float(np.median(s)))
            for i, ((what, kernel, arm), s) in enumerate(zip(labels, samples))]
