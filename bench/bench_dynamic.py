"""Dynamic-dim kernels against static ones on the large bench workloads, one thread.

Workloads (bench/workloads.py, at their large sizes; RMSNorm defined here):
  relu(a*b+c)        three 1e7 vectors          gelu_tanh(x)   one 1e7 vector
  softmax(x, -1)     4096x1024 rows             layer_norm     4096x1024 rows, w, b
  rms_norm           x * w / sqrt(mean(x^2, -1) + 1e-6) over 4096x1024 rows
Candidates, the same math and the same inputs (fb.jit(threads=1), docs/DYNAMIC-SHAPES.md):
  static       fb.jit(dynamic=False): the kernel compiled for exactly these shapes
  dyn-outer    fb.jit() (automatic) called first at half the rows: dim 0 is `?`, the row dims stay
               static (the common case of a varying batch); 1-d workloads: their one dim is `?`
  dyn-all      fb.jit(dynamic=True): every dim `?`
Each candidate is checked to run the kernel it names (explain) and to agree with static.
The GELU and softmax regions are catalog patterns, whose kernels are always compiled for any
shape (runtime/jit.py): their "static" row is that dynamic catalog kernel.
Then what new sizes cost (`new_shapes`): 20 batch sizes of a (?, 1024) chain, first call each,
kernels built and resident memory grown, static (dynamic=False) against dynamic=True.
Pinned to CPU 0 (`os.sched_setaffinity`), interleaved rounds (bench/timing.py: the order rotates
each round), min and median; ratio = candidate / static median (1.00x: as fast; < 1.10x: the
issue's bound).

Run:  PYTHONPATH=/work/main /work/benchenv/bin/python bench/bench_dynamic.py [--budget 2] [--quick]
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable

import numpy as np

import fusebind as fb
from bench.timing import fmt_ratio, fmt_time, markdown_table, measure_interleaved
from bench.workloads import NUMPY_OPS, workload

EPS = 1e-6


def rms_norm(x: Any, w: Any) -> Any:
    return x * w / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS)


def cases(quick: bool) -> list[tuple[str, Callable[..., Any], list[np.ndarray]]]:
    """(name, fn over arrays, inputs at the large size)."""
    out = []
    for name, size in (("relu(a*b+c)", "1e7"), ("gelu_tanh(x)", "1e7"), ("softmax(x, -1)", "4096x1024"),
                       ("layer_norm(x, w, b)", "4096x1024")):
        w = workload(name)
        xs = w.inputs(size)
        if quick:
            xs = [x[: max(2, x.shape[0] // 64)] if x.ndim == 2 or name[0] in "rg" else x for x in xs]
        out.append((name, lambda *a, f=w.fn: f(NUMPY_OPS, *a), xs))
    rng = np.random.default_rng(1)
    rows = 64 if quick else 4096
    out.append(("rms_norm(x, w)", rms_norm, [rng.uniform(-3, 3, (rows, 1024)).astype(np.float32),
                                             rng.uniform(0.5, 1.5, 1024).astype(np.float32)]))
    return out


def half(xs: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs with half the leading dim of every argument of the largest rank (the batch)."""
    rank = max(x.ndim for x in xs)
    return [np.ascontiguousarray(x[: x.shape[0] // 2]) if x.ndim == rank else x for x in xs]


def kernel_kind(f: Any, xs: list[np.ndarray]) -> str:
    text = f.explain(*xs)
    chosen = [line for line in text.splitlines() if line.strip().startswith("kernel:")]
    if not chosen or "chosen: fused" not in text:
        return "not fused"
    line = chosen[0]
    return line[line.rindex("[") + 1:line.rindex("]")] if "[" in line else "unnamed"


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def new_shapes(count: int) -> list[tuple[object, ...]]:
    """What `count` new batch sizes cost: a (?, 1024) softmax-like chain, static vs dynamic=True
    (first-call time per new size, kernels compiled, resident memory grown)."""
    import time

    def chain(x: Any, w: Any) -> Any:
        y = np.tanh(x * w) + 1.0
        return y / y.sum(axis=-1, keepdims=True)

    rng = np.random.default_rng(2)
    w = rng.uniform(0.5, 1.5, 1024).astype(np.float32)
    xs = [rng.uniform(-3, 3, (16 + 3 * i, 1024)).astype(np.float32) for i in range(count + 1)]
    out = []
    for label, dynamic in (("static (dynamic=False)", False), ("dynamic=True", True)):
        f = fb.jit(chain, dynamic=dynamic, threads=1)
        f(xs[0], w)  # the first size (the one compile every mode pays) is not counted
        before, t0 = rss_bytes(), time.perf_counter()
        for x in xs[1:]:
            f(x, w)
        per = (time.perf_counter() - t0) / count
        st = f.stats
        out.append((label, count, fmt_time(per), st.compiles + st.object_cache_hits - 1,
                    f"{(rss_bytes() - before) / count / 1024:.0f} KB"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per workload")
    parser.add_argument("--quick", action="store_true", help="small inputs: a smoke run, not a measurement")
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    table = []
    for name, fn, xs in cases(args.quick):
        static = fb.jit(fn, dynamic=False, threads=1)
        outer = fb.jit(fn, threads=1)
        outer(*half(xs))  # a second size of the batch dim: from the next call on it is `?`
        every = fb.jit(fn, dynamic=True, threads=1)
        funcs = {"static": static, "dyn-outer": outer, "dyn-all": every}
        want = static(*xs)
        kinds = {}
        for label, f in funcs.items():
            np.testing.assert_allclose(f(*xs), want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {label}")
            kinds[label] = kernel_kind(f, xs)
        timings = measure_interleaved({label: (lambda f=f: f(*xs)) for label, f in funcs.items()},
                                      budget_s=args.budget)
        base = timings["static"].median
        for label, t in timings.items():
            table.append((name, "x".join(map(str, xs[0].shape)), label, kinds[label], fmt_time(t.min),
                          fmt_time(t.median), fmt_ratio(t.median / base)))
            print(f"  {name} {label}: {fmt_time(t.median)} ({fmt_ratio(t.median / base)}) {kinds[label]}",
                  flush=True)
    print()
    print(markdown_table(["workload", "shape", "candidate", "kernel", "min", "median", "median / static"], table))
    print()
    print(markdown_table(["mode", "new sizes", "first call per new size", "kernels built for them",
                          "RSS growth per new size"], new_shapes(5 if args.quick else 20)))


if __name__ == "__main__":
    main()
