"""The workload tables: every peer on every workload size, at one core and at all cores.

Run as a child of the suite:
  python -m bench.peers_tables {1|all} ROWS.json [--group G] [--quick] [--only PATTERN]

Owns: the suite's records (`Config`, `Row`, `Results`), the check of a candidate against numpy
(`check`), the interleaved measurement of one size (`measure`), which candidates each table has
(`candidates_for`), the per-workload markdown tables, the children that measure them
(`workload_rows_in_child`: the one-core child is pinned with `os.sched_setaffinity` by the first lines
of this module, before numpy, BLAS, jax or torch start a thread; the all-core children, one per
`ALL_CORE_GROUPS` entry with fusebind beside each, leave every peer at its default), and the
peers ÷ fusebind summary (geomean and minimum per peer and table, each ratio within one child).
Must not: write the results file (suite.py) or time anything itself (timing.py).
"""

from __future__ import annotations

import os

#: Set by the suite for the one-core child: the core to pin to. Read before any import that can start a
#: thread (numpy's OpenBLAS sizes its pool at load), so every later thread inherits the one-core mask.
PIN_ENV = "FB_BENCH_PIN_CORE"
if os.environ.get(PIN_ENV):
    os.sched_setaffinity(0, {int(os.environ[PIN_ENV])})

import argparse  # noqa: E402 - after the pin, on purpose
import dataclasses  # noqa: E402
import fnmatch  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from contextlib import ExitStack, contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Iterator, Sequence  # noqa: E402

import numpy as np  # noqa: E402

from bench import peers  # noqa: E402
from bench.bench_compile import child_env  # noqa: E402
from bench.suite_verdicts import behind_in_child, behind_section, profile_fusebind, verdicts  # noqa: E402
from bench.timing import fmt_ratio, fmt_time, markdown_table, measure_interleaved  # noqa: E402
from bench.workloads import WORKLOADS, Workload  # noqa: E402

#: The large sizes --quick leaves out, for every workload but QUICK_KEEP_LARGE.
QUICK_DROP = ("1e7", "4096x1024", "T=256,D=512", "T=1024,d=64", "T=256,D=512,F=1024", "B=2,H=4,S=512",
              "B=2,H=4,S=2048", "2x4x(512x64@64x512)")
QUICK_KEEP_LARGE = "relu(a*b+c)"
#: The name of the row that stands for a size whose measuring child crashed (its check says where).
CRASHED = "(measuring child)"
#: How many times a crashed workload child is restarted (each restart skips the size it died in).
MAX_CHILD_RESTARTS = 6
#: "<workload>|<size>": the child aborts when it reaches that size (test/bench: the crash recovery)
CRASH_ENV = "FB_BENCH_CRASH_AT"
#: Candidates that are bounds to compare against, not the workload's math: never checked against numpy.
REFERENCE_KERNELS = ("SOL", "empty", "BLAS")
#: The all-core table runs one child per group, each with fusebind beside it as the anchor of its ratios:
#: thread runtimes in one process fight on few cores (torch's OpenMP and XLA's pool spin after a region,
#: and a split kernel's second thread then waits for a core), which measures the neighbours, not the peer.
#: "alone" is fusebind with no other runtime's threads in its process (what its own split costs then).
#: ORT has a child of its own: its intra-op workers spin after every run, and beside them fusebind's 2-thread
#: split measured 357 ms instead of 0.73 ms on the loaded 2-core machine (numpy's median 330 ms for 2 ms).
ALL_CORE_GROUPS = {"base": ("numpy", "numpy out=", "numexpr"), "ort": ("ORT default",), "numba": ("numba parallel",),
                   "xla": ("XLA (jax.jit)",), "inductor": ("Inductor (torch.compile)",), "alone": ()}


