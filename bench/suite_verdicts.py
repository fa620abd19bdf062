"""Verdicts of the workload tables: is fusebind fastest, and where it is not, where its time goes.

Owns two halves:
- in a measuring child (bench/peers_tables.py): `behind_in_child` (is some peer of this child faster than
  fusebind at this size?) and `profile_fusebind` (then: fusebind's plan, step by step, with
  `fusebind.runtime.step_profile`, plus the GEMM flops of each step read from the plan's ops);
- in the suite (parent): `verdicts` (per workload, size and table: "fastest" or "behind <peer> by <r>×",
  each peer against the fusebind measured in its own child), `profile_summary` (the shares of BLAS,
  attention, generated kernels, numpy-reference steps and plan overhead, the GEMM's GFLOP/s against the
  core's peak), `what_would_close` (a sentence derived from those numbers) and the markdown
  (`verdict_table`, `behind_section`).

The core's peak is computed from the clock, not measured: AMD znver3 (and any AVX2+FMA x86 core) retires two
8-lane f32 FMAs per cycle, 32 flop/cycle; the clock is /proc/cpuinfo's "cpu MHz" (a VM's nominal clock:
boost is not visible from here, so the percentage is an upper bound of what the GEMM reaches).
Must not: time peers (peers_tables.py measures; this module only profiles fusebind's plan when asked).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Any, Sequence

from bench.timing import fmt_ratio, fmt_time, markdown_table

#: The peers a verdict compares fusebind with, per table (the summary's, and numpy with out=).
VERDICT_PEERS = {"1": ("numpy", "numpy out=", "numexpr", "numba", "ORT 1t", "XLA (jax.jit)",
                       "Inductor (torch.compile)"),
                 "all": ("numpy", "numpy out=", "numexpr", "numba parallel", "ORT default", "XLA (jax.jit)",
                         "Inductor (torch.compile)")}
#: f32 flop per cycle of one znver3 core: 2 FMA pipes x 8 lanes x 2 flop.
FLOP_PER_CYCLE = 32
#: Behind by at most this ratio: inside this host's run-to-run noise (said so in the sentence).
NOISE = 1.05


def clock_ghz() -> float | None:
    """The core clock from /proc/cpuinfo (GHz), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":", 1)[1]) / 1000.0
    except (OSError, ValueError):
        pass
    return None


def peak_gflops(cores: int) -> float | None:
    ghz = clock_ghz()
    return None if ghz is None else FLOP_PER_CYCLE * ghz * cores


# ---------------------------------------------------------------------------------------------
# In the measuring child

def behind_in_child(rows: Sequence[Any], cores: str) -> bool:
    """Some checked peer of this child (same size) was faster than fusebind."""
    fb = next((r for r in rows if r.name == "fusebind" and r.min and r.check == "✓"), None)
    if fb is None:
        return False
    return any(r.min and r.check == "✓" and r.name in VERDICT_PEERS[cores] and r.min < fb.min for r in rows)


def _shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value.type, "get_shape", None)
    dims = tuple(shape()) if shape is not None else None
    return dims if dims is not None and all(isinstance(d, int) and d >= 0 for d in dims) else None


def op_flops(op: Any) -> int:
    """GEMM flops of one plan op: every prim.matmul inside it (2·M·N·K per matrix), an attention op as its
    two GEMMs (4·S·T·d per head, the causal half not discounted). 0 when it has none or shapes are dynamic."""
    total = 0
    for inner in op.walk():
        name = inner.name
        if "attention" in name and len(inner.operands) >= 2:
            q, k = _shape(inner.operands[0]), _shape(inner.operands[1])
            if q and k and len(q) >= 2:
                total += 4 * math.prod(q[:-1]) * k[-2] * q[-1]
        elif name == "prim.matmul":
            a, r = _shape(inner.operands[0]), _shape(inner.results[0])
            if a and r:
                total += 2 * math.prod(r) * a[-1]
    return total


def profile_fusebind(f: Any, xs: Sequence[Any], repeat: int | None = None) -> dict[str, Any]:
    """fusebind's plan for `xs`, step by step: [what, kernel, arm, median s, GEMM flops] per step, the whole
    call's median (the same number of calls, before and after the steps) and the cores it may use.
    `repeat` None: as many runs as fit about 0.3 s per phase, between 3 and 15 (a long call gets few)."""
    from fusebind.runtime.step_profile import plan_and_func, profile_steps

    try:
        _, ex, arrays, _ = f._flat(list(xs), {})
        if repeat is None:
            t = time.perf_counter()
            f(*xs)
            repeat = max(3, min(15, int(0.3 / max(time.perf_counter() - t, 1e-9))))
        calls: list[float] = []

        def call_times(n: int) -> None:
            for _ in range(n):
                t = time.perf_counter()
                f(*xs)
                calls.append(time.perf_counter() - t)
        call_times(repeat)
        steps = profile_steps(ex, arrays, repeat)
        call_times(repeat)
        _, func = plan_and_func(ex, arrays)
        block = func.body.blocks[0]
        ops = [op for op in block.ops if op is not block.last_op]
        flops = [op_flops(op) for op in ops] if len(ops) == len(steps) else [0] * len(steps)
    except Exception as exc:  # a profile is a report: its failure is said, never fatal to the run
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    return {"steps": [[s.what, s.kernel, s.arm, s.seconds, fl] for s, fl in zip(steps, flops)],
            "call_s": statistics.median(calls), "call_min_s": min(calls), "ncores": len(os.sched_getaffinity(0))}


