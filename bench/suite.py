"""The benchmark suite: every PERFORMANCE.md target, side by side, interleaved, as ratios.

Run:  python -m bench.suite [--quick] [--only PATTERN] [--out bench/RESULTS.md]
  or  python bench/suite.py …

Owns: the sections (workload tables, two threads, call overhead, compile
latency and new-process cache hits, temporaries), the summary against the
targets, and writing its block between `<!-- suite:begin -->` and
`<!-- suite:end -->` in the results file (the rest of the file is left alone).

The measuring process is always a child started with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE removed from its environment (they can select a slower
OpenBLAS kernel); the header records what the parent had. Every candidate's
result is checked against numpy before it is timed; a wrong one is marked ✗.
Single-thread comparisons limit BLAS to one thread (threadpoolctl) and numexpr
to one thread; numba's single-thread kernel is compiled without `parallel`.
"""

from __future__ import annotations

import os

if os.environ.get(PIN_ENV := "FB_BENCH_PIN_CORE"):  # the one-core child: pinned before numpy/BLAS/jax/torch
    os.sched_setaffinity(0, {int(os.environ[PIN_ENV])})  # start a thread, so every thread inherits the mask

import argparse
import dataclasses
import fnmatch
import json
import math
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

if __package__ in (None, ""):  # `python bench/suite.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench import peers
from bench.bench_compile import child_env, first_call_summary, run_child, run_compile, run_first_calls
from bench.timing import environment_header, fmt_ratio, fmt_time, markdown_table, measure_interleaved
from bench.workloads import WORKLOADS, Workload, prim_func_text, workload

BEGIN, END = "<!-- suite:begin -->", "<!-- suite:end -->"
REMOVED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
QUICK_KEEP_LARGE = "relu(a*b+c)"
#: Candidates that are bounds to compare against, not the workload's math: never checked against numpy.
REFERENCE_KERNELS = ("SOL", "empty", "BLAS")  # --quick drops 1e7 / 4096x1024 except for this workload


@dataclass
class Config:
    quick: bool
    only: str | None

    @property
    def budget_s(self) -> float:
        return 0.25 if self.quick else 1.0

    @property
    def rounds(self) -> tuple[int, int]:
        return (3, 12) if self.quick else (7, 40)

    def selected(self, *names: str) -> bool:
        if not self.only:
            return True
        pat = self.only if any(c in self.only for c in "*?[") else f"*{self.only}*"
        return any(fnmatch.fnmatch(n.lower(), pat.lower()) for n in names)

    def sizes(self, w: Workload) -> list[str]:
        out = list(w.sizes)
        if self.quick and w.name != QUICK_KEEP_LARGE:
            out = [s for s in out if s not in ("1e7", "4096x1024", "T=256,D=512", "T=1024,d=64")]
        return out


@dataclass
class Row:
    """One measured candidate (or an unavailable one) for one workload size."""

    workload: str
    size: str
    name: str
    min: float | None = None
    median: float | None = None
    check: str = ""
    note: str = ""
    #: "1": the one-core table (the child pinned to one core); "all": every peer at its default threads
    cores: str = "1"


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, workload_name: str, size: str, name: str, cores: str = "1") -> Row | None:
        for r in self.rows:
            if (r.workload == workload_name and r.size == size and r.name == name and r.min is not None
                    and r.cores == cores):
                return r
        return None


# ---------------------------------------------------------------------------------------------

@contextmanager
def single_thread_peers() -> Iterator[None]:
    """BLAS and numexpr on one thread for the single-thread comparisons (restored after)."""
    with ExitStack() as stack:
        try:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
        except ImportError:
            pass
        try:
            import numexpr as ne

            old = ne.set_num_threads(1)
            stack.callback(ne.set_num_threads, old)
        except ImportError:
            pass
        yield


def check(c: peers.Candidate, ref: np.ndarray, w: Workload) -> str:
    """'✓' or '✗ <why>': the candidate's result against the numpy reference (values and float32)."""
    try:
        got = np.asarray(c.run()).copy()
    except Exception as exc:
        return f"✗ raised {type(exc).__name__}: {str(exc)[:80]}"
    if got.shape != ref.shape:
        return f"✗ shape {got.shape} != {ref.shape}"
    if got.dtype != np.float32:
        return f"✗ dtype {got.dtype} (expected float32)"
    if not np.allclose(got, ref, rtol=w.rtol, atol=w.atol, equal_nan=True):
        err = float(np.nanmax(np.abs(got.astype(np.float64) - ref)))
        return f"✗ max abs err {err:.3g}"
    return "✓"


