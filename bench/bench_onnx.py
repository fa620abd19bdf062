"""Whole ONNX models: fusebind against onnxruntime at the same threads, interleaved, as ratios.

Run:  python -m bench.bench_onnx [--quick] [--models a,b] [--threads 1,all] [--no-compile]
                                 [--write FILE]
      python -m bench.bench_onnx --profile MODEL [--threads 1]

Owns: the model timing (bench/onnx_models.py's models; each in a child process: `1` = pinned to
one core with os.sched_setaffinity, BLAS on one thread, fusebind `threads=1`, onnxruntime
`intra_op_num_threads=1`; `all` = every core of the affinity set, fusebind `threads=n` and
onnxruntime `intra_op_num_threads=n`), the first-run compile time (a fresh process on an empty
object cache, `FUSEBIND_CACHE_DIR` a new temp dir seeded only with the machine calibration, then a
fresh process on that warm dir), the `--profile` table (time per plan step: fused region or
primitive, for one model), and the markdown (with `--write`, the block between `<!-- onnx:begin -->`
and `<!-- onnx:end -->`, or `onnx-profile:begin/end` for a profile).

Every model's fusebind outputs are checked against onnxruntime's (np.allclose at `TOLERANCES`;
a CNN on its logits, see `verify`) before it is timed: a mismatch, or any failure other than a
refusal, is an error (listed, the run exits 1), never a row. A model fusebind refuses
(`UnsupportedModel` / `UnsupportedOperation`, what the backend's `prepare` turns into
`unittest.SkipTest`) is a row "skipped: <reason>".
Children run with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed, as bench/suite.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # `python bench/bench_onnx.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.onnx_models import MODELS, with_logits
from bench.timing import environment_header, fmt_ratio, fmt_time, markdown_table, measure_interleaved

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- onnx:begin -->", "<!-- onnx:end -->"
PROFILE_MARKERS = ("<!-- onnx-profile:begin -->", "<!-- onnx-profile:end -->")
REMOVED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: (rtol, atol) of the check against onnxruntime, by model kind: the suite's block workloads'
#: (attention: 1e-3 / 1e-4); CNN outputs are softmax probabilities (~1e-3), so a smaller atol.
TOLERANCES = {"transformer": (1e-3, 1e-4), "cnn": (1e-3, 1e-5)}


def all_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in REMOVED_ENV}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def _run_child(args: Sequence[str], *, pin: bool, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`python -m bench.bench_onnx <args>` in a child (pinned to one core when `pin`); its last stdout line (JSON)."""
    extra = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"} if pin else {}
    core = min(os.sched_getaffinity(0)) if pin else None

    def pin_child() -> None:  # runs in the child before exec: numpy, OpenBLAS and ORT all start on one core
        os.sched_setaffinity(0, {core})
    proc = subprocess.run([sys.executable, "-m", "bench.bench_onnx", *args], capture_output=True, text=True,
                          env=_child_env({**extra, **(env or {})}), cwd=str(ROOT), timeout=3600,
                          preexec_fn=pin_child if pin else None)
    if proc.returncode != 0:
        raise RuntimeError(f"child {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# in the child

def _ort_session(proto: Any, threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # the light models' unused initializers would warn on every load
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])


class Refused(Exception):
    """fusebind does not run this model: the reason the backend's SkipTest would carry."""


def _fusebind(proto: Any, feeds: dict[str, np.ndarray], threads: int) -> tuple[Any, list[np.ndarray]]:
    """(the loaded model, its first outputs); a refusal raises Refused with the backend's reason."""
    import fusebind.onnx
    from fusebind.dialect.errors import UnsupportedOperation

    try:
        f = fusebind.onnx.load(proto, threads=threads)
        return f, f.run(**feeds)
    except fusebind.onnx.UnsupportedModel as e:  # what backend.prepare raises SkipTest with
        raise Refused(str(e)) from None
    except UnsupportedOperation as e:
        raise Refused(f"fusebind.onnx: {e}") from None