@dataclass
class Config:
    quick: bool
    only: str | None
    #: seconds the interleaved rounds of one workload size aim at in one child (None: 0.25 quick, 1.0 full);
    #: the round count stays within `rounds`, so a smaller budget never drops below its minimum of rounds
    budget: float | None = None

    @property
    def budget_s(self) -> float:
        return self.budget if self.budget is not None else 0.25 if self.quick else 1.0

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
            out = [s for s in out if s not in QUICK_DROP]
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
    #: the all-core child that measured it (ALL_CORE_GROUPS); "" in the one-core table
    group: str = ""
    #: fusebind's rows where a peer of the same child was faster: its plan's step profile (suite_verdicts)
    profile: dict[str, Any] | None = None


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
            out: np.ndarray | None = None, progress: Callable[[str], None] = lambda stage: None) -> list[Row]:
    """Check each candidate (the shared `out` is poisoned with NaN first), then time them interleaved.
    `progress(stage)` is told what runs next (a child records it: a crash then names the candidate)."""
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
            progress(f"checking {b.name}")
            verdict = check(b, ref, w)
        rows.append(Row(w.name, size, b.name, check=verdict, note=b.note))
        cands[b.name] = b.run
    lo, hi = cfg.rounds
    progress("timing " + ", ".join(cands))
    timings = measure_interleaved(cands, budget_s=cfg.budget_s, lo=lo, hi=hi)
    for r in rows:
        if r.name in timings:
            r.min, r.median = timings[r.name].min, timings[r.name].median
    return rows


def candidates_for(w: Workload, xs: list[np.ndarray], out: np.ndarray, *, with_sol: bool = True,
                   numba_jit: bool = True, cores: str = "1", compilers: bool = True,
                   torch_compile: bool = True, group: str | None = None) -> list[peers.Built]:
    """Every candidate for one workload size.

    cores="1": the one-core table (SOL kernels if `with_sol` and the workload has one, ORT at one
    thread, fusebind at threads=1); cores="all": every peer at its default threads (numba parallel,
    ORT default, fusebind's default). `compilers` adds the jax.jit and torch.compile columns;
    `numba_jit=False` interprets the numba kernel and `torch_compile=False` runs torch eagerly (correctness
    tests without compile time). `group` (all cores): only that ALL_CORE_GROUPS entry's peers, and fusebind.
    """
    one = cores == "1"
    keep = set(ALL_CORE_GROUPS[group]) | {"fusebind"} if group else None
    built: list[peers.Built] = [peers.numpy_candidate(w, xs), peers.numpy_out_candidate(w, xs, out)]
    # numexpr and numba are in every table: where they cannot express the workload, their cell says why.
    built += [peers.numexpr_candidate(w, xs, out)]
    if keep is None or "numba parallel" in keep:  # (its jit is seconds: only where it is measured)
        built += [peers.numba_candidate(w, xs, out, jit=numba_jit, parallel=not one, threads=None)]
    if w.group == "matmul":
        if one:
            built += [peers.blas_alone_candidate(xs, out), peers.fb_blas_epilogue_candidate(w, xs, out)]
    elif w.group in ("mlp", "attention", "swiglu", "mha"):
        if one:
            built += [peers.fb_block_candidate(w, xs, out)]
    elif w.group != "bmm" and one:  # (a batched matmul's lowering-direct form is the API's own plan)
        built += [peers.fb_kernel_candidate(w, xs, out)]
        if w.has_sol and with_sol:
            built += peers.sol_candidates(w, xs, out)
    built += [peers.onnxruntime_candidate(w, xs, threads=1 if one else 0)]
    if compilers and (keep is None or "XLA (jax.jit)" in keep):
        from bench.peers_jax import jax_candidate

        built += [jax_candidate(w, xs)]
    if compilers and (keep is None or "Inductor (torch.compile)" in keep):
        from bench.peers_torch import torch_candidate

        built += [torch_candidate(w, xs, compile=torch_compile)]
    if keep is not None:
        built = [b for b in built if b.name in keep]
        if group != "alone" and not any(isinstance(b, peers.Candidate) for b in built):
            return built  # the group's peers all say why they are absent: no fusebind to time beside them
    return built + [peers.fusebind_candidate(w, xs, threads=1 if one else None)]