def measure(built: Sequence[peers.Built], ref: np.ndarray, w: Workload, size: str, cfg: Config,
            out: np.ndarray | None = None) -> list[Row]:
    """Check each candidate (the shared `out` is poisoned with NaN first), then time them interleaved."""
    rows: list[Row] = []
    cands: dict[str, Callable[[], object]] = {}
    for b in built:
        if isinstance(b, peers.Unavailable):
            rows.append(Row(w.name, size, b.name, check=f"unavailable ({b.reason})"))
            continue
        if out is not None:
            out.fill(np.nan)
        if b.name.startswith(REFERENCE_KERNELS):
            verdict = "n/a (reference kernel, not the workload's math)"
        else:
            verdict = check(b, ref, w)
        rows.append(Row(w.name, size, b.name, check=verdict, note=b.note))
        cands[b.name] = b.run
    lo, hi = cfg.rounds
    timings = measure_interleaved(cands, budget_s=cfg.budget_s, lo=lo, hi=hi)
    for r in rows:
        if r.name in timings:
            r.min, r.median = timings[r.name].min, timings[r.name].median
    return rows


def candidates_for(w: Workload, xs: list[np.ndarray], out: np.ndarray, *, with_sol: bool = True,
                   numba_jit: bool = True, cores: str = "1", compilers: bool = True,
                   torch_compile: bool = True) -> list[peers.Built]:
    """Every candidate for one workload size.

    cores="1": the one-core table (SOL kernels if `with_sol` and the workload has one, ORT at one
    thread, fusebind at threads=1); cores="all": every peer at its default threads (numba parallel,
    ORT default, fusebind's default). `compilers` adds the jax.jit and torch.compile columns;
    `numba_jit=False` interprets the numba kernel and `torch_compile=False` runs torch eagerly (correctness
    tests without compile time).
    """
    one = cores == "1"
    built: list[peers.Built] = [peers.numpy_candidate(w, xs), peers.numpy_out_candidate(w, xs, out)]
    if w.group in ("matmul",):
        if one:
            built += [peers.blas_alone_candidate(xs, out), peers.fb_blas_epilogue_candidate(w, xs, out)]
    elif w.group in ("mlp", "attention", "swiglu", "mha"):
        if one:
            built += [peers.fb_block_candidate(w, xs, out)]
    else:
        built += [peers.numexpr_candidate(w, xs, out),
                  peers.numba_candidate(w, xs, out, jit=numba_jit, parallel=not one, threads=None)]
        if one:
            built += [peers.fb_kernel_candidate(w, xs, out)]
            if w.has_sol and with_sol:
                built += peers.sol_candidates(w, xs, out)
    built += [peers.onnxruntime_candidate(w, xs, threads=1 if one else 0)]
    if compilers:
        from bench.peers_jax import jax_candidate
        from bench.peers_torch import torch_candidate

        built += [jax_candidate(w, xs), torch_candidate(w, xs, compile=torch_compile)]
    built += [peers.fusebind_candidate(w, xs, threads=1 if one else None)]
    return built


def sol_of(rows: Sequence[Row]) -> Row | None:
    sols = [r for r in rows if r.name.startswith("SOL") and r.min is not None]
    return min(sols, key=lambda r: r.min or 0.0) if sols else None


def workload_table(w: Workload, rows: list[Row]) -> str:
    """One table per workload: every size x candidate, times and ratios."""
    out = []
    by_size: dict[str, list[Row]] = {}
    for r in rows:
        by_size.setdefault(r.size, []).append(r)
    for size, rs in by_size.items():
        sol = sol_of(rs)
        base = {n: next((r for r in rs if r.name == n and r.min), None)
                for n in ("numpy", "fb-kernel", "fusebind", "BLAS matmul alone")}
        for r in rs:
            def rel(other: Row | None, inverse: bool = False) -> str:
                if r.min is None or other is None or other.min is None:
                    return "—"
                return fmt_ratio(other.min / r.min if inverse else r.min / other.min)
            ref_fb = base["fusebind"] or base["fb-kernel"]
            out.append((size, r.name, fmt_time(r.min) if r.min else r.check, fmt_time(r.median),
                        rel(sol) if sol else (rel(base["BLAS matmul alone"]) if base["BLAS matmul alone"] else "—"),
                        rel(base["numpy"], inverse=True), rel(ref_fb), r.check if r.min else "", r.note))
    headers = ["size", "candidate", "min", "median", "time/SOL" if w.has_sol else "time/BLAS",
               "numpy ÷ time", "time ÷ fusebind", "check", "note"]
    return markdown_table(headers, out)