def check_outputs(name: str, got: Sequence[np.ndarray], ref: Sequence[np.ndarray], rtol: float,
                  atol: float) -> float:
    """The largest error over the outputs, relative to each output's largest magnitude (normwise);
    an element off np.allclose raises RuntimeError."""
    worst = 0.0
    if len(got) != len(ref):
        raise RuntimeError(f"{name}: fusebind gave {len(got)} outputs, onnxruntime {len(ref)}")
    for i, (g, r) in enumerate(zip(got, ref)):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape or g.dtype != r.dtype:
            raise RuntimeError(f"{name}: output {i} is {g.dtype}{list(g.shape)}, "
                               f"onnxruntime's {r.dtype}{list(r.shape)}")
        err = float(np.max(np.abs(g.astype(np.float64) - r))) if g.size else 0.0
        if not np.allclose(g, r, rtol=rtol, atol=atol, equal_nan=True):
            raise RuntimeError(f"{name}: output {i} differs from onnxruntime's (max abs err {err:.3g}, "
                               f"rtol={rtol}, atol={atol})")
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        worst = max(worst, err / scale if scale else err)
    return worst


def verify(m: Any, proto: Any, feeds: dict[str, np.ndarray], threads: int, got: Sequence[np.ndarray],
           ref: Sequence[np.ndarray]) -> float:
    """fusebind's outputs `got` of `proto` against onnxruntime's `ref`; the largest abs error checked.

    A transformer's outputs are compared as they are. A CNN ending in Softmax is compared on its
    logits (`with_logits`: its Softmax input as an extra output of a copy, run by both): the light
    models' logits are equal in exact arithmetic, so their softmax is rounding's choice; the
    softmax output itself must then be finite and sum to 1 (shape and dtype as onnxruntime's)."""
    rtol, atol = TOLERANCES[m.kind]
    check = with_logits(proto) if m.kind == "cnn" else None
    if check is None:
        return check_outputs(m.name, got, ref, rtol, atol)
    for i, (g, r) in enumerate(zip(got, ref)):
        sums = g.reshape(len(g), -1).sum(axis=1) if g.ndim else g  # batch 1: the classes are all the rest
        if g.shape != r.shape or g.dtype != r.dtype or not np.all(np.isfinite(g)) \
                or not np.allclose(sums, 1.0, atol=1e-3):
            raise RuntimeError(f"{m.name}: output {i} ({g.dtype}{list(g.shape)}, {int(np.sum(~np.isfinite(g)))} "
                               f"not finite, sums {np.round(sums, 4).tolist()}) is no softmax like "
                               f"onnxruntime's ({r.dtype}{list(r.shape)})")
    _, logits = _fusebind(check, feeds, threads)
    ref_logits = _ort_session(check, threads).run(None, feeds)
    return check_outputs(f"{m.name} (logits)", logits[-1:], ref_logits[-1:], rtol, atol)


def openblas_threads() -> str:
    """numpy's OpenBLAS (the one fusebind's matmul thunk calls): its core type and thread count."""
    import ctypes
    import glob

    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs", "libscipy_openblas*.so*")
    try:
        lib = ctypes.CDLL(sorted(glob.glob(libs))[0])
        lib.scipy_openblas_get_corename64_.restype = ctypes.c_char_p
        return (f"OpenBLAS {lib.scipy_openblas_get_corename64_().decode()} "
                f"threads={lib.scipy_openblas_get_num_threads64_()}")
    except (IndexError, OSError, AttributeError) as exc:
        return f"OpenBLAS unknown ({type(exc).__name__})"