def sol_of(rows: Sequence[Row]) -> Row | None:
    sols = [r for r in rows if r.name.startswith("SOL") and r.min is not None]
    return min(sols, key=lambda r: r.min or 0.0) if sols else None


def anchor_of(r: Row, rows: Sequence[Row]) -> Row | None:
    """The fusebind row measured in the same child as `r` (same workload, size, table and group)."""
    return next((a for a in rows if a.name == "fusebind" and a.min and a.workload == r.workload
                 and a.size == r.size and a.cores == r.cores and a.group == r.group), None)


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
            ref_fb = anchor_of(r, rs) or base["fusebind"] or base["fb-kernel"]
            label = r.name + ("" if r.group in ("", "base") or r.name != "fusebind" else
                              " (alone in its child)" if r.group == "alone" else f" (beside {r.group})")
            out.append((size, label, fmt_time(r.min) if r.min else r.check, fmt_time(r.median),
                        rel(sol) if sol else (rel(base["BLAS matmul alone"]) if base["BLAS matmul alone"] else "—"),
                        rel(base["numpy"], inverse=True), rel(ref_fb), r.check if r.min else "", r.note))
    headers = ["size", "candidate", "min", "median", "time/SOL" if w.has_sol else "time/BLAS",
               "numpy ÷ time", "time ÷ fusebind", "check", "note"]
    return markdown_table(headers, out)


def measure_workloads(cfg: Config, cores: str, group: str | None = None, skip: Sequence[Sequence[str]] = (),
                      progress: Callable[[str, str, str], None] = lambda w, s, stage: None,
                      done: Callable[[list[Row]], None] = lambda rows: None) -> list[Row]:
    """Every selected workload x size x candidate, in this process (a child: pinned when cores="1"),
    but the (workload, size) pairs of `skip`; `progress` hears each stage, `done` the rows after each size."""
    rows: list[Row] = []
    skipped = {tuple(k) for k in skip}
    for w in WORKLOADS:
        if not cfg.selected(w.name, w.group):
            continue
        for size in cfg.sizes(w):
            if (w.name, size) in skipped:
                continue
            progress(w.name, size, "building candidates")
            if os.environ.get(CRASH_ENV) == f"{w.name}|{size}":  # the test of the restart: die like a segfault
                os.abort()
            xs = w.inputs(size)
            ref = w.reference(*xs)
            out = np.empty(ref.shape, np.float32)
            with single_thread_peers() if cores == "1" else ExitStack():
                built = candidates_for(w, xs, out, cores=cores, group=group)
                got = measure(built, ref, w, size, cfg, out, lambda stage: progress(w.name, size, stage))
                if behind_in_child(got, cores):  # profiled here, in the child and threads that timed it
                    progress(w.name, size, "profiling fusebind")
                    f = next((b.obj for b in built if b.name == "fusebind" and isinstance(b, peers.Candidate)), None)
                    fb_row = next(r for r in got if r.name == "fusebind")
                    fb_row.profile = profile_fusebind(f, xs) if f is not None else {"error": "no jit function"}
            for r in got:
                r.cores, r.group = cores, group or ""
            rows += got
            done(rows)
            print(f"  [{cores} core{'s' if cores == 'all' else ''}] {w.name} {size}: "
                  + ", ".join(f"{r.name} {fmt_time(r.min)}" for r in got), flush=True)
    return rows


def pin_core() -> int:
    """The core the one-core child is pinned to: the last in this process's affinity mask."""
    return max(os.sched_getaffinity(0))