# ---------------------------------------------------------------------------------------------
# In the suite: verdicts

def _anchor(r: Any, rows: Sequence[Any]) -> Any:
    return next((a for a in rows if a.name == "fusebind" and a.min and a.check == "✓" and a.cores == r.cores
                 and a.group == r.group), None)


def verdict(rows: Sequence[Any], cores: str) -> dict[str, Any]:
    """One workload size in one table: each checked peer's time ÷ the fusebind of its own child, the worst,
    and the verdict text. `rows` are that size's rows of that table."""
    fbs = [r for r in rows if r.name == "fusebind"]
    crash = next((r for r in rows if r.name == "(measuring child)"), None)  # peers_tables.CRASHED
    if crash is not None and not any(r.min and r.check == "✓" for r in fbs):
        return {"text": f"no verdict: {crash.check}", "behind": None, "ratios": []}
    if not any(r.min and r.check == "✓" for r in fbs):
        why = next((r.check for r in fbs if r.check), "not measured")
        return {"text": f"no verdict: fusebind {why}", "behind": None, "ratios": []}
    ratios = []
    for p in rows:
        if p.name not in VERDICT_PEERS[cores] or not p.min or p.check != "✓":
            continue
        fb = _anchor(p, rows)
        if fb is not None:
            ratios.append((p.name, p.min / fb.min, p, fb))
    if not ratios:
        return {"text": "fastest (no checked peer)", "behind": None, "ratios": []}
    name, worst, peer, fb = min(ratios, key=lambda t: t[1])
    if worst >= 1.0:
        nxt = f" (next: {name} {fmt_ratio(worst)} slower)"
        return {"text": "fastest" + nxt, "behind": None, "ratios": ratios}
    return {"text": f"behind {name} by {fmt_ratio(1 / worst)}", "behind": (name, 1 / worst, peer, fb),
            "ratios": ratios}


