"""The benchmark suite: every PERFORMANCE.md target, side by side, interleaved, as ratios.

Run:  python -m bench.suite [--quick] [--only PATTERN] [--out bench/RESULTS.md]
  or  python bench/suite.py …

Owns: the sections (workload tables, from bench/peers_tables.py; two threads;
call overhead; compile latency and cache hits, from bench/bench_compile.py;
temporaries), the summary against the targets, and writing its block between `<!-- suite:begin -->` and
`<!-- suite:end -->` in the results file (the rest of the file is left alone).

The measuring process is always a child started with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE removed from its environment (they can select a slower
OpenBLAS kernel); the header records what the parent had. Every candidate's
result is checked against numpy before it is timed; a wrong one is marked ✗.
The workload tables run in two more children: one pinned to one core (every
peer, XLA included, on one core), one with every peer at its default threads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

if __package__ in (None, ""):  # `python bench/suite.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench import peers
from bench.bench_compile import child_env, first_call_summary, run_child, run_compile, run_first_calls
from bench.peers_tables import (Config, Results, measure, peer_summary, run_workloads, single_thread_peers,
                                sol_of)
from bench.suite_verdicts import verdict_table, verdicts
from bench.timing import environment_header, fmt_ratio, fmt_time, markdown_table
from bench.workloads import workload

BEGIN, END = "<!-- suite:begin -->", "<!-- suite:end -->"
REMOVED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# ---------------------------------------------------------------------------------------------

def run_threads(cfg: Config, res: Results, out_md: list[str]) -> None:
    """fusebind's kernel on two Python threads (chunks) vs one thread, on large arrays."""
    if not cfg.selected("threads", "two threads"):
        return
    picks = [("gelu_tanh(x)", "1e7"), ("sqrt(exp(x/2)+log(x²+1))", "1e7"), ("relu(a*b+c)", "1e7")]
    if not cfg.quick:
        picks.append(("softmax(x, -1)", "4096x1024"))
    elif cfg.quick:
        picks = [("gelu_tanh(x)", "1e7")]
    table = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        for name, size in picks:
            w = workload(name)
            xs = w.inputs(size)
            ref = w.reference(*xs)
            out = np.empty(ref.shape, np.float32)
            built = [peers.fb_kernel_candidate(w, xs, out), peers.fb_kernel_threads_candidate(w, xs, out, pool),
                     peers.numba_candidate(w, xs, out), peers.numba_candidate(w, xs, out, parallel=True),
                     peers.fusebind_candidate(w, xs), peers.fusebind_candidate(w, xs, threads=2)]
            rows = measure(built, ref, w, size, cfg, out)
            get = {r.name: r for r in rows}
            for r in rows:
                family = "numba" if r.name.startswith("numba") else "fusebind" if r.name.startswith("fusebind") \
                    else "fb-kernel"
                base = get.get(family)
                speed = fmt_ratio(base.min / r.min) if base and base.min and r.min else "—"
                table.append((name, size, r.name, fmt_time(r.min) if r.min else r.check, fmt_time(r.median),
                              speed, r.check if r.min else ""))
            for family, key in (("fb-kernel", "threads"), ("fusebind", "threads-api")):
                one, two = get.get(family), get.get(f"{family} ×2")
                if one and two and one.min and two.min:
                    res.extra[f"{key}:{name}"] = one.min / two.min
            print(f"  threads {name} {size}: " + ", ".join(f"{r.name} {fmt_time(r.min)}" for r in rows), flush=True)
    out_md += ["### Two threads on large arrays", "",
               "fb-kernel ×2: the generated kernel on two halves of the leading axis, one on this thread and one "
               "on a pool thread (ctypes drops the GIL); fusebind ×2: the public API with threads=2 (its own split). "
               "speed-up is against the same family's single-thread "
               "kernel. The first three are elementwise (GELU and exp/log/sqrt are compute-bound, relu chain "
               "memory-bound).", "",
               markdown_table(["workload", "size", "candidate", "min", "median", "speed-up vs 1 thread", "check"],
                              table), ""]


# ---------------------------------------------------------------------------------------------