def workload_rows_in_child(cfg: Config, cores: str, group: str | None = None) -> tuple[list[Row], dict[str, Any]]:
    """Run `measure_workloads` in a fresh child: pinned to `pin_core()` from its first line when cores="1"
    (thread flags are not honoured by every peer: XLA uses every core it may run on), at the defaults
    otherwise (one child per ALL_CORE_GROUPS `group`). Returns its rows and what it saw (affinity, threads)."""
    rows: list[Row] = []
    skip: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="fb-suite-rows-") as tmp:
        path, skip_path = Path(tmp) / "rows.json", Path(tmp) / "skip.json"
        cmd = [sys.executable, "-m", "bench.peers_tables", cores, str(path), "--skip", str(skip_path)]
        cmd += (["--group", group] if group else []) + (["--quick"] if cfg.quick else [])
        cmd += ["--only", cfg.only] if cfg.only else []
        cmd += ["--budget", str(cfg.budget)] if cfg.budget is not None else []
        env = child_env({PIN_ENV: str(pin_core())} if cores == "1" else None)
        if cores != "1":
            env.pop(PIN_ENV, None)
        for _ in range(MAX_CHILD_RESTARTS + 1):
            skip_path.write_text(json.dumps(skip), encoding="utf-8")
            code = subprocess.call(cmd, env=env, cwd=str(Path(__file__).resolve().parent.parent))
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"rows": [], "seen": {}}
            got = [Row(**r) for r in data["rows"]]
            rows += got
            skip += [(r.workload, r.size) for r in got]
            if code == 0:
                return rows, data["seen"]
            # A crash (a segfault in a peer or in fusebind) costs that size, not the run: say where, go on.
            current = json.loads(path.with_suffix(".current").read_text(encoding="utf-8")) \
                if path.with_suffix(".current").exists() else None
            if current is None:  # died before measuring anything: a broken tree, not one size
                break
            wl, size, stage = current
            if stage == "finished":  # every row was written; it died on the way out (a runtime's atexit)
                return rows, {**data["seen"], "exit": code}
            why = f"signal {-code}" if code < 0 else f"exit {code}"
            print(f"  [{cores} {group or ''}] the child died ({why}) at {wl} {size}: {stage}; restarting", flush=True)
            rows.append(Row(wl, size, CRASHED, check=f"✗ the measuring child died ({why}) while {stage}; the "
                            "other sizes were measured in a fresh child", cores=cores, group=group or ""))
            skip.append((wl, size))
    why = f"the {cores}-core {group or ''} workload child failed (exit {code}) {MAX_CHILD_RESTARTS + 1} times " \
          "or before it started measuring"
    print(f"  {why}", flush=True)
    return rows, {"error": why}


def run_workloads(cfg: Config, res: Results, out_md: list[str]) -> None:
    selected = [w for w in WORKLOADS if cfg.selected(w.name, w.group)]
    if not selected:
        return
    seen: dict[str, dict[str, Any]] = {}
    for cores, group in (("1", None), *(("all", g) for g in ALL_CORE_GROUPS)):
        rows, seen[group or cores] = workload_rows_in_child(cfg, cores, group)
        res.rows += rows
    res.extra["workload_children"] = seen
    failed = [f"{k}: {v['error']}" for k, v in seen.items() if "error" in v]
    if failed:
        out_md += ["**Workload children that could not finish**: " + "; ".join(failed), ""]
    out_md += ["### How the workload tables were run", "",
               f"One core: a child process pinned with `os.sched_setaffinity` to core {seen.get('1', {}).get('affinity')} "
               "before numpy, BLAS, jax or torch start a thread (XLA does not honour its one-thread flags); BLAS "
               "and numexpr are also limited to one thread. All cores: every peer at its default "
               f"(affinity {seen.get('base', {}).get('affinity')}; numba parallel, ORT default threads, fusebind's default "
               "threads), in one child per group (numpy/numexpr; ORT; numba; XLA; Inductor), each with fusebind "
               "beside it, interleaved, and its ratio taken against that fusebind: thread runtimes sharing one "
               "process on few cores slow each other down (OpenMP, ORT, OpenBLAS and XLA workers spin after a "
               "region); a last child runs fusebind alone. "
               f"OS threads at each child's end: {json.dumps({k: v.get('threads') for k, v in seen.items()})}. "
               "jax.jit: XLA CPU, device-resident inputs, `block_until_ready`. torch.compile: Inductor "
               "default mode, `dynamic=False` per size, `torch.from_numpy` views, `torch.inference_mode()`.", ""]
    vs = verdicts(res)
    for w in selected:
        sol_note = ("SOL = the faster of np.copyto and a numba loop with the same full-size reads and one write"
                    if w.has_sol else "ratio column: time / np.matmul alone" if w.group == "matmul" else "")
        out_md += [f"### {w.name} ({w.group})", "", (w.note + ". " if w.note else "") + sol_note, ""]
        for cores, title in (("1", "One core"), ("all", "All cores")):
            rows = [r for r in res.rows if r.workload == w.name and r.cores == cores]
            if rows:
                out_md += [f"**{title}**", "", workload_table(w, rows), ""]
        mine = [v for v in vs if v[0] == w.name]
        out_md += [f"**Verdict**: " + "; ".join(f"{size} {'one core' if c == '1' else 'all cores'}: {v['text']}"
                                                for _, size, c, v in mine), ""]
        behind = behind_section(mine)
        if behind:
            out_md += ["**Where fusebind is behind**", "", *behind, ""]