def verdicts(res: Any) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(workload, size, cores, verdict) for every measured workload size and table, in suite order."""
    out = []
    seen: dict[tuple[str, str, str], list[Any]] = {}
    for r in res.rows:
        seen.setdefault((r.workload, r.size, r.cores), []).append(r)
    for (wl, size, cores), rows in seen.items():
        out.append((wl, size, cores, verdict(rows, cores)))
    return out


def _kind(what: str, kernel: str, arm: str, flops: int) -> str:
    text = f"{what} {kernel}".lower()
    if "attention" in text:
        return "attention"
    if flops and kernel == "numpy reference":
        return "matmul via numpy reference"
    if flops:
        return "BLAS"
    if arm == "fused":
        return "generated kernels"
    return "numpy reference" if kernel == "numpy reference" else "primitives"


def profile_summary(profile: dict[str, Any]) -> dict[str, Any]:
    """Seconds, share and GEMM GFLOP/s per kind of step, the plan overhead and the largest step."""
    steps = profile["steps"]
    total = sum(s[3] for s in steps)
    call = max(profile["call_s"], total)
    # The overhead is the fastest whole call less the steps' medians: a lower bound (a noisy host inflates
    # medians, and a median step against a median call would charge that noise to the plan).
    fastest = profile.get("call_min_s", profile["call_s"])
    kinds: dict[str, dict[str, float]] = {}
    for what, kernel, arm, sec, flops in steps:
        k = kinds.setdefault(_kind(what, kernel, arm, flops), {"s": 0.0, "flops": 0.0, "n": 0})
        k["s"] += sec
        k["flops"] += flops
        k["n"] += 1
    overhead = max(fastest - total, 0.0)
    biggest = max(steps, key=lambda s: s[3]) if steps else None
    peak = peak_gflops(profile.get("ncores", 1))
    for k in kinds.values():
        k["share"] = k["s"] / call if call else 0.0
        k["gflops"] = k["flops"] / k["s"] / 1e9 if k["flops"] and k["s"] else 0.0
        k["of_peak"] = k["gflops"] / peak if peak and k["gflops"] else 0.0
    return {"kinds": kinds, "call": call, "overhead": overhead, "overhead_share": overhead / call if call else 0.0,
            "nsteps": len(steps), "biggest": biggest, "peak": peak}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def describe_profile(ps: dict[str, Any]) -> str:
    parts = []
    for name, k in sorted(ps["kinds"].items(), key=lambda kv: -kv[1]["s"]):
        gf = (f" at {k['gflops']:.1f} GFLOP/s = {_pct(k['of_peak'])} of peak" if k["gflops"] and k["of_peak"]
              else f" at {k['gflops']:.1f} GFLOP/s" if k["gflops"] else "")
        parts.append(f"{name} {_pct(k['share'])} ({int(k['n'])} step{'s' if k['n'] > 1 else ''}, "
                     f"{fmt_time(k['s'])}{gf})")
    n = ps["nsteps"]
    parts.append(f"plan overhead ≥ {fmt_time(ps['overhead'])} per call ({_pct(ps['overhead_share'])}; "
                 f"fastest call less the steps' medians, {n} step{'s' if n != 1 else ''})")
    peak = f"; peak {ps['peak']:.0f} GFLOP/s" if ps["peak"] else ""
    return f"call {fmt_time(ps['call'])}: " + ", ".join(parts) + peak


def what_would_close(ps: dict[str, Any], gap_s: float, ratio: float, peer: str) -> str:
    """A sentence derived from the profile: which part is the limit, and whether removing it closes the gap."""
    kinds, overhead = ps["kinds"], max(ps["overhead"], 0.0)
    lead = f"within {_pct(NOISE - 1)} (this host's run-to-run noise); " if ratio <= NOISE else ""
    gap = f"the gap to {peer} is {fmt_time(gap_s)}"
    numpy_mm = kinds.get("matmul via numpy reference")
    if numpy_mm and numpy_mm["share"] >= 0.25:
        return (lead + f"{gap}; the matmul runs as numpy's reference ({_pct(numpy_mm['share'])} of the call, "
                f"{numpy_mm['gflops']:.1f} GFLOP/s): a native (batched) GEMM step for it is what would close it.")
    if overhead >= gap_s and ps["overhead_share"] >= 0.05:
        per = overhead / max(ps["nsteps"], 1)
        return (lead + f"{gap} and the plan overhead alone is {fmt_time(overhead)} ({fmt_time(per)} per step; "
                "target ≤ 1 µs per step): a cheaper call path (fewer steps, one native thunk) would close it.")
    if not kinds:
        return lead + f"{gap}; the plan has no steps to profile."
    name, k = max(kinds.items(), key=lambda kv: kv[1]["s"])
    share = _pct(k["share"])
    if name in ("BLAS", "attention"):
        cores = "the cores'" if ps.get("ncores", 1) > 1 else "the core's"
        rate = f"{k['gflops']:.1f} GFLOP/s" + (f" = {_pct(k['of_peak'])} of {cores} peak" if k["of_peak"] else "")
        if k["of_peak"] >= 0.6:
            return (lead + f"{gap}; {name} is {share} of the call at {rate}: the GEMM itself is the limit, "
                    f"so only a faster GEMM or fewer flops (fusing the neighbours into its tiles) closes it.")
        what = "the GEMM" if name == "BLAS" else "the attention kernel's tiles"
        return (lead + f"{gap}; {name} is {share} of the call at only {rate}: {what} runs far from peak on "
                "these shapes and is the limit; a GEMM that reaches more of the peak on them (packing once, "
                "batching small matrices into one call, every core) would close it.")
    if name == "generated kernels":
        big = ps["biggest"]
        where = f" (largest step {big[0]}, {fmt_time(big[3])})" if big else ""
        return (lead + f"{gap}; the generated kernels are {share} of the call{where}: their per-element code "
                "(vector width, transcendental cost, a second pass over the data) is the limit; a faster "
                "kernel for that step, or fewer passes, would close it.")
    return (lead + f"{gap}; {name} steps are {share} of the call: compiling them into a fused kernel "
            "instead of running them op by op would close it.")


# ---------------------------------------------------------------------------------------------
# Markdown

def verdict_table(vs: Sequence[tuple[str, str, str, dict[str, Any]]]) -> str:
    """Every workload size: the one-core and all-core verdicts side by side."""
    by: dict[tuple[str, str], dict[str, str]] = {}
    for wl, size, cores, v in vs:
        by.setdefault((wl, size), {})[cores] = v["text"]
    rows = [(wl, size, c.get("1", "—"), c.get("all", "—")) for (wl, size), c in by.items()]
    return markdown_table(["workload", "size", "one core", "all cores"], rows)


def behind_section(vs: Sequence[tuple[str, str, str, dict[str, Any]]], workload_name: str | None = None) -> list[str]:
    """Markdown lines: each size where fusebind is behind, with its profile and what would close it."""
    lines = []
    for wl, size, cores, v in vs:
        if v["behind"] is None or (workload_name is not None and wl != workload_name):
            continue
        peer, ratio, prow, fb = v["behind"]
        title = "one core" if cores == "1" else "all cores"
        head = (f"- **{wl} {size}, {title}**: behind {peer} by {fmt_ratio(ratio)} (fusebind {fmt_time(fb.min)}, "
                f"{peer} {fmt_time(prow.min)}, min of interleaved rounds in one child).")
        prof = getattr(fb, "profile", None)
        if not prof:
            lines += [head + " No profile (the child that measured it did not find it behind, or did not profile)."]
            continue
        if "error" in prof:
            lines += [head + f" Profile failed: {prof['error']}."]
            continue
        ps = profile_summary(prof)
        lines += [head, f"  Profile (`step_profile`, medians): {describe_profile(ps)}.",
                  f"  What would close it: {what_would_close(ps, fb.min - prow.min, ratio, peer)}"]
    return lines