def run_call_overhead(cfg: Config, res: Results, out_md: list[str]) -> None:
    if not cfg.selected("overhead", "call"):
        return
    w = workload("relu(a*b+c)")
    table = []
    for n in (16, 1000):
        rng = np.random.default_rng(1)
        xs = [rng.uniform(-3, 3, n).astype(np.float32) for _ in range(3)]
        ref = w.reference(*xs)
        out = np.empty(n, np.float32)
        built: list[peers.Built] = []
        try:
            fn = peers.empty_native_function()
            ptrs = [out.ctypes.data] * 4
            built.append(peers.Candidate("empty ctypes call", lambda: (fn(*ptrs), ref)[1],
                                         "JIT'd void f(4 pointers) that returns at once"))
        except Exception as exc:
            built.append(peers.Unavailable("empty ctypes call", str(exc)))
        built.append(peers.Candidate("numpy ufunc expr", lambda: np.maximum(xs[0] * xs[1] + xs[2], 0),
                                     "np.maximum(a*b+c, 0)"))
        built += [peers.numba_candidate(w, xs, out), peers.numexpr_candidate(w, xs, out),
                  peers.fb_kernel_candidate(w, [x.reshape(n) for x in xs], out), peers.fusebind_candidate(w, xs)]
        with single_thread_peers():
            rows = measure(built, ref, w, str(n), cfg, out)
        for r in rows:
            table.append((n, r.name, fmt_time(r.min) if r.min else r.check, fmt_time(r.median), r.check if r.min else "",
                          r.note))
            if r.min:
                res.extra[f"call:{n}:{r.name}"] = r.min
        print(f"  call overhead n={n}: " + ", ".join(f"{r.name} {fmt_time(r.min)}" for r in rows), flush=True)
    out_md += ["### Per-call overhead from Python (relu(a*b+c), small arrays)", "",
               "Each sample batches enough calls to last ≥ 0.2 ms; times are per call. The empty ctypes call "
               "passes four pointers to a function that returns at once (the floor for any ctypes-bound "
               "kernel). fb-kernel calls the generated kernel with descriptors built once; fusebind is the "
               "public API call `f(a, b, c)` (allocates its output).", "",
               markdown_table(["n", "candidate", "min", "median", "check", "note"], table), ""]


# ---------------------------------------------------------------------------------------------

_MEM_CHILD = r"""
import json, resource, sys, tracemalloc
import numpy as np
from bench.workloads import workload
from bench import peers
w = workload("relu(a*b+c)")
name, size = sys.argv[1], sys.argv[2]
small = w.inputs("1e3"); small_out = np.empty(1000, np.float32)
xs = w.inputs(size); out = np.empty(xs[0].shape, np.float32); out.fill(0)
build = {"numpy": lambda: peers.numpy_candidate(w, xs), "numpy out=": lambda: peers.numpy_out_candidate(w, xs, out),
         "numexpr": lambda: peers.numexpr_candidate(w, xs, out), "fb-kernel": lambda: peers.fb_kernel_candidate(w, xs, out),
         "fusebind": lambda: peers.fusebind_candidate(w, xs)}
# Warm at full size would already raise the peak, so build (compile or cache-load) first, then measure one call.
c = build[name]()
if isinstance(c, peers.Unavailable):
    print(json.dumps({"error": c.reason})); sys.exit(0)
import gc; gc.collect()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
y = c.run()
cur, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"tracemalloc_peak": peak, "rss_growth": (rss - base) * 1024, "out_bytes": out.nbytes,
                  "in_bytes": sum(x.nbytes for x in xs)}))
"""


def run_temporaries(cfg: Config, res: Results, out_md: list[str]) -> None:
    if not cfg.selected("temporaries", "memory"):
        return
    size = "1e5" if cfg.quick else "1e7"
    names = ["numpy", "numpy out=", "numexpr", "fb-kernel", "fusebind"]
    table = []
    for name in names:
        try:
            r = run_child(_MEM_CHILD, name, size)
        except Exception as exc:
            table.append((name, f"failed: {str(exc)[:120]}", "", ""))
            continue
        if "error" in r:
            table.append((name, f"unavailable ({r['error']})", "", ""))
            continue
        mib = 2**20
        table.append((name, f"{r['tracemalloc_peak'] / mib:.1f} MiB", f"{r['rss_growth'] / mib:.1f} MiB",
                      f"{r['out_bytes'] / mib:.1f} MiB"))
        res.extra[f"mem:{name}"] = (r["tracemalloc_peak"], r["rss_growth"], r["out_bytes"])
    out_md += [f"### Temporaries: relu(a*b+c) at {size} (float32), one call in a fresh process", "",
               "tracemalloc peak: numpy-heap bytes allocated during the call (numpy reports its buffers to "
               "tracemalloc; this includes a freshly allocated output). RSS growth: rise of the process's peak "
               "RSS during the call (catches native mallocs that tracemalloc cannot see). Inputs (3 arrays) are "
               "allocated and touched before; candidates writing into a preallocated output should show ≈ 0.", "",
               markdown_table(["candidate", "tracemalloc peak", "peak-RSS growth", "output size"], table), ""]