def os_threads() -> int | None:
    """This process's OS threads now (every runtime's pool, not only Python's threads), from /proc."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Threads:")), None)
    except OSError:
        return None


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)  # atomic: a crash mid-write leaves the previous rows


def workloads_child_main(cfg: Config, cores: str, rows_out: Path, group: str | None = None,
                         skip_path: Path | None = None) -> int:
    """The child's entry: measure, writing the rows after each size and the stage it is at (a crash then
    loses one size), then the rows and what this process saw as JSON."""
    skip = json.loads(skip_path.read_text(encoding="utf-8")) if skip_path and skip_path.exists() else []

    def seen() -> dict[str, Any]:
        out: dict[str, Any] = {"affinity": sorted(os.sched_getaffinity(0)), "threads": os_threads()}
        if "torch" in sys.modules:  # (never imported just to ask)
            out["torch_threads"] = sys.modules["torch"].get_num_threads()
        return out

    def done(rows: list[Row]) -> None:
        _write_json(rows_out, {"rows": [dataclasses.asdict(r) for r in rows], "seen": seen()})

    rows = measure_workloads(cfg, cores, group, skip, lambda w, s, stage: _write_json(
        rows_out.with_suffix(".current"), [w, s, stage]), done)
    done(rows)
    _write_json(rows_out.with_suffix(".current"), [None, None, "finished"])
    return 0


#: The peers of the "Peers ÷ fusebind" summary, per table (one core, all cores).
SUMMARY_PEERS = {"1": ("numpy", "numpy out=", "numexpr", "numba", "ORT 1t", "XLA (jax.jit)",
                       "Inductor (torch.compile)"),
                 "all": ("numpy", "numpy out=", "numexpr", "numba parallel", "ORT default", "XLA (jax.jit)",
                         "Inductor (torch.compile)")}


def peer_ratios(res: Results, peer: str, cores: str) -> list[tuple[str, float]]:
    """(workload size, peer time ÷ fusebind time) wherever both were measured and checked ✓."""
    out = []
    for p in res.rows:
        if p.cores != cores or p.name != peer or not p.min or p.check != "✓":
            continue
        fb = anchor_of(p, res.rows)  # the fusebind measured beside it, in the same child
        if fb is not None and fb.check == "✓" and fb.min:
            out.append((f"{p.workload} {p.size}", p.min / fb.min))
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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.peers_tables", description=__doc__.splitlines()[0])
    ap.add_argument("cores", choices=("1", "all"))
    ap.add_argument("rows_out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--group", choices=sorted(ALL_CORE_GROUPS))
    ap.add_argument("--skip", help="JSON file: [[workload, size], ...] already measured (or crashed)")
    ap.add_argument("--budget", type=float)
    args = ap.parse_args(argv)
    return workloads_child_main(Config(quick=args.quick, only=args.only, budget=args.budget), args.cores, Path(args.rows_out),
                                args.group, Path(args.skip) if args.skip else None)


if __name__ == "__main__":
    sys.exit(main())
