"""Benchmark of the lowering path (PERFORMANCE.md workloads), single thread.

    /work/venv/bin/python bench/bench_lowering.py [--quick] [--write bench/RESULTS.md]

For each workload and size it compiles the fused region with
`decompose_region`, then times, interleaved in rounds, fusebind's kernel, a
SOL kernel (a trivial kernel with the same boundary bytes, compiled the same
way), numpy and numexpr (1 thread; float32 constants passed as float32 so
numexpr does not promote to float64). Reports min and median per candidate and
ratios. Then compile latency per stage, and a cache hit in a new process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Callable

import numpy as np

from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.kernel import Kernel


def _t(shape: tuple[int, ...]) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


def _region(name: str, in_shapes: list[tuple[int, ...]], out_shape: tuple[int, ...], body: str) -> str:
    ins = ", ".join(f"%a{i}" for i in range(len(in_shapes)))
    tys = ", ".join(_t(s) for s in in_shapes)
    params = ", ".join(f"%x{i}: {_t(s)}" for i, s in enumerate(in_shapes))
    fparams = ", ".join(f"%a{i}: {_t(s)}" for i, s in enumerate(in_shapes))
    T = _t(out_shape)
    return textwrap.dedent(f"""\
        func.func @main({fparams}) -> {T} {{
          %r = fused.region @{name} ({ins}) : ({tys}) -> {T} {{
          ^bb0({params}):
        {textwrap.indent(body.strip(), '    ')}
          }}
          func.return %r : {T}
        }}
        """)


def relu_fma(n: int) -> str:
    T = _t((n,))
    return _region("relu_fma", [(n,)] * 3, (n,), f"""
%m = prim.mul %x0, %x1 : ({T}, {T}) -> {T}
%s = prim.add %m, %x2 : ({T}, {T}) -> {T}
%q = prim.relu %s : {T} -> {T}
fused.yield %q : {T}""")


def gelu_tanh(n: int) -> str:
    T, S = _t((n,)), "tensor<f32>"
    return _region("gelu_tanh", [(n,)], (n,), f"""
%half = prim.constant dense<0.5> : {S}
%one = prim.constant dense<1.0> : {S}
%k = prim.constant dense<0.7978845608> : {S}
%c = prim.constant dense<0.044715> : {S}
%x2 = prim.mul %x0, %x0 : ({T}, {T}) -> {T}
%x3 = prim.mul %x2, %x0 : ({T}, {T}) -> {T}
%cx3 = prim.mul %x3, %c : ({T}, {S}) -> {T}
%in = prim.add %x0, %cx3 : ({T}, {T}) -> {T}
%kin = prim.mul %in, %k : ({T}, {S}) -> {T}
%th = prim.tanh %kin : {T} -> {T}
%p1 = prim.add %th, %one : ({T}, {S}) -> {T}
%hx = prim.mul %x0, %half : ({T}, {S}) -> {T}
%y = prim.mul %hx, %p1 : ({T}, {T}) -> {T}
fused.yield %y : {T}""")


def exp_log_sqrt(n: int) -> str:
    T, S = _t((n,)), "tensor<f32>"
    return _region("exp_log_sqrt", [(n,)], (n,), f"""
%one = prim.constant dense<1.0> : {S}
%e = prim.exp %x0 : {T} -> {T}
%p = prim.add %e, %one : ({T}, {S}) -> {T}
%l = prim.log %p : {T} -> {T}
%s = prim.sqrt %l : {T} -> {T}
fused.yield %s : {T}""")


def softmax(r: int, c: int) -> str:
    T, R = _t((r, c)), _t((r, 1))
    return _region("softmax", [(r, c)], (r, c), f"""
%m = prim.reduce_max %x0 {{axes = [1], keepdims}} : {T} -> {R}
%d = prim.sub %x0, %m : ({T}, {R}) -> {T}
%e = prim.exp %d : {T} -> {T}
%s = prim.reduce_sum %e {{axes = [1], keepdims}} : {T} -> {R}
%y = prim.div %e, %s : ({T}, {R}) -> {T}
fused.yield %y : {T}""")


def layernorm(r: int, c: int) -> str:
    T, R, S = _t((r, c)), _t((r, 1)), "tensor<f32>"
    return _region("layernorm", [(r, c)], (r, c), f"""
