"""Per-step plan overhead: what the executor adds per step of a multi-step plan.

A chain of STEPS fused regions that the optimizer never sees (the module is run as given,
`optimize=None`), each an elementwise kernel over N float32 elements, so the plan has STEPS
thunk steps and nothing else. Candidates, interleaved in one process (timing.py):

- `plan`: `Executor(module)(x, y)`, the whole plan (one fresh output per step);
- `kernels`: the STEPS kernels called back to back through their thunks on preallocated
  arrays (what the plan cannot avoid: the kernels and one native call each);
- `kernels+alloc`: the same with one `np.empty` per step (the plan's fresh outputs).

Per-step overhead = (plan - kernels) / STEPS (target <= 1 us, issue 17); the part above
`kernels+alloc` is the Python of the plan loop itself. One core (`sched_setaffinity`).
Run: `python -m bench.bench_steps [--n N] [--steps S]`. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

from bench.timing import fmt_time, markdown_table, measure_interleaved


def chain_text(n: int, steps: int) -> str:
    """A func of `steps` explicit fused regions: r_k = r_{k-1} * y + y (an FMA each)."""
    t = f"tensor<{n}xf32>"
    lines = [f"func.func @chain(%x: {t}, %y: {t}) -> {t} {{"]
    prev = "%x"
    for k in range(steps):
        lines += [f"  %r{k} = fused.region @step{k}({prev}, %y) : ({t}, {t}) -> {t} {{",
                  f"  ^bb0(%a: {t}, %b: {t}):",
                  f"    %m = prim.mul %a, %b : ({t}, {t}) -> {t}",
                  f"    %s = prim.add %m, %b : ({t}, {t}) -> {t}",
                  f"    fused.yield %s : {t}",
                  "  }"]
        prev = f"%r{k}"
    lines += [f"  func.return {prev} : {t}", "}"]
    return "\n".join(lines) + "\n"


def build(n: int, steps: int) -> tuple[object, list, np.ndarray, np.ndarray]:
    """The executor of the chain (planned, kernels bound) and the step thunks, found in its plan."""
    from fusebind.dialect import parse_module
    from fusebind.runtime.executor import Executor
    from fusebind.runtime.steps import ThunkStep

    x = np.linspace(-1, 1, n, dtype=np.float32)
    y = np.full(n, 0.5, np.float32)
    ex = Executor(parse_module(chain_text(n, steps)), threads=1)
    ex(x, y)
    plan = ex.plan_for([x, y])
    thunks = []
    for step in plan.steps:  # the region step's closure holds its ThunkStep
        cells = [c.cell_contents for c in (getattr(step, "__closure__", None) or ())]
        found = [c for c in cells if isinstance(c, ThunkStep)]
        if found:
            thunks.append(found[0].thunk.function)
    return ex, thunks, x, y


def measure(n: int, steps: int, budget: float) -> dict[str, float]:
    ex, thunks, x, y = build(n, steps)
    bufs = [np.empty(n, np.float32) for _ in range(steps)]
    want = x
    for _ in range(steps):
        want = want * y + y
    got = ex(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    if len(thunks) != steps:
        raise SystemExit(f"found {len(thunks)} thunk steps in the plan, expected {steps}")

    def kernels() -> None:
        prev = x
        for fn, b in zip(thunks, bufs):
            fn(prev, y, b)
            prev = b

    def kernels_alloc() -> None:
        prev = x
        for fn in thunks:
            o = np.empty(n, np.float32)
            fn(prev, y, o)
            prev = o

    t = measure_interleaved({"plan": lambda: ex(x, y), "kernels": kernels, "kernels+alloc": kernels_alloc},
                            budget_s=budget, lo=15, hi=60)
    return {name: statistics.median(tm.samples) for name, tm in t.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3, help="independent measurements (medians shown)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    runs = [measure(args.n, args.steps, args.budget) for _ in range(args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    per_step = (med["plan"] - med["kernels"]) / args.steps
    loop = (med["plan"] - med["kernels+alloc"]) / args.steps
    rows = [[k, fmt_time(v)] for k, v in med.items()]
    rows += [["per-step overhead (plan - kernels) / steps", fmt_time(per_step)],
             ["of which the plan loop (plan - kernels+alloc) / steps", fmt_time(loop)]]
    print(f"### Per-step plan overhead ({args.steps} FMA steps, {args.n} f32, one core; load "
          f"{os.getloadavg()[0]:.1f})\n")
    print(markdown_table(["candidate", "median per call"], rows))


if __name__ == "__main__":
    main()