# ---------------------------------------------------------------------------------------------

def _ratio(res: Results, wl: str, size: str, num: str, den: str) -> float | None:
    a, b = res.get(wl, size, num), res.get(wl, size, den)
    if a is None or b is None or not all(r.check == "✓" or r.check.startswith("n/a") for r in (a, b)):
        return None
    return (a.min or 0.0) / (b.min or 1.0)


def _sol_ratio(res: Results, wl: str, size: str, cand: str) -> float | None:
    rows = [r for r in res.rows if r.workload == wl and r.size == size]
    sol = sol_of(rows)
    c = res.get(wl, size, cand)
    if sol is None or c is None or c.check != "✓":
        return None
    return (c.min or 0.0) / (sol.min or 1.0)


def summary(res: Results) -> str:
    """Each PERFORMANCE.md target row: measured value for fusebind (API) and fb-kernel, met or missed."""
    rows: list[tuple[str, str, str, str, str]] = []

    def add(target: str, crit: str, fn: Callable[[str], float | None], ok: Callable[[float], bool],
            fmt: Callable[[float | None], str] = fmt_ratio, cands: Sequence[str] = ("fusebind", "fb-kernel")) -> None:
        vals = [fn(c) for c in cands]
        verdict = " / ".join("—" if v is None else ("met" if ok(v) else "missed") for v in vals)
        rows.append((target, crit, fmt(vals[0]), fmt(vals[1]) if len(vals) > 1 else "", verdict))

    big = "1e7"
    rc = "relu(a*b+c)"
    add("elementwise chain 1e7", "time/SOL ≤ 1.1", lambda c: _sol_ratio(res, rc, big, c), lambda v: v <= 1.1)
    add("elementwise chain 1e7", "numpy ÷ time ≥ 3", lambda c: _ratio(res, rc, big, "numpy", c), lambda v: v >= 3)
    add("elementwise chain 1e7", "numexpr ÷ time ≥ 5", lambda c: _ratio(res, rc, big, "numexpr", c), lambda v: v >= 5)
    for wl in ("gelu_tanh(x)", "sqrt(exp(x/2)+log(x²+1))"):
        add(f"{wl} 1e7", "time/SOL ≤ 1.5", lambda c, wl=wl: _sol_ratio(res, wl, big, c), lambda v: v <= 1.5)
        add(f"{wl} 1e7", "numpy ÷ time ≥ 4", lambda c, wl=wl: _ratio(res, wl, big, "numpy", c), lambda v: v >= 4)

        def best_peer(c: str, wl: str = wl) -> float | None:
            peer_names = ("numpy", "numpy out=", "numexpr", "numba", "ORT 1t")
            vals = [_ratio(res, wl, big, p, c) for p in peer_names]
            vals2 = [v for v in vals if v is not None]
            return min(vals2) if vals2 else None
        add(f"{wl} 1e7", "best 1-thread peer ÷ time > 1", best_peer, lambda v: v > 1)
    for wl, lim in (("softmax(x, -1)", 1.5), ("layer_norm(x, w, b)", 1.2)):
        add(f"{wl} 4096x1024", f"time/SOL ≤ {lim}", lambda c, wl=wl: _sol_ratio(res, wl, "4096x1024", c),
            lambda v, lim=lim: v <= lim)
        add(f"{wl} 4096x1024", "numpy ÷ time ≥ 4", lambda c, wl=wl: _ratio(res, wl, "4096x1024", "numpy", c),
            lambda v: v >= 4)
    for wl in ("relu(x@W+b)", "gelu(x@W+b)"):
        add(f"{wl} 512x1024@1024x1024", "time / BLAS alone ≤ 1.05",
            lambda c, wl=wl: _ratio(res, wl, "512x1024@1024x1024", c, "BLAS matmul alone"), lambda v: v <= 1.05,
            cands=("fusebind", "fb-kernel BLAS+epilogue"))
    for wl in ("gelu_tanh(x)", "sqrt(exp(x/2)+log(x²+1))"):
        add(f"two threads, {wl} 1e7", "1 thread ÷ 2 threads ≥ 1.7",
            lambda c, wl=wl: res.extra.get(f"threads:{wl}" if c == "fb-kernel" else f"threads-api:{wl}"),
            lambda v: v >= 1.7)
    add("call overhead, 16 elements", "per call ≤ 0.5 µs", lambda c: res.extra.get(f"call:16:{c}"),
        lambda v: v <= 0.5e-6, fmt_time)

    def vs(c: str, peer: str) -> float | None:
        a, b = res.extra.get(f"call:16:{c}"), res.extra.get(f"call:16:{peer}")
        return None if a is None or b is None else a / b
    add("call overhead, 16 elements", "time ÷ numba dispatch ≤ 1", lambda c: vs(c, "numba"), lambda v: v <= 1)
    add("call overhead, 16 elements", "time ÷ numpy ufunc expr < 1", lambda c: vs(c, "numpy ufunc expr"),
        lambda v: v < 1)
    add("compile latency, elementwise", "≤ 30 ms (lowering path)",
        lambda c: res.extra.get("compile:elementwise:relu(a*b+c)") if c == "fb-kernel" else None,
        lambda v: v <= 0.030, fmt_time)
    add("compile latency, row reduction", "≤ 60 ms (softmax)",
        lambda c: res.extra.get("compile:row reduction:softmax(x, -1)") if c == "fb-kernel" else None,
        lambda v: v <= 0.060, fmt_time)
    no_mlir = res.extra.get("cache:mlir_imported") is False
    first = res.extra.get("cache:max_hit_s")
    add("cache hit in a new process", "≤ 3 ms per kernel, no `import mlir` (fb-kernel: worst kernel after the "
        f"first; the first also pays llvmlite + LLJIT start-up: {fmt_time(first)}; API: first call incl. trace)",
        lambda c: (res.extra.get("cache:fb_first_call_s") if res.extra.get("cache:fb_mlir_imported") is False
                   else None) if c == "fusebind" else
        (res.extra.get("cache:max_hit_after_first_s") if no_mlir else None),
        lambda v: v <= 0.003, fmt_time)

    def extra_mem(c: str) -> float | None:
        m = res.extra.get(f"mem:{c}")
        if m is None:
            return None
        peak, rss, out_bytes = m
        alloc_out = out_bytes if c == "fusebind" else 0  # the API allocates its result
        return max(peak - alloc_out, rss - alloc_out, 0) / 2**20
    add("temporaries (relu chain)", "extra memory beyond inputs+output ≈ 0 MiB (≤ 1 MiB)", extra_mem,
        lambda v: v <= 1.0, lambda v: "—" if v is None else f"{v:.1f} MiB")
    rows += first_call_summary(res)
    return markdown_table(["target", "criterion", "fusebind (API)", "fb-kernel (lowering)", "met? (API / kernel)"],
                          rows)