def child_time(models: Sequence[str], threads: int, quick: bool) -> dict[str, Any]:
    """Check then time every model at `threads` (this process's affinity is the parent's choice)."""
    rows, errors = [], []
    budget, lo, hi = (0.05, 3, 3) if quick else (3.0, 3, 25)  # resnet50 (~0.5 s a call) gets ~4 rounds
    blas = [openblas_threads()]
    for name in models:
        m = MODELS[name]
        row: dict[str, Any] = {"model": name, "threads": threads, "cores": len(os.sched_getaffinity(0))}
        try:
            proto = m.build(quick)
            feeds = m.inputs(proto)
            sess = _ort_session(proto, threads)
            ref = sess.run(None, feeds)
            try:
                f, got = _fusebind(proto, feeds, threads)
            except Refused as e:
                rows.append({**row, "skipped": str(e)})
                continue
            row["max_err"] = verify(m, proto, feeds, threads, got, ref)
            positional = [feeds[n] for n in f.input_names]
            t = measure_interleaved({"fusebind": lambda: f.run(*positional),
                                     "onnxruntime": lambda: sess.run(None, feeds)},
                                    budget_s=budget, lo=lo, hi=hi)
            rows.append({**row, **{f"{k}_{s}": getattr(v, s) for k, v in t.items() for s in ("min", "median")},
                         "rounds": len(t["fusebind"].samples)})
        except Exception as exc:  # a mismatch or a crash: an error of the run, not a row
            errors.append(f"{name} at {threads} thread(s): {type(exc).__name__}: {str(exc)[:400]}")
        print(f"  {name} threads={threads}: {rows[-1] if rows and rows[-1]['model'] == name else 'error'}",
              file=sys.stderr, flush=True)
    return {"rows": rows, "errors": errors, "blas": blas}