def measure_workloads(cfg: Config, cores: str) -> list[Row]:
    """Every selected workload x size x candidate, in this process (a child: pinned when cores="1")."""
    rows: list[Row] = []
    for w in WORKLOADS:
        if not cfg.selected(w.name, w.group):
            continue
        for size in cfg.sizes(w):
            xs = w.inputs(size)
            ref = w.reference(*xs)
            out = np.empty(ref.shape, np.float32)
            with single_thread_peers() if cores == "1" else ExitStack():
                built = candidates_for(w, xs, out, cores=cores)
                got = measure(built, ref, w, size, cfg, out)
            for r in got:
                r.cores = cores
            rows += got
            print(f"  [{cores} core{'s' if cores == 'all' else ''}] {w.name} {size}: "
                  + ", ".join(f"{r.name} {fmt_time(r.min)}" for r in got), flush=True)
    return rows


def pin_core() -> int:
    """The core the one-core child is pinned to: the last in this process's affinity mask."""
    return max(os.sched_getaffinity(0))


def workload_rows_in_child(cfg: Config, cores: str) -> tuple[list[Row], dict[str, Any]]:
    """Run `measure_workloads` in a fresh child: pinned to `pin_core()` from its first line when cores="1"
    (thread flags are not honoured by every peer: XLA uses every core it may run on), at the defaults
    otherwise. Returns its rows and what it saw (affinity, thread counts)."""
    with tempfile.TemporaryDirectory(prefix="fb-suite-rows-") as tmp:
        path = Path(tmp) / "rows.json"
        cmd = [sys.executable, "-m", "bench.suite", "--workloads-child", cores, "--rows-out", str(path)]
        cmd += ["--quick"] if cfg.quick else []
        cmd += ["--only", cfg.only] if cfg.only else []
        env = child_env({PIN_ENV: str(pin_core())} if cores == "1" else None)
        if cores != "1":
            env.pop(PIN_ENV, None)
        code = subprocess.call(cmd, env=env, cwd=str(Path(__file__).resolve().parent.parent))
        if code != 0 or not path.exists():
            raise RuntimeError(f"the {cores}-core workload child failed (exit {code})")
        data = json.loads(path.read_text(encoding="utf-8"))
    return [Row(**r) for r in data["rows"]], data["seen"]


def run_workloads(cfg: Config, res: Results, out_md: list[str]) -> None:
    selected = [w for w in WORKLOADS if cfg.selected(w.name, w.group)]
    if not selected:
        return
    seen: dict[str, dict[str, Any]] = {}
    for cores in ("1", "all"):
        rows, seen[cores] = workload_rows_in_child(cfg, cores)
        res.rows += rows
    res.extra["workload_children"] = seen
    out_md += ["### How the workload tables were run", "",
               f"One core: a child process pinned with `os.sched_setaffinity` to core {seen['1'].get('affinity')} "
               "before numpy, BLAS, jax or torch start a thread (XLA does not honour its one-thread flags); BLAS "
               "and numexpr are also limited to one thread. All cores: a second child, every peer at its default "
               f"(affinity {seen['all'].get('affinity')}; numba parallel, ORT default threads, fusebind's default "
               "threads). jax.jit: XLA CPU, device-resident inputs, `block_until_ready`. torch.compile: Inductor "
               "default mode, `dynamic=False` per size, `torch.from_numpy` views, `torch.inference_mode()`.", ""]
    for w in selected:
        sol_note = ("SOL = the faster of np.copyto and a numba loop with the same full-size reads and one write"
                    if w.has_sol else "ratio column: time / np.matmul alone" if w.group == "matmul" else "")
        out_md += [f"### {w.name} ({w.group})", "", (w.note + ". " if w.note else "") + sol_note, ""]
        for cores, title in (("1", "One core"), ("all", "All cores")):
            rows = [r for r in res.rows if r.workload == w.name and r.cores == cores]
            if rows:
                out_md += [f"**{title}**", "", workload_table(w, rows), ""]


