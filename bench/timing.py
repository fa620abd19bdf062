"""Timing for the benchmark suite: interleaved rounds, min/median, ratios, header.

Owns: `Timing` (one candidate's samples), `measure_interleaved` (every
candidate once per round, round-robin, warm-up excluded, each sample long
enough to be timed), `rounds_for` (adaptive round count), time/ratio
formatting, markdown tables, and `environment_header` (machine, versions,
which OpenBLAS kernel runs). It must not import fusebind: it times whatever
callables it is given.

The machine is noisy (PERFORMANCE.md: 1.2-1.5x between runs), so candidates
are never timed back to back in blocks; one round calls each of them once,
in an order rotated every round, and ratios are taken within one run.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

#: A sample should last at least this long, so timer resolution and the
#: loop around the call do not dominate (small kernels are called in batches).
MIN_SAMPLE_S = 2e-4


@dataclass
class Timing:
    """Seconds per call of one candidate: every sample (batch mean), min, median."""

    name: str
    samples: list[float] = field(default_factory=list)
    inner: int = 1

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def time_once(fn: Callable[[], object], inner: int = 1) -> float:
    """Seconds per call, averaged over `inner` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def inner_for(seconds_per_call: float) -> int:
    """How many calls one sample batches so it lasts at least MIN_SAMPLE_S."""
    if seconds_per_call <= 0:
        return 1000
    return max(1, min(100_000, math.ceil(MIN_SAMPLE_S / seconds_per_call)))


def rounds_for(seconds_per_round: float, *, budget_s: float, lo: int, hi: int) -> int:
    """Rounds that fit `budget_s`, clamped to [lo, hi] (large sizes get few, small ones many)."""
    if seconds_per_round <= 0:
        return hi
    return max(lo, min(hi, int(budget_s / seconds_per_round)))


def measure_interleaved(candidates: dict[str, Callable[[], object]], *, budget_s: float = 1.0,
                        lo: int = 5, hi: int = 40, warmup: int = 1) -> dict[str, Timing]:
    """Time every candidate round-robin; returns name -> Timing.

    Each candidate is first called `warmup` times (not recorded) and calibrated;
    then R rounds (adaptive to the slowest round, see `rounds_for`) call every
    candidate once per round, the order rotating each round so no candidate
    always runs right after the same neighbour.
    """
    names = list(candidates)
    timings = {n: Timing(n) for n in names}
    per_round = 0.0
    for n in names:
        for _ in range(warmup):
            candidates[n]()
        t = time_once(candidates[n])
        timings[n].inner = inner_for(t)
        per_round += t * timings[n].inner
    rounds = rounds_for(per_round, budget_s=budget_s, lo=lo, hi=hi)
    for r in range(rounds):
        shift = r % len(names) if names else 0
        for n in names[shift:] + names[:shift]:
            timings[n].samples.append(time_once(candidates[n], timings[n].inner))
    return timings


def fmt_time(seconds: float | None) -> str:
    """Human time with three significant digits (ns / µs / ms / s)."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_ratio(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:.2f}×"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub markdown table (cells converted with str, '|' escaped)."""
    def cell(v: object) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_features() -> str:
    """The SIMD features that set the peak (avx2, fma, avx512f) and the clock, from /proc/cpuinfo."""
    flags: set[str] = set()
    mhz = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("cpu MHz") and not mhz:
                    mhz = f"{float(line.split(':', 1)[1]):.0f} MHz"
    except (OSError, ValueError):
        return "features unknown"
    simd = ", ".join(f"{'' if f in flags else 'no '}{f.upper()}" for f in ("avx2", "fma", "avx512f"))
    return f"{simd}; clock {mhz or 'unknown'} (/proc/cpuinfo)"


def _memory_gib() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # not installed: say so in the header
        return "not installed"


def blas_kernels() -> list[str]:
    """Which BLAS libraries are loaded and which OpenBLAS kernel (architecture) they run."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["threadpoolctl not installed: OpenBLAS kernel unknown"]
    out = []
    for info in threadpool_info():
        if info.get("user_api") == "blas":
            out.append(f"{info.get('internal_api')} {info.get('version')} arch={info.get('architecture')} "
                       f"threads={info.get('num_threads')} ({os.path.basename(str(info.get('filepath')))})")
    return out or ["no BLAS loaded yet"]


def host_cpu_name() -> str:
    """LLVM's name for the host CPU (what fusebind compiles for)."""
    try:
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_name()
    except Exception as exc:  # llvmlite missing: name the reason
        return f"unknown ({type(exc).__name__})"


def environment_header(command: str, parent_env: dict[str, str | None]) -> str:
    """Markdown: machine, versions, BLAS kernel, the removed env vars, the exact command."""
    versions = {name: _version(name) for name in ("numpy", "llvmlite", "xtc-mlir-python-bindings", "xdsl",
                                                  "numexpr", "numba", "onnxruntime", "onnx", "jax", "jaxlib",
                                                  "torch", "threadpoolctl")}
    lines = [
        f"- command: `{command}`",
        f"- machine: {_cpu_model()} (LLVM host CPU `{host_cpu_name()}`; {_cpu_features()}), "
        f"{os.cpu_count()} logical cores ({len(os.sched_getaffinity(0))} in this process's affinity mask), "
        f"{_memory_gib()} RAM, {platform.system()} {platform.release()}",
        f"- python {platform.python_version()}; " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        "- BLAS: " + "; ".join(blas_kernels()),
        "- environment: the suite runs in a child process with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset "
        "(they can force a slower OpenBLAS kernel); in the parent they were "
        + ", ".join(f"{k}={'unset' if v is None else repr(v)}" for k, v in parent_env.items()),
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
    ]
    return "\n".join(lines)