def child_compile(name: str, threads: int, quick: bool) -> dict[str, Any]:
    """One model's first run in this (fresh) process: import, calibration, load, first call, a steady call."""
    t0 = time.perf_counter()
    import fusebind.onnx
    from fusebind.runtime.calibrate import machine_model

    out: dict[str, Any] = {"import_s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    machine_model(None)  # measured once per machine and stored beside the cache: not the model's cost
    out["calibrate_s"] = time.perf_counter() - t0
    m = MODELS[name]
    proto = m.build(quick)
    feeds = m.inputs(proto)
    t0 = time.perf_counter()
    try:
        f, got = _fusebind(proto, feeds, threads)
    except Refused as e:
        return {**out, "skipped": str(e)}
    out["first_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    f.run(**feeds)
    out["steady_s"] = time.perf_counter() - t0
    fn, _ = f.jit_call(*(feeds[n] for n in f.input_names))
    st = fn.stats
    out.update(compiles=st.compiles, object_cache_hits=st.object_cache_hits)
    t0 = time.perf_counter()
    sess = _ort_session(proto, threads)
    ref = sess.run(None, feeds)
    out["ort_first_s"] = time.perf_counter() - t0
    out["max_err"] = verify(m, proto, feeds, threads, got, ref)
    return out


def child_profile(name: str, threads: int, quick: bool, calls: int) -> dict[str, Any]:
    """Seconds per plan step (a fused region, by arm, or one primitive) over `calls` calls of one model."""
    from fusebind.dialect.fused import RegionOp
    from fusebind.dialect.types import shape_of

    m = MODELS[name]
    proto = m.build(quick)
    feeds = m.inputs(proto)
    try:
        f, got = _fusebind(proto, feeds, threads)
    except Refused as e:
        return {"skipped": str(e)}
    sess = _ort_session(proto, threads)
    verify(m, proto, feeds, threads, got, sess.run(None, feeds))
    ort_s = min(_seconds(lambda: sess.run(None, feeds)) for _ in range(calls))
    fn, args = f.jit_call(*(feeds[n] for n in f.input_names))
    # The executor's plan for these arguments: its steps are the optimized function's ops in order
    # (runtime/plan.py build_plan), so each step is labelled by its op and timed by a wrapper.
    _, ex, full, _ = fn._flat(tuple(args), {})
    plan = ex.plan_for(full)
    func = ex.optimized_func(ex.session.table, [np.shape(a) for a in full])
    ops = list(func.body.blocks[0].ops)[:-1]
    if len(ops) != len(plan.steps):
        raise RuntimeError(f"{name}: {len(plan.steps)} plan steps for {len(ops)} ops: cannot label the profile")
    decisions = {d.name: d for d in plan.decisions}
    labels, seconds = [], [0.0] * len(ops)
    for i, op in enumerate(ops):
        shape = "x".join(str(d) for d in shape_of(op.results[0].type)) if op.results else ""
        if isinstance(op, RegionOp):
            d = decisions.get(op.sym_name.data)
            body = [o.name.removeprefix("prim.") for o in op.body.block.ops
                    if o.name not in ("prim.constant", "fused.yield")]
            kind = f"region ({d.arm})" if d is not None else "region"
            shown = ", ".join(body[:6]) + (", …" if len(body) > 6 else "")
            labels.append((kind, f"{op.sym_name.data} [{shown}] {shape}"))
        else:
            labels.append((op.name, shape))

    def timed(step: Any, i: int) -> Any:
        clock = time.perf_counter

        def run(env: Any) -> None:
            t = clock()
            step(env)
            seconds[i] += clock() - t
        return run
    plan.steps[:] = [timed(s, i) for i, s in enumerate(plan.steps)]
    plan.fast = None  # a one-step plan's fast path would bypass the steps
    ex.fast = None
    sig = tuple((a.shape, a.dtype) for a in full)
    for _ in range(2):  # warm-up, not counted: a kernel compiled lazily on its first calls (attention blocks)
        ex.run_signature(sig, list(full))
    seconds[:] = [0.0] * len(ops)
    t0 = time.perf_counter()
    for _ in range(calls):
        ex.run_signature(sig, list(full))
    total = (time.perf_counter() - t0) / calls
    steps = [{"kind": k, "what": w, "s": s / calls} for (k, w), s in zip(labels, seconds)]
    return {"total_s": total, "steps": steps, "threads": threads, "ort_s": ort_s}


def _seconds(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
# in the parent

def seeded_cache_dir() -> str:
    """A new empty object cache holding only the machine calibration (copied from the default cache)."""
    from fusebind.lowering.cache import ObjectCache

    new = tempfile.mkdtemp(prefix="fb-onnx-cache-")
    src = ObjectCache.from_env().directory
    if src is not None and src.is_dir():
        for p in src.glob("machine-*.json"):
            shutil.copy2(p, new)
    return new


def timing_table(rows: Sequence[dict[str, Any]]) -> str:
    out = []
    for r in rows:
        cores = "1 pinned core" if r["cores"] == 1 else f"{r['cores']} cores"
        where = f"{r['threads']} ({cores})"
        if "skipped" in r:
            out.append((r["model"], where, f"skipped: {r['skipped'][:160]}", "", "", "", "", ""))
            continue
        out.append((r["model"], where, fmt_time(r["fusebind_min"]), fmt_time(r["fusebind_median"]),
                    fmt_time(r["onnxruntime_min"]), fmt_time(r["onnxruntime_median"]),
                    fmt_ratio(r["onnxruntime_min"] / r["fusebind_min"]), f"✓ (max rel err {r['max_err']:.2g})"))
    return markdown_table(["model", "threads", "fusebind min", "fusebind median", "onnxruntime min",
                           "onnxruntime median", "ORT ÷ fusebind (min)", "check vs ORT"], out)


def compile_table(rows: Sequence[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    out = []
    for name, cold, warm in rows:
        if "skipped" in cold:
            out.append((name, f"skipped: {cold['skipped'][:160]}", "", "", "", "", ""))
            continue
        out.append((name, f"{fmt_time(cold['first_s'])} ({cold['compiles']} compiled)",
                    f"{fmt_time(warm['first_s'])} ({warm['object_cache_hits']} cache hits, "
                    f"{warm['compiles']} compiled)",
                    fmt_time(cold["steady_s"]), fmt_time(cold["ort_first_s"]),
                    f"{fmt_time(cold['import_s'])} / {fmt_time(warm['import_s'])}",
                    f"{fmt_time(cold['calibrate_s'])} / {fmt_time(warm['calibrate_s'])}"))
    return markdown_table(["model", "cold: load + first call", "from the cache (new process): load + first call",
                           "a later call", "onnxruntime: session + first run", "import fusebind (cold / cached)",
                           "calibration read (cold / cached)"], out)


def profile_table(name: str, prof: dict[str, Any], top: int = 25) -> str:
    if "skipped" in prof:
        return f"{name}: skipped: {prof['skipped']}"
    steps = prof["steps"]
    total = prof["total_s"]
    by_kind: dict[str, list[float]] = {}
    for s in steps:
        by_kind.setdefault(s["kind"], []).append(s["s"])
    kinds = sorted(by_kind.items(), key=lambda kv: -sum(kv[1]))
    rows = [(k, len(v), fmt_time(sum(v)), f"{100 * sum(v) / total:.1f}%") for k, v in kinds]
    rest = total - sum(s["s"] for s in steps)
    rows.append(("outside the steps (call, checks, copies)", "", fmt_time(rest), f"{100 * rest / total:.1f}%"))
    worst = sorted(steps, key=lambda s: -s["s"])[:top]
    return "\n".join([
        f"Profile of {name} at {prof['threads']} thread(s): {fmt_time(total)} per call (the mean of the timed "
        f"calls after two warm-up calls; onnxruntime at the same threads: {fmt_time(prof['ort_s'])}, min of as "
        "many calls), summed per step kind (a region runs its fused kernel, or arm 0 = its primitives; a prim "
        "step is one primitive, its kernel or numpy reference):", "",
        markdown_table(["step kind", "steps", "time per call", "share"], rows), "",
        f"The {len(worst)} costliest steps:", "",
        markdown_table(["step", "what (region name [ops] result shape)", "time per call", "share"],
                       [(s["kind"], s["what"], fmt_time(s["s"]), f"{100 * s['s'] / total:.1f}%") for s in worst])])


def write_block(path: Path, block: str, markers: tuple[str, str] = (BEGIN, END)) -> None:
    """Replace the block between `markers` in `path` (create the file or append the block if absent)."""
    begin, end = markers
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    new = f"{begin}\n{block.rstrip()}\n{end}"
    if begin in text and end in text and text.index(begin) < text.index(end):
        head, rest = text.split(begin, 1)
        text = head + new + rest.split(end, 1)[1]
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + new + "\n"
    path.write_text(text, encoding="utf-8")


def run(models: Sequence[str], threads: Sequence[str], quick: bool, compile_times: bool,
        command: str) -> tuple[str, list[str]]:
    """The markdown of a run and its errors."""
    t_start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    blas: list[str] = []
    q = ["--quick"] if quick else []
    for t in threads:
        n = 1 if t == "1" else all_cores()
        print(f"timing at {t} thread(s) …", file=sys.stderr, flush=True)
        res = _run_child(["--child", "time", "--models", ",".join(models), "--nthreads", str(n), *q], pin=t == "1")
        rows += res["rows"]
        errors += res["errors"]
        blas.append(f"{t}: " + "; ".join(res["blas"]))
    md = [f"## ONNX models against onnxruntime (bench/bench_onnx.py, {'quick' if quick else 'full'} run)", "",
          environment_header(command, {k: os.environ.get(k) for k in REMOVED_ENV}),
          "- numpy's OpenBLAS (fusebind's matmuls) in the timing children, by threads row: " + " | ".join(blas), "",
          "Each model runs in a child process: `1` = pinned to one core (os.sched_setaffinity), "
          "OPENBLAS_NUM_THREADS=1, fusebind `threads=1`, onnxruntime `intra_op_num_threads=1`; "
          f"the other row = all {all_cores()} cores, fusebind `threads={all_cores()}`, onnxruntime "
          f"`intra_op_num_threads={all_cores()}` (inter-op 1). fusebind's outputs are checked against "
          "onnxruntime's before timing (np.allclose, rtol/atol " + ", ".join(
              f"{k} {a}/{b}" for k, (a, b) in TOLERANCES.items()) + "; a CNN on its logits, the input of its "
          "final Softmax, and its softmax output must be finite and sum to 1 (with the light models' shipped "
          "constant weights every logit is equal and the softmax is rounding's choice; the rows here use "
          "random weights, `onnx_models.random_weights`, so that a Conv is a real convolution). Per call: "
          "`fusebind.onnx.load(model).run(*inputs)` and `InferenceSession.run(None, feeds)`, interleaved "
          "rounds (order rotated, warm-up excluded), min and median. ORT ÷ fusebind > 1: fusebind is faster.", "",
          ", ".join(f"**{n}**: {MODELS[n].quick if quick else MODELS[n].describe}" for n in models) + ".", "",
          timing_table(rows), ""]
    if compile_times:
        crow = []
        for name in models:
            print(f"compile time of {name} …", file=sys.stderr, flush=True)
            cache = seeded_cache_dir()
            try:
                args = ["--child", "compile", "--models", name, "--nthreads", str(all_cores()), *q]
                cold = _run_child(args, pin=False, env={"FUSEBIND_CACHE_DIR": cache})
                warm = _run_child(args, pin=False, env={"FUSEBIND_CACHE_DIR": cache})
                crow.append((name, cold, warm))
            except Exception as exc:
                errors.append(f"{name} compile time: {str(exc)[:600]}")
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        md += ["### First-run compile time", "",
               "A fresh process per column: `cold` on an empty object cache (a new `FUSEBIND_CACHE_DIR` holding only "
               "the machine calibration), then `from the cache` on that directory, now warm. Load + first call = "
               "`fusebind.onnx.load` (import, shape inference) and the first `run` (trace, optimize, compile or "
               "load every kernel, run); BLAS thunks are per process and never cached. Imports and the "
               "calibration read are shown apart.", "", compile_table(crow), ""]
    md.append(f"Run took {time.perf_counter() - t_start:.0f} s.")
    if errors:
        md += ["", "**Errors (not rows):**", ""] + [f"- {e}" for e in errors]
    return "\n".join(md), errors


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_onnx", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small transformer sizes, few rounds (the smoke test)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of: {', '.join(MODELS)}")
    ap.add_argument("--threads", default="1,all", help="comma-separated, of: 1 (one pinned core), all")
    ap.add_argument("--no-compile", action="store_true", help="skip the first-run compile time section")
    ap.add_argument("--profile", metavar="MODEL", help="where the time goes per plan step, for one model")
    ap.add_argument("--calls", type=int, default=0, help="--profile: calls to average (default 20, quick 3)")
    ap.add_argument("--write", metavar="FILE", help="replace the block between the onnx (or, with --profile, "
                    "onnx-profile) markers in FILE")
    ap.add_argument("--child", choices=("time", "compile", "profile"), help=argparse.SUPPRESS)
    ap.add_argument("--nthreads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    threads = [t.strip() for t in args.threads.split(",") if t.strip()]
    bad = [m for m in models + ([args.profile] if args.profile else []) if m not in MODELS]
    if bad or any(t not in ("1", "all") for t in threads):
        ap.error(f"unknown model(s) {bad} or threads {threads}: models are {', '.join(MODELS)}; threads 1 or all")
    if args.child == "time":
        print(json.dumps(child_time(models, args.nthreads, args.quick)))
        return 0
    if args.child == "compile":
        print(json.dumps(child_compile(models[0], args.nthreads, args.quick)))
        return 0
    calls = args.calls or (3 if args.quick else 20)
    if args.child == "profile":
        print(json.dumps(child_profile(models[0], args.nthreads, args.quick, calls)))
        return 0
    shown = " ".join(["python -m bench.bench_onnx", *(sys.argv[1:] if argv is None else argv)])
    if args.profile:
        t = threads[0]
        prof = _run_child(["--child", "profile", "--models", args.profile, "--nthreads",
                           str(1 if t == "1" else all_cores()), "--calls", str(calls),
                           *(["--quick"] if args.quick else [])],
                          pin=t == "1")
        text = f"Command: `{shown}`\n\n" + profile_table(args.profile, prof)
        print(text)
        if args.write:
            write_block(Path(args.write), text, PROFILE_MARKERS)
            print(f"\nwrote the onnx-profile block of {args.write}", file=sys.stderr)
        return 0
    text, errors = run(models, threads, args.quick, not args.no_compile, shown)
    print(text)
    if args.write:
        write_block(Path(args.write), text)
        print(f"\nwrote the onnx block of {args.write}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
