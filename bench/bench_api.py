"""The API's large-array path: what `fb.jit` costs on top of the bare kernel.

Owns the `## API path` section of bench/RESULTS.md (between its own markers;
the suite block is not touched). Candidates, interleaved in one process
(timing.py), for relu(a*b+c) and GELU-tanh at 1e5 and 1e7 float32:

- `kernel`: the same fused computation lowered directly (peers.FbKernel),
  prebuilt descriptors, preallocated output, one thread;
- `jit fresh`: `fb.jit(threads=1)`, the caller keeps each result until the
  next call, so every call gets new pages (the pre-recycling cost);
- `jit recycled`: the result is dropped each call, so the recycler reuses it;
- `jit out=`: `f(*xs, out=buf)`;
- `jit 2t`: `fb.jit(threads=2)`, result dropped (the threaded split);
- `numpy`: the numpy expression (fresh output);
- `SOL`: a trivial kernel with the same reads and writes (peers.sol_candidates).

`--crossover` also times threads=1 against threads=2 at 1e5..1e7.
Run: `python -m bench.bench_api [--quick] [--crossover] [--write]`.
Must not: assert anything about time (tests do not time).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench.peers import Candidate, FbKernel, _arity_wrapper, sol_candidates
from bench.timing import fmt_ratio, fmt_time, markdown_table, measure_interleaved
from bench.workloads import prim_func_text, workload

RESULTS = Path(__file__).with_name("RESULTS.md")
START, END = "<!-- api:start -->", "<!-- api:end -->"
WORKLOADS = ("relu(a*b+c)", "gelu_tanh(x)")


def _jit(w: Any, threads: int) -> Any:
    import fusebind as fb

    return fb.jit(_arity_wrapper(w.fn, fb, w.args), threads=threads)


def candidates(name: str, size: str) -> tuple[dict[str, Callable[[], object]], np.ndarray]:
    """name -> zero-argument callable, and the reference result (for a check)."""
    w = workload(name)
    xs = w.inputs(size)
    ref = w.reference(*xs)
    out = np.empty_like(ref)
    kernel = FbKernel(prim_func_text(w.fn, [x.shape for x in xs])).bind(*xs, out)
    f1, f2, fresh_f = _jit(w, 1), _jit(w, 2), _jit(w, 1)
    buf = np.empty_like(ref)
    for f in (f1, f2, fresh_f):
        f(*xs)  # trace + compile outside the timed region
        f(*xs)
    held: list[Any] = [None]

    def fresh() -> None:
        held[0] = fresh_f(*xs)  # the previous result lives until this one returns: no reuse

    cands: dict[str, Callable[[], object]] = {
        "kernel": kernel,
        "jit fresh": fresh,
        "jit recycled": lambda: f1(*xs),
        "jit out=": lambda: f1(*xs, out=buf),
        "jit 2t": lambda: f2(*xs),
        "numpy": lambda: w.reference(*xs),
    }
    sols = [c for c in sol_candidates(w, xs, np.empty_like(ref)) if isinstance(c, Candidate)]
    if sols:
        cands["SOL"] = sols[-1].run  # the numba loop when numba is there, else np.copyto
    checks = {"jit recycled": f1(*xs), "jit out=": f1(*xs, out=buf), "jit 2t": f2(*xs)}
    kernel()
    checks["kernel"] = out
    for label, got in checks.items():
        np.testing.assert_allclose(got, ref, rtol=w.rtol * 10, atol=w.atol * 10, err_msg=label)
    return cands, ref


def run_table(sizes: tuple[str, ...], budget: float) -> str:
    headers = ["workload", "size", "candidate", "min", "median", "× kernel", "× SOL", "numpy ×"]
    rows = []
    for name in WORKLOADS:
        for size in sizes:
            cands, _ = candidates(name, size)
            t = measure_interleaved(cands, budget_s=budget, lo=7, hi=60)
            k, sol, npy = t["kernel"].median, t["SOL"].median if "SOL" in t else None, t["numpy"].median
            for c, timing in t.items():
                rows.append([name, size, c, fmt_time(timing.min), fmt_time(timing.median),
                             fmt_ratio(timing.median / k), fmt_ratio(timing.median / sol) if sol else "—",
                             fmt_ratio(npy / timing.median)])
            print(f"{name} {size}: " + ", ".join(f"{c} {fmt_time(x.median)}" for c, x in t.items()), flush=True)
    return markdown_table(headers, rows)


def run_crossover(budget: float) -> str:
    headers = ["workload", "elements", "1 thread (median)", "2 threads (median)", "2t speed-up", "2t speed-up (min)"]
    rows = []
    for name in WORKLOADS:
        w = workload(name)
        for n in (100_000, 300_000, 500_000, 1_000_000, 3_000_000, 10_000_000):
            xs = [x[:n].copy() for x in w.inputs("1e7")]
            f1, f2 = _jit(w, 1), _jit(w, 2)
            f1(*xs), f2(*xs)
            t = measure_interleaved({"1t": lambda: f1(*xs), "2t": lambda: f2(*xs)}, budget_s=budget, lo=9, hi=80)
            rows.append([name, f"{n:.0e}", fmt_time(t["1t"].median), fmt_time(t["2t"].median),
                         fmt_ratio(t["1t"].median / t["2t"].median), fmt_ratio(t["1t"].min / t["2t"].min)])
            print(rows[-1], flush=True)
    return markdown_table(headers, rows)


def write_section(text: str) -> None:
    old = RESULTS.read_text() if RESULTS.exists() else ""
    block = f"{START}\n{text.rstrip()}\n{END}\n"
    if START in old and END in old:
        new = re.sub(re.escape(START) + r".*?" + re.escape(END) + r"\n?", lambda _: block, old, flags=re.S)
    else:
        new = old.rstrip("\n") + "\n\n" + block
    RESULTS.write_text(new)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="shorter time budget per table cell")
    p.add_argument("--crossover", action="store_true", help="also time threads=1 vs threads=2 by size")
    p.add_argument("--write", action="store_true", help="write the '## API path' section of bench/RESULTS.md")
    args = p.parse_args(argv)
    budget = 0.6 if args.quick else 2.0
    load = os.getloadavg()
    parts = ["## API path", "",
             f"`python -m bench.bench_api{' --quick' if args.quick else ''}{' --crossover' if args.crossover else ''}`"
             f"; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 vCPUs, shared). "
             "Interleaved rounds; ratios of medians. `× kernel`: time / bare kernel (prebuilt descriptors, "
             "preallocated output); `× SOL`: time / trivial kernel with the same traffic; `numpy ×`: how many "
             "times faster than numpy. `jit fresh` keeps each result until the next call (new pages every call); "
             "`jit recycled` drops it (the recycler reuses it); `jit 2t`: threads=2, result dropped.", ""]
    parts.append(run_table(("1e5", "1e7"), budget))
    if args.crossover:
        parts += ["", "### threads=1 vs threads=2 (fb.jit, results dropped)", "", run_crossover(budget)]
    text = "\n".join(parts) + "\n"
    print(text)
    if args.write:
        write_section(text)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
