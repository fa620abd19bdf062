"""The GEMM library choice: sgemm GFLOP/s of the suite's block shapes, side by side in one process.

Candidates (each skipped, with the reason, where it is not installed):
- openblas: numpy's bundled OpenBLAS (scipy_openblas64), what fusebind calls today;
- blis: pypi `blis` (cython-blis), its `bli_sgemm` through blis.py.gemm;
- mkl: pypi `mkl`, `cblas_sgemm` of libmkl_rt (LP64) through ctypes;
- onednn: pypi `onednn`, `dnnl_sgemm` (row-major) through ctypes;
- xla: `jax.jit(jnp.dot)`, for reference (in an environment that has jax).

The one-thread figures come from a child pinned to one core (`os.sched_setaffinity`, before
any library starts its threads: TBB and OpenMP size their pools from the affinity mask) with
every library also told 1 thread where it has a knob; the two-thread figures from a child on
every core of the mask, each library told that many. In each child the candidates run
interleaved: each round times every candidate once (the median of `reps` calls), and the
figure is the median over rounds. Values are checked against numpy's float64 product first.

Peak: 2 FMA pipes x 8 f32 lanes x 2 flops = 32 flops a cycle a core on AVX2 (znver3), times
the clock read from /proc/cpuinfo (the nominal clock: boost can exceed it, so a figure above
100% means the core ran faster than nominal).

Run: `python -m bench.bench_gemm [--rounds 7] [--only openblas,mkl] [--threads 1,2]` from the
repo root with any interpreter that has numpy (fusebind is not needed).

`--batched` (needs fusebind; jax and torch where installed, e.g. /work/benchenv): batched
matmuls, B=64 of 64x64 @ 64x64 and (2,4,512,64) @ (2,4,64,512), f32 and f64: fusebind's
`fb.jit(a @ b)` as the plan runs it today, the batched BLAS kernel through the thunk (the call
a plan step makes: runtime/blas.py `blas_batched_kernel`), numpy.matmul, `jax.jit` and torch
(`torch.matmul` with `out=`), interleaved, at 1 thread (pinned to one core) and at 2.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

#: (label, M, K, N): the suite's matmul-heavy blocks (bench/workloads.py)
SHAPES = [("MLP T=256 D=512 up", 256, 512, 2048), ("MLP T=256 D=512 down", 256, 2048, 512),
          ("MLP T=64 D=256 up", 64, 256, 1024), ("MLP T=64 D=256 down", 64, 1024, 256),
          ("SwiGLU up", 256, 512, 1024), ("SwiGLU down", 256, 1024, 512),
          ("attn S=128 q@k.T", 128, 64, 128), ("attn S=512 q@k.T", 512, 64, 512),
          ("matmul 512x1024x1024", 512, 1024, 1024)]
CANDIDATES = ("openblas", "blis", "mkl", "onednn", "xla")
LICENCES = {"openblas": "BSD-3-Clause (bundled in numpy's wheel)", "blis": "BSD-3-Clause",
            "mkl": "Intel Simplified Software License (ISSL)", "onednn": "Apache-2.0", "xla": "Apache-2.0"}


class Skip(Exception):
    """A candidate that cannot run here; its message is the reason."""


def _lib_dirs() -> list[str]:
    return [os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib")]


def _find(pattern: str) -> str:
    for d in _lib_dirs():
        found = sorted(glob.glob(os.path.join(d, pattern)))
        if found:
            return found[0]
    raise Skip(f"no {pattern} under {_lib_dirs()}")


def _openblas(threads: int) -> Callable[..., Any]:
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    found = sorted(glob.glob(os.path.join(libs, "libscipy_openblas*.so*")))
    if not found:
        raise Skip(f"numpy has no bundled OpenBLAS in {libs}")
    lib = ctypes.CDLL(found[0])
    lib.scipy_openblas_set_num_threads64_(ctypes.c_int(threads))

    def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.matmul(a, b, out=out)
    return gemm


def _blis(threads: int) -> Callable[..., Any]:
    try:
        import blis
        import blis.py
    except ImportError as exc:
        raise Skip(f"pypi blis not installed ({exc})") from None
    cy = glob.glob(os.path.join(os.path.dirname(blis.__file__), "cy*.so"))
    if threads > 1:
        try:
            ctypes.CDLL(cy[0]).bli_thread_set_num_threads(ctypes.c_int64(threads))
        except (IndexError, OSError, AttributeError):
            raise Skip("this blis build has no bli_thread_set_num_threads") from None

    def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        blis.py.gemm(a, b, out=out, beta=0.0)
    return gemm


def _mkl(threads: int) -> Callable[..., Any]:
    lib = ctypes.CDLL(_find("libmkl_rt.so*"))
    lib.MKL_Set_Num_Threads(ctypes.c_int(threads))
    f = lib.cblas_sgemm
    f.restype = None
    f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                  ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_float,
                  ctypes.c_void_p, ctypes.c_int]

    def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        m, k = a.shape
        n = b.shape[1]
        f(101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0, out.ctypes.data, n)
    return gemm


def _onednn(threads: int) -> Callable[..., Any]:
    path = _find("libdnnl.so*")
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise Skip(f"{path} does not load ({exc}); run with LD_LIBRARY_PATH={os.path.dirname(path)}") from None
    f = lib.dnnl_sgemm
    f.restype = ctypes.c_int
    i64 = ctypes.c_int64
    f.argtypes = [ctypes.c_char, ctypes.c_char, i64, i64, i64, ctypes.c_float, ctypes.c_void_p, i64,
                  ctypes.c_void_p, i64, ctypes.c_float, ctypes.c_void_p, i64]

    def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        m, k = a.shape
        n = b.shape[1]
        status = f(b"N", b"N", m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0, out.ctypes.data, n)
        if status != 0:
            raise RuntimeError(f"dnnl_sgemm returned status {status}")
    return gemm  # its threads: TBB's, sized by the affinity mask of this (pinned or not) child


def _xla(threads: int) -> Callable[..., Any]:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as exc:
        raise Skip(f"jax not installed ({exc})") from None
    dot = jax.jit(jnp.dot)
    cache: dict[int, Any] = {}

    def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        key = id(a)
        if key not in cache:  # device arrays made once per operand: the timing is the dot only
            cache.clear()
            cache[key] = (jax.device_put(a), jax.device_put(b))
        da, db = cache[key]
        r = dot(da, db).block_until_ready()
        if out.ctypes.data == key:  # never; keeps the signature of the others
            out[...] = np.asarray(r)
        gemm.last = r  # type: ignore[attr-defined]
    return gemm


MAKERS = {"openblas": _openblas, "blis": _blis, "mkl": _mkl, "onednn": _onednn, "xla": _xla}


def _child(threads: int, names: list[str], rounds: int) -> dict[str, Any]:
    """Measure in this process (already pinned or not by the parent)."""
    rng = np.random.default_rng(0)
    gemms: dict[str, Callable[..., Any]] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            gemms[name] = MAKERS[name](threads)
        except Skip as exc:
            skipped[name] = str(exc)
        except OSError as exc:
            skipped[name] = f"does not load: {exc}"
    rows = []
    for label, m, k, n in SHAPES:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        out = np.empty((m, n), np.float32)
        flops = 2.0 * m * n * k
        reps = max(3, int(2e8 / flops))
        for name, g in list(gemms.items()):
            g(a, b, out)
            got = np.asarray(getattr(g, "last", out))
            err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) + 1e-30))
            if err > 1e-4:
                skipped[name] = f"wrong values on {label}: relative error {err:.2e}"
                del gemms[name]
        times: dict[str, list[float]] = {name: [] for name in gemms}
        for _ in range(rounds):
            for name, g in gemms.items():
                per = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    g(a, b, out)
                    per.append(time.perf_counter() - t0)
                times[name].append(sorted(per)[len(per) // 2])
        for name, ts in times.items():
            t = sorted(ts)[len(ts) // 2]
            rows.append({"shape": label, "mnk": (m, k, n), "lib": name, "us": t * 1e6, "gflops": flops / t / 1e9})
    return {"threads": threads, "rows": rows, "skipped": skipped}


def clock_ghz() -> float:
    try:
        with open("/proc/cpuinfo") as f:
            mhz = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
        return max(mhz) / 1000.0 if mhz else 0.0
    except OSError:
        return 0.0


def run(names: list[str], threads_list: list[int], rounds: int) -> list[dict[str, Any]]:
    out = []
    cores = sorted(os.sched_getaffinity(0))
    for threads in threads_list:
        env = dict(os.environ)
        lib = os.path.join(sys.prefix, "lib")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS"):
            env[var] = str(threads)
        pin = cores[:threads]
        code = (f"import os, json, sys; os.sched_setaffinity(0, {set(pin)!r}); "
                f"from bench.bench_gemm import _child; "
                f"print('JSON' + json.dumps(_child({threads}, {names!r}, {rounds})))")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=1800)
        line = [x for x in r.stdout.splitlines() if x.startswith("JSON")]
        if not line:
            raise RuntimeError(f"child at {threads} threads failed:\n{r.stderr[-3000:]}")
        out.append(json.loads(line[-1][4:]))
    return out


def table(results: list[dict[str, Any]], ghz: float) -> str:
    lines = []
    for res in results:
        t = res["threads"]
        peak = 32.0 * ghz * t
        libs = sorted({r["lib"] for r in res["rows"]}, key=CANDIDATES.index)
        lines.append(f"\n{t} thread{'s' if t > 1 else ''} (peak {peak:.0f} GFLOP/s at {ghz:.2f} GHz nominal); "
                     "GFLOP/s, (% of peak)\n")
        lines.append("| shape (M x K x N) | " + " | ".join(libs) + " |")
        lines.append("|---|" + "---|" * len(libs))
        for label, m, k, n in SHAPES:
            cells = []
            for lib in libs:
                r = [x for x in res["rows"] if x["shape"] == label and x["lib"] == lib]
                cells.append(f"{r[0]['gflops']:.1f} ({100 * r[0]['gflops'] / peak:.0f}%)" if r else "-")
            lines.append(f"| {label} ({m}x{k}x{n}) | " + " | ".join(cells) + " |")
        for lib, why in res["skipped"].items():
            lines.append(f"\n- {lib} skipped: {why}")
    return "\n".join(lines)


BATCHED = [((64, 64, 64), (64, 64, 64)), ((2, 4, 512, 64), (2, 4, 64, 512))]


def _batched_child(threads: int, rounds: int) -> list[dict[str, Any]]:
    import fusebind as fb
    from fusebind.runtime.blas import blas_batched_kernel, blas_set_threads
    from fusebind.runtime.thunk import ThunkCall

    blas_set_threads(threads)
    peers: dict[str, Any] = {}
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        peers["xla"] = (jax, jax.jit(jnp.matmul))
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(threads)
        peers["torch"] = torch
    except ImportError:
        pass
    rng = np.random.default_rng(0)
    rows = []
    for dt in (np.float32, np.float64):
        for ash, bsh in BATCHED:
            a, b = rng.standard_normal(ash).astype(dt), rng.standard_normal(bsh).astype(dt)
            ref = a @ b
            out = np.empty_like(ref)
            elem = "f32" if dt == np.float32 else "f64"
            kernel = blas_batched_kernel(elem, (a.ndim, b.ndim, ref.ndim), threads=threads)
            thunk = ThunkCall(kernel, [a.shape, b.shape, ref.shape]).function
            jitted = fb.jit(lambda x, y: x @ y, threads=threads)
            fns: dict[str, Callable[[], Any]] = {"fb.jit today": lambda: jitted(a, b),
                                                 "fb batched kernel": lambda: thunk(a, b, out),
                                                 "numpy": lambda: np.matmul(a, b, out=out)}
            if "xla" in peers:
                jax_mod, jm = peers["xla"]
                ja, jb = jax_mod.device_put(a), jax_mod.device_put(b)
                fns["xla"] = lambda: jm(ja, jb).block_until_ready()
            if "torch" in peers:
                torch = peers["torch"]
                ta, tb, to = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
                fns["torch"] = lambda: torch.matmul(ta, tb, out=to)
            for name, fn in fns.items():
                r = fn()
                got = np.asarray(r) if name in ("fb.jit today", "xla") else out
                np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)
            reps = max(3, int(3e7 / (2 * ref.size * a.shape[-1])))
            times: dict[str, list[float]] = {n: [] for n in fns}
            for _ in range(rounds):
                for name, fn in fns.items():
                    per = []
                    for _ in range(reps):
                        t0 = time.perf_counter()
                        fn()
                        per.append(time.perf_counter() - t0)
                    times[name].append(sorted(per)[len(per) // 2])
            for name, ts in times.items():
                rows.append({"case": f"{elem} {ash}@{bsh}", "impl": name, "us": sorted(ts)[len(ts) // 2] * 1e6})
    return rows


def batched(rounds: int, threads_list: list[int]) -> str:
    lines = []
    cores = sorted(os.sched_getaffinity(0))
    for threads in threads_list:
        code = (f"import os, json; os.sched_setaffinity(0, {set(cores[:threads])!r}); "
                f"from bench.bench_gemm import _batched_child; "
                f"print('JSON' + json.dumps(_batched_child({threads}, {rounds})))")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        line = [x for x in r.stdout.splitlines() if x.startswith("JSON")]
        if not line:
            raise RuntimeError(f"batched child at {threads} threads failed:\n{r.stderr[-3000:]}")
        rows = json.loads(line[-1][4:])
        impls = list(dict.fromkeys(x["impl"] for x in rows))
        lines.append(f"\n{threads} thread(s): median us (peer / fb batched kernel)\n")
        lines.append("| case | " + " | ".join(impls) + " |")
        lines.append("|---|" + "---|" * len(impls))
        for case in dict.fromkeys(x["case"] for x in rows):
            mine = [x["us"] for x in rows if x["case"] == case and x["impl"] == "fb batched kernel"][0]
            cells = [f"{x['us']:.0f} ({x['us'] / mine:.2f}x)" for i in impls for x in rows
                     if x["case"] == case and x["impl"] == i]
            lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default=",".join(CANDIDATES))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    ap.add_argument("--batched", action="store_true", help="the batched-matmul comparison instead")
    args = ap.parse_args(argv)
    if args.batched:
        print(f"load {os.getloadavg()[0]:.2f}")
        print(batched(args.rounds, [int(t) for t in args.threads.split(",")]))
        return
    names = [n for n in args.only.split(",") if n]
    for n in names:
        if n not in MAKERS:
            raise SystemExit(f"unknown candidate {n!r}; choose from {', '.join(CANDIDATES)}")
    threads = [int(t) for t in args.threads.split(",")]
    results = run(names, threads, args.rounds)
    ghz = clock_ghz()
    print(f"python {sys.executable}; load {os.getloadavg()[0]:.2f}; licences: " +
          "; ".join(f"{n}: {LICENCES[n]}" for n in names))
    print(table(results, ghz))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ghz": ghz, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
