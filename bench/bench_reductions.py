"""Reduction speed and accuracy, old tree vs new: float sums, means, softmax and layer_norm.

Run:  python bench/bench_reductions.py --trees OLD NEW [--pairs 5] [--only PATTERN]   (through fb.jit)
      python bench/bench_reductions.py --kernels --trees OLD NEW [--rounds 41]        (kernels, one process)

Owns: the reduction workloads of issue 11 item 4 and two old/new comparisons.
- `fb.jit` (default): worker processes alternate between the two trees (old, new,
  new, old, ...), so a busy moment on the shared machine hits both; the report is
  the median over pairs of new/old, with each side's time/SOL and the relative error
  of the full sums against math.fsum. SOL: for a reduction (reads n elements, writes
  a few) the faster of numpy's `max` and `sum` of the same array (each streams it once);
  for a row kernel (reads and writes the full array) `np.copyto` of it.
- `--kernels`: each tree emits the MLIR of the same prim function (a child process per
  tree: `--emit`), both are compiled here with this tree's pipeline and called
  alternately, timed in thread CPU time (what another process's load inflates least);
  the report is the median over rounds of new/old, static and dynamic-shape kernels.
Must not: import fusebind in the jit comparison's driver (each worker imports its own
tree from PYTHONPATH; the kernel comparison compiles with the tree this file is in).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve()
N_FULL = 1 << 24
ROWS, COLS = 4096, 1024


def _time(fn: Callable[[], Any], reps: int) -> float:
    """Median seconds per call over `reps` samples (each sample >= 2e-4 s of back-to-back calls)."""
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(2e-4 / one))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def _workloads() -> dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...], str]]:
    """name -> (function to jit, inputs, SOL kind: 'read' or 'copy')."""
    import fusebind as fb

    rng = np.random.default_rng(0)
    x = rng.standard_normal(N_FULL).astype(np.float32)
    m = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    w = rng.standard_normal(COLS).astype(np.float32)
    b = rng.standard_normal(COLS).astype(np.float32)
    small = rng.standard_normal(1 << 14).astype(np.float32)
    x64 = rng.standard_normal(N_FULL // 2).astype(np.float64)
    return {
        "sum 2^24 f32": (lambda a: a.sum(), (x,), "read"),
        "mean 2^24 f32": (lambda a: a.mean(), (x,), "read"),
        "sum rows 4096x1024": (lambda a: a.sum(axis=-1), (m,), "read"),
        "sum cols 4096x1024": (lambda a: a.sum(axis=0), (m,), "read"),
        "mean rows 4096x1024": (lambda a: a.mean(axis=-1), (m,), "read"),
        "softmax 4096x1024": (lambda a: fb.softmax(a, axis=-1), (m,), "copy"),
        "layer_norm 4096x1024": (lambda a, ww, bb: fb.layer_norm(a, ww, bb, eps=1e-5), (m, w, b), "copy"),
        "sum 2^14 f32 (in cache)": (lambda a: a.sum(), (small,), "read"),
        "sum 2^23 f64": (lambda a: a.sum(), (x64,), "read"),
    }


def _sol(kind: str, x: np.ndarray) -> list[Callable[[], Any]]:
    """Kernels with the workload's memory traffic; the fastest is the SOL."""
    if kind == "copy":
        out = np.empty_like(x)
        return [lambda: np.copyto(out, x)]
    return [x.max, x.sum]  # each streams x once


def worker(only: str | None, reps: int) -> dict[str, Any]:
    import fusebind as fb

    results: dict[str, Any] = {"tree": str(Path(fb.__file__).resolve().parent.parent)}
    for name, (fn, xs, kind) in _workloads().items():
        if only and not fnmatch.fnmatch(name, f"*{only}*"):
            continue
        f = fb.jit(fn)
        f(*xs)  # compile
        sol = _sol(kind, xs[0])
        times, sols = [], []
        for _ in range(3):  # interleave kernel and SOL inside the process too
            times.append(_time(lambda: f(*xs), reps))
            sols.append(min(_time(k, reps) for k in sol))
        t, s = min(times), min(sols)
        entry: dict[str, Any] = {"seconds": t, "sol_seconds": s, "time_per_sol": t / s}
        if name.startswith(("sum 2^", "mean 2^")):
            exact = math.fsum(xs[0].astype(np.float64).tolist()) / (xs[0].size if name.startswith("mean") else 1)
            entry["rel_error"] = abs(float(f(*xs)) - exact) / abs(exact)
            entry["numpy_rel_error"] = abs(float(fn(xs[0])) - exact) / abs(exact)
        results[name] = entry
    return results