%eps = prim.constant dense<1.0e-05> : {S}
%mu = prim.reduce_mean %x0 {{axes = [1], keepdims}} : {T} -> {R}
%d = prim.sub %x0, %mu : ({T}, {R}) -> {T}
%d2 = prim.mul %d, %d : ({T}, {T}) -> {T}
%var = prim.reduce_mean %d2 {{axes = [1], keepdims}} : {T} -> {R}
%ve = prim.add %var, %eps : ({R}, {S}) -> {R}
%rs = prim.rsqrt %ve : {R} -> {R}
%y = prim.mul %d, %rs : ({T}, {R}) -> {T}
fused.yield %y : {T}""")


def sol_kernel(n_in: int, shape: tuple[int, ...]) -> str:
    """Same boundary bytes, trivial work: out = sum of inputs (or a copy via neg)."""
    T = _t(shape)
    if n_in == 1:
        body = f"%y = prim.neg %x0 : {T} -> {T}\nfused.yield %y : {T}"
    else:
        lines, acc = [], "%x0"
        for i in range(1, n_in):
            lines.append(f"%s{i} = prim.add {acc}, %x{i} : ({T}, {T}) -> {T}")
            acc = f"%s{i}"
        body = "\n".join(lines) + f"\nfused.yield {acc} : {T}"
    return _region("sol", [shape] * n_in, shape, body)


def _np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _np_layernorm(x: np.ndarray) -> np.ndarray:
    mu = x.mean(axis=1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + np.float32(1e-5))


def compile_kernel(text: str, cache: ObjectCache):  # type: ignore[no-untyped-def]
    module = parse_module(text)
    region = next(op for op in module.walk() if op.name == "fused.region")
    t0 = time.perf_counter()
    d = decompose_region(region, cache=cache)
    t1 = time.perf_counter()
    k = Kernel.from_decomposition(d)
    t2 = time.perf_counter()
    return k, d, {**d.timings, "decompose-total": t1 - t0, "load": t2 - t1}


def bound(kernel, arrays: list[np.ndarray], out: np.ndarray) -> Callable[[], None]:  # type: ignore[no-untyped-def]
    import ctypes

    descs = [descriptor_for(a) for a in arrays] + [descriptor_for(out)]
    ptrs = [ctypes.byref(d) for d in descs]
    fn = kernel.function
    return lambda: fn(*ptrs)


def interleaved(cands: dict[str, Callable[[], object]], rounds: int) -> dict[str, tuple[float, float]]:
    times: dict[str, list[float]] = {k: [] for k in cands}
    for f in cands.values():
        f()  # warm up
    for _ in range(rounds):
        for name, f in cands.items():
            t = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t)
    return {k: (min(v), statistics.median(v)) for k, v in times.items()}


def run(quick: bool) -> list[str]:
    import numexpr as ne

    ne.set_num_threads(1)
    cache = ObjectCache(Path(tempfile.mkdtemp(prefix="fb-bench-")))
    rng = np.random.default_rng(0)
    half, one, k, c = (np.float32(v) for v in (0.5, 1.0, 0.7978845608, 0.044715))
    sizes = [1000, 100_000] if quick else [1000, 100_000, 10_000_000]
    rows = [(64, 64), (128, 1024)] if quick else [(64, 64), (128, 1024), (4096, 1024)]
    out: list[str] = []
    out.append("| workload | size | fusebind min / median | SOL min | numpy min | numexpr min | "
               "fb/SOL | numpy/fb | numexpr/fb |")
    out.append("|---|---|---|---|---|---|---|---|---|")

    def report(name: str, size: str, res: dict[str, tuple[float, float]]) -> None:
        fb, sol, npy = res["fusebind"], res["sol"], res["numpy"]
        nex = res.get("numexpr")
        us = lambda s: f"{s * 1e6:,.1f} us"  # noqa: E731
        out.append(f"| {name} | {size} | {us(fb[0])} / {us(fb[1])} | {us(sol[0])} | {us(npy[0])} | "
                   f"{us(nex[0]) if nex else 'n/a'} | {fb[0] / sol[0]:.2f}x | {npy[0] / fb[0]:.2f}x | "
                   f"{f'{nex[0] / fb[0]:.2f}x' if nex else 'n/a'} |")
        print(out[-1], flush=True)

    for n in sizes:
        rounds = 5 if n >= 10_000_000 else 30
        a, b, cc = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
        o = np.empty(n, np.float32)
        env = {"a": a, "b": b, "cc": cc, "half": half, "one": one, "k": k, "c": c}
        for name, text, arrays, np_fn, ne_fn in [
            ("relu(a*b+c)", relu_fma(n), [a, b, cc], lambda: np.maximum(a * b + cc, 0),
             lambda: ne.evaluate("where(a*b+cc > 0, a*b+cc, 0)", local_dict=env)),
            ("gelu-tanh", gelu_tanh(n), [a], lambda: half * a * (one + np.tanh(k * (a + c * a * a * a))),
             lambda: ne.evaluate("half*a*(one+tanh(k*(a+c*a*a*a)))", local_dict=env)),
            ("sqrt(log(1+exp(x)))", exp_log_sqrt(n), [a], lambda: np.sqrt(np.log(one + np.exp(a))),
             lambda: ne.evaluate("sqrt(log(one+exp(a)))", local_dict=env)),
        ]:
            kern, _, _ = compile_kernel(text, cache)
            sol, _, _ = compile_kernel(sol_kernel(len(arrays), (n,)), cache)
            o2 = np.empty_like(o)
            res = interleaved({"fusebind": bound(kern, arrays, o), "sol": bound(sol, arrays, o2),
                               "numpy": np_fn, "numexpr": ne_fn}, rounds)
            report(name, f"{n:.0e}", res)
    for r, cdim in rows:
        x = rng.standard_normal((r, cdim)).astype(np.float32)
        o = np.empty_like(x)
        o2 = np.empty_like(x)
        rounds = 10 if r * cdim >= 4_000_000 else 30
        for name, text, np_fn in [("softmax rows", softmax(r, cdim), lambda: _np_softmax(x)),
                                  ("layernorm rows", layernorm(r, cdim), lambda: _np_layernorm(x))]:
            kern, _, _ = compile_kernel(text, cache)
            sol, _, _ = compile_kernel(sol_kernel(1, (r, cdim)), cache)
            res = interleaved({"fusebind": bound(kern, [x], o), "sol": bound(sol, [x], o2), "numpy": np_fn},
                              rounds)
            report(name, f"{r}x{cdim}", res)
    return out


def compile_latency() -> list[str]:
    off = ObjectCache(None)
    compile_kernel(relu_fma(1000), off)  # warm: imports mlir/llvmlite, first JIT
    lines = ["| region | emit | mlir passes | translate | llvm O3+codegen | load | total |", "|---|---|---|---|---|---|---|"]
    for name, text in [("relu(a*b+c) 1e5", relu_fma(100_000)), ("gelu-tanh 1e5", gelu_tanh(100_000)),
                       ("softmax 128x1024", softmax(128, 1024)), ("layernorm 128x1024", layernorm(128, 1024))]:
        samples = [compile_kernel(text, off)[2] for _ in range(3)]
        best = {k: min(s[k] for s in samples) for k in samples[0]}
        ms = lambda s: f"{s * 1e3:.1f} ms"  # noqa: E731
        total = best["emit"] + best["mlir-passes"] + best["translate"] + best["llvm-o3-codegen"] + best["load"]
        lines.append(f"| {name} | {ms(best['emit'])} | {ms(best['mlir-passes'])} | {ms(best['translate'])} | "
                     f"{ms(best['llvm-o3-codegen'])} | {ms(best['load'])} | {ms(total)} |")
        print(lines[-1], flush=True)
    return lines


_HIT_SCRIPT = """
import sys, time
t0 = time.perf_counter()
from fusebind.dialect import parse_module
from fusebind.lowering import decompose_region
sys.path.insert(0, {bench_dir!r})
from bench_lowering import relu_fma, softmax
t1 = time.perf_counter()
res = []
for text in [relu_fma(100000), softmax(128, 1024)]:
    region = next(op for op in parse_module(text).walk() if op.name == "fused.region")
    t = time.perf_counter()
    d = decompose_region(region)
    from fusebind.runtime.kernel import Kernel
    k = Kernel.from_decomposition(d)
    res.append((time.perf_counter() - t, d.from_cache))
