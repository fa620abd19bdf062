"""Issue 13's programs (index maps fused into their consumers) against the real peers, one process.

Run:  python -m bench.bench_layout [--threads 1] [--budget 1.0] [--only PATTERN] [--out bench/RESULTS.md]

Owns: the layout workloads (RoPE by slices and concatenate, cross-entropy by take_along_axis,
an embedding gather feeding layer_norm, a three-way concatenate feeding relu, an even/odd
strided-slice sum) and their table: every candidate's time as a ratio to fusebind's, with SOL
(the bytes each workload must move, at `np.copyto`'s speed for that many bytes on this machine). Candidates:
numpy, fusebind (`fb.jit`), JAX (`jax.jit`, XLA CPU), torch.compile (Inductor) — each only if
importable, and each checked against numpy before it is timed (a wrong one is marked, not
timed). With `--threads 1` the whole process is pinned to one core (`os.sched_setaffinity`),
since XLA ignores its thread flags; torch gets `torch.set_num_threads`.
Must not: assert speed (results go to bench/RESULTS.md between `<!-- layout:begin -->` and
`<!-- layout:end -->`).
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.timing import environment_header, fmt_ratio, fmt_time, markdown_table, measure_interleaved

BEGIN, END = "<!-- layout:begin -->", "<!-- layout:end -->"
F32 = np.float32


@dataclass
class Case:
    name: str
    fn: Callable[..., Any]  # written once against numpy; traced by fb.jit, jax.numpy or torch as `xp`
    args: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
    moved_bytes: Callable[[tuple[np.ndarray, ...], np.ndarray], int]  # what any kernel must read + write


def _rope(xp: Any, x: Any, cos: Any, sin: Any) -> Any:
    h = x.shape[-1] // 2
    return x * cos + xp.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin


def _cross_entropy(xp: Any, z: Any, y: Any) -> Any:
    m = xp.amax(z, axis=-1, keepdims=True)
    logp = z - m - xp.log(xp.sum(xp.exp(z - m), axis=-1, keepdims=True))
    return -xp.mean(xp.take_along_axis(logp, y[:, None], axis=-1))


def _embed_ln(xp: Any, table: Any, ids: Any, g: Any) -> Any:
    e = xp.take(table, ids, axis=0)
    mu = xp.mean(e, axis=-1, keepdims=True)
    d = e - mu
    return d / xp.sqrt(xp.mean(d * d, axis=-1, keepdims=True) + 1e-5) * g


def _concat_relu(xp: Any, a: Any, b: Any, c: Any) -> Any:
    return xp.maximum(xp.concatenate([a, b * 2.0, c], axis=-1), 0.0)


def _even_odd(xp: Any, x: Any) -> Any:
    return x[:, ::2] * 0.5 + x[:, 1::2] * 0.25


def _rope_args(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    b, t, d = 8, 512, 128
    ang = np.arange(t, dtype=F32)[:, None] / (10000.0 ** (np.arange(0, d, 2, dtype=F32) / d))
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1).astype(F32)
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1).astype(F32)
    return rng.standard_normal((b, t, d)).astype(F32), cos, sin


def _nbytes(*arrays: np.ndarray) -> int:
    return sum(a.nbytes for a in arrays)


CASES = [
    Case("rope 8x512x128", _rope, _rope_args, lambda a, r: _nbytes(*a, r)),
    Case("cross_entropy 4096x1000", _cross_entropy,
         lambda rng: (rng.standard_normal((4096, 1000)).astype(F32), rng.integers(0, 1000, 4096)),
         lambda a, r: _nbytes(*a)),
    Case("embed+layer_norm 32000x512[4096]", _embed_ln,
         lambda rng: (rng.standard_normal((32000, 512)).astype(F32), rng.integers(0, 32000, 4096),
                      rng.standard_normal(512).astype(F32)),
         lambda a, r: a[1].nbytes + a[2].nbytes + 2 * r.nbytes),  # the rows it picks, not the table
    Case("concat3+relu 4096x256", _concat_relu,
         lambda rng: tuple(rng.standard_normal((4096, 256)).astype(F32) for _ in range(3)),
         lambda a, r: _nbytes(*a, r)),
    Case("even/odd slices 4096x1024", _even_odd,
         lambda rng: (rng.standard_normal((4096, 1024)).astype(F32),), lambda a, r: _nbytes(*a, r)),
]


def _candidates(case: Case, xs: tuple[np.ndarray, ...], threads: int) -> dict[str, Callable[[], Any] | str]:
    """name -> a zero-argument call, or a string saying why the candidate is absent."""
    out: dict[str, Callable[[], Any] | str] = {"numpy": lambda: case.fn(np, *xs)}
    import fusebind as fb

    f = fb.jit(functools.partial(case.fn, np), threads=threads)
    out["fusebind"] = lambda: f(*xs)
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)  # int64 labels and ids, as numpy's
        jf = jax.jit(functools.partial(case.fn, jnp))
        jxs = [jax.device_put(x) for x in xs]
        out["jax.jit"] = lambda: jf(*jxs).block_until_ready()
    except Exception as exc:  # noqa: BLE001 - an absent or broken peer is reported, not fatal
        out["jax.jit"] = f"absent ({type(exc).__name__})"
    try:
        import torch

        torch.set_num_threads(threads)

        class TorchNp:  # the numpy names the workloads use, as torch functions
            concatenate = staticmethod(lambda xs, axis=0: torch.cat(xs, dim=axis))
            take = staticmethod(lambda a, i, axis=0: torch.index_select(a, axis, i))
            take_along_axis = staticmethod(lambda a, i, axis: torch.take_along_dim(a, i, dim=axis))
            exp, log, sqrt, maximum = torch.exp, torch.log, torch.sqrt, torch.clamp_min
            amax = staticmethod(lambda a, axis, keepdims=False: torch.amax(a, dim=axis, keepdim=keepdims))
            sum = staticmethod(lambda a, axis, keepdims=False: torch.sum(a, dim=axis, keepdim=keepdims))
            mean = staticmethod(lambda a, axis=None, keepdims=False: torch.mean(a) if axis is None
                                else torch.mean(a, dim=axis, keepdim=keepdims))

        tf = torch.compile(functools.partial(case.fn, TorchNp))
        txs = [torch.from_numpy(x) for x in xs]
        out["torch.compile"] = lambda: tf(*txs)
    except Exception as exc:  # noqa: BLE001
        out["torch.compile"] = f"absent ({type(exc).__name__})"
    return out


def _as_numpy(v: Any) -> np.ndarray:
    return np.asarray(v.detach().numpy() if hasattr(v, "detach") else v)


def _copy_seconds(moved: int, budget: float) -> float:
    """SOL: the time `np.copyto` takes to move `moved` bytes (half read, half written) on this
    machine, measured at that size, so a workload that fits in cache is held to cache speed."""
    src = np.ones(max(1, moved // 8), F32)
    dst = np.empty_like(src)
    return measure_interleaved({"copy": lambda: np.copyto(dst, src)}, budget_s=budget)["copy"].min


def run(threads: int, budget: float, only: str | None) -> str:
    if threads == 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    rng = np.random.default_rng(0)
    headers = ["workload", "fusebind", "SOL", "numpy", "jax.jit", "torch.compile"]
    rows, notes = [], []
    for case in CASES:
        if only and not fnmatch.fnmatch(case.name, only):
            continue
        xs = case.args(rng)
        want = case.fn(np, *xs)
        cands = _candidates(case, xs, threads)
        timed: dict[str, Callable[[], Any]] = {}
        for name, c in cands.items():
            if isinstance(c, str):
                notes.append(f"{case.name}: {name} {c}")
                continue
            try:
                got = _as_numpy(c())
                ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4)
            except Exception as exc:  # noqa: BLE001
                ok, why = False, f"{type(exc).__name__}: {str(exc)[:120]}"
            else:
                why = "differs from numpy"
            if ok:
                timed[name] = c
            else:
                notes.append(f"{case.name}: {name} ✗ ({why})")
        t = {k: v.min for k, v in measure_interleaved(timed, budget_s=budget).items()}
        sol = _copy_seconds(case.moved_bytes(xs, want), budget)
        base = t.get("fusebind")
        cells = [case.name, fmt_time(base)]
        for name in ("SOL", "numpy", "jax.jit", "torch.compile"):
            v = sol if name == "SOL" else t.get(name)
            cells.append("–" if v is None or base is None else f"{fmt_ratio(v / base)} ({fmt_time(v)})")
        rows.append(cells)
    table = markdown_table(headers, rows)
    cmd = f"python -m bench.bench_layout --threads {threads}"
    return (f"{environment_header(cmd, {})}\n\nEach cell: the candidate's time / fusebind's (above 1: "
            f"fusebind is faster), then its time; min over interleaved rounds; threads={threads}.\n\n"
            f"{table}\n" + "".join(f"\n- {n}" for n in notes) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--only")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    text = run(a.threads, a.budget, a.only)
    print(text)
    if a.out:
        path = Path(a.out)
        old = path.read_text() if path.exists() else ""
        block = f"{BEGIN}\n{text}{END}"
        if BEGIN in old and END in old:
            new = old[:old.index(BEGIN)] + block + old[old.index(END) + len(END):]
        else:
            new = old.rstrip("\n") + "\n\n## Layout programs (issue 13)\n\n" + block + "\n"
        path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
