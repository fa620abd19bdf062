"""Reductions over axis 0 as a fixed tree (compiler/tree_reduce.py): speed against the one-pass
form, numpy and jax.jit, at one thread (pinned) and two.

Run:  cd /work/main && /work/benchenv/bin/python -m bench.bench_tree_reduce [--rounds 7] [--threads 1 2]

Workloads (issue 17): sum and mean of 1e7 f32, column sums x.sum(0) of 4096x1024 f32, and a sum of
squares of 1e7 f32 (the inner stage fused with its producer). Candidates, interleaved in one process
(each round times every candidate in turn; the report is the median over rounds of each
candidate's median call time, and the ratio other/fusebind-tree):
- `tree`: fb.jit as it is (the fixed tree);
- `one-pass`: the same function with the tree switched off (TREE_MIN_ELEMS raised during its
  calls, so its plan and any re-optimization after a kernel adoption see no tree);
- `numpy`, and `jax` (jax.jit on device arrays, `block_until_ready`) when jax imports.
For `--threads 1` the whole process is pinned to one core first (`os.sched_setaffinity`; XLA
ignores its thread flags); for 2 it runs on the default mask. Prints the load (`uptime`).
Must not: run in the test suite (timings), or change the tree's constants except for its own calls.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Callable

import numpy as np

N = 10_000_000
ROWS, COLS = 4096, 1024


def _median_call(fn: Callable[[], Any], reps: int = 9) -> float:
    """Median seconds per call over `reps` samples of back-to-back calls (>= 2 ms each)."""
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(2e-3 / one))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def workloads() -> dict[str, tuple[Callable[[Any], Any], np.ndarray]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    m = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    return {
        "sum 1e7 f32": (lambda a: a.sum(), x),
        "mean 1e7 f32": (lambda a: a.mean(), x),
        "sum(x*x) 1e7 f32": (lambda a: (a * a).sum(), x),
        "x.sum(0) 4096x1024 f32": (lambda a: a.sum(axis=0), m),
    }


def _one_pass(f: Any) -> Callable[..., Any]:
    """`f` with the tree switched off for the length of each call (and its planning)."""
    from fusebind.compiler import tree_reduce

    def call(*args: Any) -> Any:
        saved, tree_reduce.TREE_MIN_ELEMS = tree_reduce.TREE_MIN_ELEMS, 1 << 62
        try:
            return f(*args)
        finally:
            tree_reduce.TREE_MIN_ELEMS = saved
    return call


def candidates(fn: Callable[[Any], Any], x: np.ndarray, threads: int) -> dict[str, Callable[[], Any]]:
    import fusebind as fb

    tree, flat_jit = fb.jit(fn, threads=threads), fb.jit(fn, threads=threads)
    flat = _one_pass(flat_jit)
    out: dict[str, Callable[[], Any]] = {"tree": lambda: tree(x), "one-pass": lambda: flat(x), "numpy": lambda: fn(x)}
    try:
        import jax

        jx = jax.device_put(x)
        jf = jax.jit(fn)
        out["jax"] = lambda: jf(jx).block_until_ready()
    except Exception:  # noqa: BLE001 - jax absent or broken here: the column is left out
        pass
    for c in out.values():  # warm: compile, bind, adopt; then again so the plans are final
        c()
    tree.wait_compiled(120)
    flat_jit.wait_compiled(120)
    for c in out.values():
        c()
    want = np.asarray(fn(x.astype(np.float64)))
    for name in ("tree", "one-pass"):
        got = np.asarray(out[name]())
        assert np.allclose(got, want, rtol=1e-4, atol=1e-3), (name, got, want)
    return out


def run(threads: int, rounds: int) -> list[str]:
    if threads == 1:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    lines = [f"threads={threads} ({'pinned to one core' if threads == 1 else 'default affinity'}), "
             f"load {os.getloadavg()[0]:.1f}, {rounds} interleaved rounds, median us; ratio = other / tree"]
    for name, (fn, x) in workloads().items():
        cands = candidates(fn, x, threads)
        times: dict[str, list[float]] = {k: [] for k in cands}
        for _ in range(rounds):
            for k, c in cands.items():
                times[k].append(_median_call(c))
        med = {k: statistics.median(v) for k, v in times.items()}
        cols = "  ".join(f"{k} {med[k] * 1e6:8.0f} ({med[k] / med['tree']:.2f}x)" for k in cands)
        lines.append(f"  {name:24s} {cols}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    args = ap.parse_args(argv)
    for t in sorted(args.threads, reverse=True):  # two threads first: pinning cannot be undone
        print("\n".join(run(t, args.rounds)), flush=True)


if __name__ == "__main__":
    main()
