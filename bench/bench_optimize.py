"""optimize_graph scaling: time on chains and mixed graphs of 1e2, 1e3, 1e4 ops,
and the fitted growth exponent (time ~ n^k). Not a test: prints a table.

    /work/venv/bin/python bench/bench_optimize.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import time

from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.optimize import optimize_graph
from fusebind.compiler.recipes import RecipeRegistry
from fusebind.dialect import parse_module

T = "tensor<64xf32>"


def chain(n: int) -> str:
    ops = ["exp", "neg", "abs", "tanh"]
    lines = [f"  %v0 = prim.exp %a : {T} -> {T}"]
    lines += [f"  %v{i} = prim.{ops[i % 4]} %v{i - 1} : {T} -> {T}" for i in range(1, n)]
    return f"func.func @f(%a: {T}) -> {T} {{\n" + "\n".join(lines) + f"\n  func.return %v{n - 1} : {T}\n}}\n"


def mixed(n: int) -> str:
    """Elementwise diamonds broken every 7 ops by a reshape (a fusion barrier),
    with a reduction + broadcast-add every 11 ops and a side input."""
    lines = [f"  %v0 = prim.exp %a : {T} -> {T}"]
    for i in range(1, n):
        p, q = f"%v{i - 1}", f"%v{max(0, i - 3)}"
        if i % 7 == 0:
            lines.append(f"  %v{i} = prim.reshape {p} : {T} -> {T}")
        elif i % 11 == 0:
            lines.append(f"  %s{i} = prim.reduce_sum {p} {{axes = [0], keepdims}} : {T} -> tensor<1xf32>")
            lines.append(f"  %v{i} = prim.add {p}, %s{i} : ({T}, tensor<1xf32>) -> {T}")
        elif i % 3 == 0:
            lines.append(f"  %v{i} = prim.mul {p}, {q} : ({T}, {T}) -> {T}")
        elif i % 5 == 0:
            lines.append(f"  %v{i} = prim.add {p}, %b : ({T}, {T}) -> {T}")
        else:
            lines.append(f"  %v{i} = prim.neg {p} : {T} -> {T}")
    return (f"func.func @f(%a: {T}, %b: {T}) -> {T} {{\n" + "\n".join(lines)
            + f"\n  func.return %v{n - 1} : {T}\n}}\n")


def measure(text: str, repeat: int) -> tuple[float, int]:
    module = parse_module(text)
    best, fused = math.inf, 0
    for _ in range(repeat):
        ctx = OptimizationContext.gate_all(recipes=RecipeRegistry())
        t0 = time.perf_counter()
        result = optimize_graph(module, ctx)
        best = min(best, time.perf_counter() - t0)
        fused = len(result.fused())
    return best, fused


def fit_exponent(ns: list[int], ts: list[float]) -> float:
    xs, ys = [math.log(n) for n in ns], [math.log(t) for t in ts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [100, 1000, 10000]
    print("| graph | ops | best time (s) | us/op | regions fused |")
    print("|---|---|---|---|---|")
    for name, make in (("chain", chain), ("mixed", mixed)):
        times = []
        for n in sizes:
            t, fused = measure(make(n), args.repeat)
            times.append(t)
            print(f"| {name} | {n} | {t:.3f} | {t / n * 1e6:.0f} | {fused} |")
        print(f"| {name} | fit | exponent k = {fit_exponent(sizes, times):.2f} (time ~ n^k) | | |")


if __name__ == "__main__":
    main()