# ---------------------------------------------------------------------------------------------

def write_block(path: Path, block: str) -> None:
    """Replace the suite block in `path` (create the file or append the block if absent)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    new = f"{BEGIN}\n{block.rstrip()}\n{END}"
    if BEGIN in text and END in text and text.index(BEGIN) < text.index(END):
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + new + tail
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + new + "\n"
    path.write_text(text, encoding="utf-8")


def _children_cpu() -> float:
    """CPU seconds of this process and every finished child (the measuring processes): on a loaded host the wall time of a
    section grows with the load, this does not, so it says what the section costs on a quiet one."""
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_CHILDREN),
                                                 resource.getrusage(resource.RUSAGE_SELF)))


def run_suite(cfg: Config, command: str, parent_env: dict[str, str | None], first_calls: str = "all") -> str:
    res = Results()
    md: list[str] = []
    t0 = time.perf_counter()
    took: list[str] = []
    # --first-calls quick: that section's quick set (4 workloads, 1 sample each: each sample is fresh
    # processes compiling cold, ~1/10 of the full section's time) inside an otherwise full run.
    first_cfg = dataclasses.replace(cfg, quick=True) if first_calls == "quick" else cfg
    for title, section, scfg in (("workloads", run_workloads, cfg), ("threads", run_threads, cfg),
                                 ("call overhead", run_call_overhead, cfg),
                                 ("compile latency and cache", run_compile, cfg),
                                 ("first calls (API) against jax.jit", run_first_calls, first_cfg),
                                 ("temporaries", run_temporaries, cfg)):
        print(f"{title} …", flush=True)
        ts, cpu = time.perf_counter(), _children_cpu()
        section(scfg, res, md)
        took.append(f"{title} {time.perf_counter() - ts:.0f} s ({_children_cpu() - cpu:.0f} s CPU)")
        print(f"  {took[-1]}", flush=True)
    elapsed = time.perf_counter() - t0
    fair = ("Fairness: all peers compute float32. numexpr constants are float32 variables (literals and "
            "maximum() would promote to float64) and its output is written with casting='safe', so a promoted "
            "expression would be refused, not timed. numpy's float32 exp/log/tanh are SIMD already. numba "
            "kernels use fastmath=True. Single-thread sections limit BLAS and numexpr to 1 thread; onnxruntime "
            "is shown with intra_op_num_threads=1 (ORT 1t) and its default (ORT default, both cores). Times "
            "are per call; each sample is a batch of calls lasting ≥ 0.2 ms; min and median over interleaved "
            "rounds (warm-up excluded, order rotated every round). Ratios are taken within this run.")
    header = [f"## Benchmark suite ({'quick' if cfg.quick else 'full'} run, {elapsed:.0f} s; "
              f"{cfg.budget_s:g} s of rounds per workload size and child, {cfg.rounds[0]}-{cfg.rounds[1]} rounds)",
              "",
              environment_header(command, parent_env), f"- sections: {', '.join(took)}; load average at the "
              f"end {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[2]:.2f} (15 min)", "", fair, "",
              "Candidates: **fusebind** = the public API `fb.jit(fn)(*arrays)`; **fb-kernel** = the same math "
              "traced to prim MLIR and compiled by `fusebind.lowering`, called through ctypes with descriptors "
              "built once (the generated code without the API in front of it).", ""]
    summ = ["### Summary against PERFORMANCE.md targets", "", summary(res), "",
            "### Peers ÷ fusebind (each workload size where both results are ✓; > 1: fusebind is faster)", "",
            peer_summary(res), "",
            "### Verdicts: fusebind fastest, or behind whom by how much (each peer against the fusebind of its "
            "own child; profiles and what would close each gap are under each workload's tables)", "",
            verdict_table(verdicts(res)), ""]
    return "\n".join(header + summ + md)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds, drop 1e7 sizes except relu(a*b+c) (< 2 min)")
    ap.add_argument("--budget", type=float, metavar="SECONDS",
                    help="seconds the interleaved rounds of one workload size aim at per child (default 1.0, "
                         "--quick 0.25); rounds stay >= 7 (--quick 3), so min and median keep their samples")
    ap.add_argument("--first-calls", choices=("all", "quick"), default="all",
                    help="the first-call section (fresh processes compiling cold): every workload x 3 samples "
                         "(all, the default of a full run) or its quick set (4 workloads x 1)")
    ap.add_argument("--only", metavar="PATTERN", help="run only workloads/sections matching (substring or glob)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "RESULTS.md"),
                    help="results file; the suite replaces its block between the suite markers")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--parent-env", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--command", default="python -m bench.suite", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    if not args.child:
        parent_env = {k: os.environ.get(k) for k in REMOVED_ENV}
        shown = " ".join(["python -m bench.suite", *argv_list])
        cmd = [sys.executable, "-m", "bench.suite", *argv_list, "--child", "--parent-env", json.dumps(parent_env),
               "--command", shown]
        return subprocess.call(cmd, env=child_env(), cwd=str(Path(__file__).resolve().parent.parent))
    cfg = Config(quick=args.quick, only=args.only, budget=args.budget)
    block = run_suite(cfg, args.command, json.loads(args.parent_env), args.first_calls)
    print(block)
    write_block(Path(args.out), block)
    print(f"\nwrote the suite block of {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