def workloads_child_main(cfg: Config, cores: str, rows_out: Path) -> int:
    """The `--workloads-child` entry: measure, then write the rows and what this process saw as JSON."""
    rows = measure_workloads(cfg, cores)
    seen: dict[str, Any] = {"affinity": sorted(os.sched_getaffinity(0))}
    try:
        import torch

        seen["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    rows_out.write_text(json.dumps({"rows": [dataclasses.asdict(r) for r in rows], "seen": seen}), encoding="utf-8")
    return 0


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


#: The peers of the "Peers ÷ fusebind" summary, per table (one core, all cores).
SUMMARY_PEERS = {"1": ("numpy", "numpy out=", "numexpr", "numba", "ORT 1t", "XLA (jax.jit)",
                       "Inductor (torch.compile)"),
                 "all": ("numpy", "numpy out=", "numexpr", "numba parallel", "ORT default", "XLA (jax.jit)",
                         "Inductor (torch.compile)")}


def peer_ratios(res: Results, peer: str, cores: str) -> list[tuple[str, float]]:
    """(workload size, peer time ÷ fusebind time) wherever both were measured and checked ✓."""
    out = []
    for r in res.rows:
        if r.cores != cores or r.name != "fusebind" or r.min is None or r.check != "✓":
            continue
        p = res.get(r.workload, r.size, peer, cores)
        if p is not None and p.check == "✓" and p.min:
            out.append((f"{r.workload} {r.size}", p.min / r.min))
    return out


def peer_summary(res: Results) -> str:
    """Per peer and table: the geomean of peer/fusebind over the workload sizes, and the minimum (where)."""
    rows = []
    for cores, title in (("1", "one core"), ("all", "all cores")):
        for peer in SUMMARY_PEERS[cores]:
            rs = peer_ratios(res, peer, cores)
            if not rs:
                rows.append((title, peer, "—", "—", "", 0))
                continue
            geo = math.exp(sum(math.log(v) for _, v in rs) / len(rs))
            where, low = min(rs, key=lambda t: t[1])
            res.extra[f"peers:{cores}:{peer}"] = (geo, low, where)
            rows.append((title, peer, fmt_ratio(geo), fmt_ratio(low), where, len(rs)))
    return markdown_table(["table", "peer", "geomean peer ÷ fusebind", "minimum", "minimum at", "sizes"], rows)


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


def run_suite(cfg: Config, command: str, parent_env: dict[str, str | None]) -> str:
    res = Results()
    md: list[str] = []
    t0 = time.perf_counter()
    print("workloads …", flush=True)
    run_workloads(cfg, res, md)
    print("threads …", flush=True)
    run_threads(cfg, res, md)
    print("call overhead …", flush=True)
    run_call_overhead(cfg, res, md)
    print("compile latency and cache …", flush=True)
    run_compile(cfg, res, md)
    print("first calls (API) against jax.jit …", flush=True)
    run_first_calls(cfg, res, md)
    print("temporaries …", flush=True)
    run_temporaries(cfg, res, md)
    elapsed = time.perf_counter() - t0
    fair = ("Fairness: all peers compute float32. numexpr constants are float32 variables (literals and "
            "maximum() would promote to float64) and its output is written with casting='safe', so a promoted "
            "expression would be refused, not timed. numpy's float32 exp/log/tanh are SIMD already. numba "
            "kernels use fastmath=True. Single-thread sections limit BLAS and numexpr to 1 thread; onnxruntime "
            "is shown with intra_op_num_threads=1 (ORT 1t) and its default (ORT default, both cores). Times "
            "are per call; each sample is a batch of calls lasting ≥ 0.2 ms; min and median over interleaved "
            "rounds (warm-up excluded, order rotated every round). Ratios are taken within this run.")
    header = [f"## Benchmark suite ({'quick' if cfg.quick else 'full'} run, {elapsed:.0f} s)", "",
              environment_header(command, parent_env), "", fair, "",
              "Candidates: **fusebind** = the public API `fb.jit(fn)(*arrays)`; **fb-kernel** = the same math "
              "traced to prim MLIR and compiled by `fusebind.lowering`, called through ctypes with descriptors "
              "built once (the generated code without the API in front of it).", ""]
    summ = ["### Summary against PERFORMANCE.md targets", "", summary(res), "",
            "### Peers ÷ fusebind (each workload size where both results are ✓; > 1: fusebind is faster)", "",
            peer_summary(res), ""]
    return "\n".join(header + summ + md)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds, drop 1e7 sizes except relu(a*b+c) (< 2 min)")
    ap.add_argument("--only", metavar="PATTERN", help="run only workloads/sections matching (substring or glob)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "RESULTS.md"),
                    help="results file; the suite replaces its block between the suite markers")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workloads-child", choices=("1", "all"), help=argparse.SUPPRESS)
    ap.add_argument("--rows-out", help=argparse.SUPPRESS)
    ap.add_argument("--parent-env", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--command", default="python -m bench.suite", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    if args.workloads_child:
        return workloads_child_main(Config(quick=args.quick, only=args.only), args.workloads_child,
                                    Path(args.rows_out))
    if not args.child:
        parent_env = {k: os.environ.get(k) for k in REMOVED_ENV}
        shown = " ".join(["python -m bench.suite", *argv_list])
        cmd = [sys.executable, "-m", "bench.suite", *argv_list, "--child", "--parent-env", json.dumps(parent_env),
               "--command", shown]
        return subprocess.call(cmd, env=child_env(), cwd=str(Path(__file__).resolve().parent.parent))
    cfg = Config(quick=args.quick, only=args.only)
    block = run_suite(cfg, args.command, json.loads(args.parent_env))
    print(block)
    write_block(Path(args.out), block)
    print(f"\nwrote the suite block of {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