def _child(tree: str, args: list[str], cache_dir: str) -> str:
    """Run this file in a child whose `fusebind` is `tree`'s; its last stdout line."""
    env = dict(os.environ, PYTHONPATH=tree, FUSEBIND_CACHE_DIR=cache_dir, FUSEBIND_MACHINE="default")
    proc = subprocess.run([sys.executable, str(HERE), *args], env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child in {tree} failed:\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


def compare(old: str, new: str, pairs: int, only: str | None, reps: int) -> str:
    """Alternate old/new jit workers `pairs` times; a markdown table of medians."""
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    args = ["--worker", "--reps", str(reps)] + (["--only", only] if only else [])
    with tempfile.TemporaryDirectory() as c_old, tempfile.TemporaryDirectory() as c_new:
        for p in range(pairs):
            order = [("old", old, c_old), ("new", new, c_new)]
            if p % 2:
                order.reverse()
            for label, tree, cache in order:
                runs[label].append(json.loads(_child(tree, args, cache)))
                print(f"pair {p + 1}/{pairs}: {label} done", file=sys.stderr, flush=True)
    names = [k for k in runs["new"][0] if k != "tree"]
    lines = [f"fb.jit, old = {old}, new = {new}; {pairs} alternating pairs of worker processes; medians",
             "", "| workload | old | new | new/old (median of pairs) | old time/SOL | new time/SOL | "
             "rel. error old | rel. error new | numpy |", "|---|---|---|---|---|---|---|---|---|"]
    for n in names:
        o = [r[n] for r in runs["old"]]
        w = [r[n] for r in runs["new"]]
        ratio = statistics.median(b["seconds"] / a["seconds"] for a, b in zip(o, w))

        def med(rs: list[dict[str, Any]], key: str) -> float:
            return statistics.median(r[key] for r in rs)

        err = [f"{o[0]['rel_error']:.1e}", f"{w[0]['rel_error']:.1e}", f"{w[0]['numpy_rel_error']:.1e}"] \
            if "rel_error" in w[0] else ["", "", ""]
        lines.append(f"| {n} | {med(o, 'seconds') * 1e3:.3f} ms | {med(w, 'seconds') * 1e3:.3f} ms | {ratio:.3f} | "
                     f"{med(o, 'time_per_sol'):.2f} | {med(w, 'time_per_sol'):.2f} | " + " | ".join(err) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- kernels in one process

def _kernel_workloads() -> dict[str, tuple[str, list[tuple[int, ...]], list[tuple[int, ...]], Any]]:
    """name -> (prim function text, input shapes, output shapes, dtype)."""
    from bench.workloads import layer_norm_rows, prim_func_text, softmax_rows

    def red(fn: Callable[..., Any], shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[Any, ...]:
        return prim_func_text(fn, [shape]), [shape], [out], np.float32

    big, mat = (N_FULL,), (ROWS, COLS)
    return {
        "sum 2^24": red(lambda ops, x: x.sum(axis=0), big, ()),
        "mean 2^24": red(lambda ops, x: x.mean(axis=0), big, ()),
        "sum 2^14 (in cache)": red(lambda ops, x: x.sum(axis=0), (1 << 14,), ()),
        "sum rows 4096x1024": red(lambda ops, x: x.sum(axis=1), mat, (ROWS,)),
        "sum cols 4096x1024": red(lambda ops, x: x.sum(axis=0), mat, (COLS,)),
        "softmax 4096x1024": (prim_func_text(softmax_rows, [mat]), [mat], [mat], np.float32),
        "layer_norm 4096x1024": (prim_func_text(layer_norm_rows, [mat, (COLS,), (COLS,)]),
                                 [mat, (COLS,), (COLS,)], [mat], np.float32),
        "sum f64 2^23": (prim_func_text(lambda ops, x: x.sum(axis=0), [(N_FULL // 2,)]).replace("f32", "f64"),
                         [(N_FULL // 2,)], [()], np.float64),
    }


def emit_worker(spec: str) -> str:
    """The MLIR this tree emits for `spec` (JSON: text, dynamic)."""
    from fusebind.dialect import parse_module
    from fusebind.lowering import emit_linalg
    from fusebind.lowering.build import default_fastmath

    s = json.loads(spec)
    fm = default_fastmath()
    e = emit_linalg(next(iter(parse_module(s["text"]).ops)), "k", dynamic=s["dynamic"],
                    fastmath=fm[0] if fm else None, fastmath_defs=fm[1] if fm else None)
    return json.dumps({"text": e.text, "entry": e.entry})


def compare_kernels(old: str, new: str, rounds: int, only: str | None) -> str:
    sys.path.insert(0, str(HERE.parent.parent))
    from fusebind.dialect import parse_module
    from fusebind.lowering import emit_linalg, kernel_signature
    from fusebind.lowering.build import compile_text
    from fusebind.runtime.dtypes import descriptor_for
    from fusebind.runtime.kernel import Kernel

    lines = [f"kernels, old = {old}, new = {new}; compiled in one process, called alternately, {rounds} rounds, "
             "thread CPU time", "", "| workload | shapes | old (min) | new (min) | new/old (median of rounds) |",
             "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as cache:
        for name, (text, ins, outs, dtype) in _kernel_workloads().items():
            if only and not fnmatch.fnmatch(name, f"*{only}*"):
                continue
            rng = np.random.default_rng(0)
            args = [rng.standard_normal(s).astype(dtype) for s in ins]
            results = [np.empty(o, dtype) for o in outs]
            descs = [descriptor_for(a) for a in args] + [descriptor_for(r) for r in results]
            for dynamic in (False, True):
                spec = json.dumps({"text": text, "dynamic": dynamic})
                sig = emit_linalg(next(iter(parse_module(text).ops)), "k", dynamic=dynamic)
                kernels = []
                for tree in (old, new):
                    e = json.loads(_child(tree, ["--emit", spec], cache))
                    kernels.append(Kernel.from_object(compile_text(e["text"], e["entry"]), e["entry"],
                                                      signature=kernel_signature(sig.inputs, sig.outputs)))
                t0 = time.perf_counter()
                kernels[0](*descs)
                inner = max(1, int(2e-3 / max(time.perf_counter() - t0, 1e-7)))
                times: list[list[float]] = [[], []]
                for r in range(rounds):
                    for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                        t = time.thread_time()
                        for _ in range(inner):
                            kernels[i](*descs)
                        times[i].append((time.thread_time() - t) / inner)
                ratio = statistics.median(b / a for a, b in zip(*times))
                lines.append(f"| {name} | {'dynamic' if dynamic else 'static'} | {min(times[0]) * 1e3:.3f} ms | "
                             f"{min(times[1]) * 1e3:.3f} ms | {ratio:.3f} |")
                print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", action="store_true", help="measure the importable fusebind through fb.jit; JSON")
    ap.add_argument("--emit", metavar="SPEC", help="print the MLIR the importable fusebind emits for SPEC (JSON)")
    ap.add_argument("--kernels", action="store_true", help="compare kernels in one process instead of fb.jit")
    ap.add_argument("--trees", nargs=2, metavar=("OLD", "NEW"), help="two source trees to compare")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--only", default=None)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.only, args.reps)))
        return 0
    if args.emit:
        print(emit_worker(args.emit))
        return 0
    if not args.trees:
        ap.error("--trees OLD NEW is required to compare")
    old, new = (str(Path(t).resolve()) for t in args.trees)
    if args.kernels:
        print(compare_kernels(old, new, args.rounds, args.only))
    else:
        print(compare(old, new, args.pairs, args.only, args.reps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