print(t1 - t0, res[0][0], res[0][1], res[1][0], res[1][1], "mlir" in sys.modules)
"""


def cache_hit_new_process() -> list[str]:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "FUSEBIND_CACHE_DIR": d}
        env.pop("FUSEBIND_CACHE", None)
        script = _HIT_SCRIPT.format(bench_dir=str(Path(__file__).parent))
        subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)  # fill
        runs = []
        for _ in range(3):
            p = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True)
            runs.append(p.stdout.split())
    best = min(runs, key=lambda r: float(r[1]))
    return [f"- imports (fusebind.dialect + lowering): {float(best[0]) * 1e3:.1f} ms",
            f"- first kernel (cache hit: emit + key + read + verify + JIT link, incl. llvmlite import/JIT init): "
            f"{float(best[1]) * 1e3:.2f} ms (from cache: {best[2]})",
            f"- second kernel: {float(best[3]) * 1e3:.2f} ms (from cache: {best[4]})",
            f"- `mlir` imported in that process: {best[5]}"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the largest sizes")
    ap.add_argument("--write", default=None, help="write the results section to this markdown file")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    table = run(args.quick)
    lat = compile_latency()
    hit = cache_hit_new_process()
    print("\n".join(hit))
    if args.write:
        import llvmlite.binding as llvm

        cmd = "/work/venv/bin/python bench/bench_lowering.py" + (" --quick" if args.quick else "") + \
            f" --write {args.write}"
        section = ["## Lowering (bench/bench_lowering.py)", "", f"Command: `{cmd}`", "",
                   f"Host CPU: {llvm.get_host_cpu_name()}; single thread; interleaved rounds; times are per call "
                   "from Python through ctypes (descriptors prepared once). SOL = a kernel with the same boundary "
                   "bytes and trivial work, compiled the same way and timed in the same rounds. numexpr runs with "
                   "1 thread and float32 constants. Machine is noisy (1.2-1.5x run to run): read ratios.", "",
                   *table, "", "### Compile latency (best of 3, cache off, after a warm-up compile)", "", *lat, "",
                   "### Cache hit in a new process", "", *hit, ""]
        path = Path(args.write)
        old = path.read_text() if path.exists() else "# Benchmark results\n\n"
        start = old.find("## Lowering (bench/bench_lowering.py)")
        if start >= 0:
            end = old.find("\n## ", start + 3)
            old = old[:start] + (old[end + 1:] if end >= 0 else "")
        path.write_text(old.rstrip() + "\n\n" + "\n".join(section) + "\n")


if __name__ == "__main__":
    main()
