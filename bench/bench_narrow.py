"""f32 / f16 / bf16 elementwise chains and a small MLP: fusebind vs numpy (+ ml_dtypes), one thread.

Workloads (1<<20 elements for the chains, rows of 1024 for softmax):
  gelu      0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (fb.gelu; numpy op by op)
  softmax   exp(x - max) / sum(exp(x - max)) over rows         (fb.softmax)
  mlp       x(256x512) @ W1(512x512) + b1 -> GELU -> @ W2(512x256) + b2
numpy computes f16 op by op in float16 (its f16 loops convert each element to f32 and back) and
bf16 through ml_dtypes' loops; fusebind computes narrow floats in f32 inside one kernel and
rounds once. Pinned to CPU 0 (`os.sched_setaffinity`), fb.jit(threads=1). Interleaved rounds,
medians (bench/timing.py); ratio = numpy / fusebind (> 1: fusebind is faster).

Run:  PYTHONPATH=/work/main /work/benchenv/bin/python bench/bench_narrow.py [--budget 2]
"""

from __future__ import annotations

import argparse
import os
import sys

import ml_dtypes
import numpy as np

import fusebind as fb
from bench.timing import fmt_ratio, fmt_time, markdown_table, measure_interleaved

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


def np_gelu(x: np.ndarray) -> np.ndarray:
    c = x.dtype.type(np.sqrt(2 / np.pi))
    return x.dtype.type(0.5) * x * (x.dtype.type(1) + np.tanh(c * (x + x.dtype.type(0.044715) * x * x * x)))


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_mlp(x, w1, b1, w2, b2):
    h = x @ w1
    h = np_gelu((h + b1.astype(h.dtype)).astype(x.dtype))
    return h @ w2 + b2


def fb_mlp(x, w1, b1, w2, b2):
    return fb.gelu(x @ w1 + b1) @ w2 + b2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per workload and dtype")
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    rng = np.random.default_rng(0)
    rows = []
    for work in ("gelu", "softmax", "mlp"):
        for name, dt in DTYPES.items():
            if work == "gelu":
                xs = (rng.standard_normal(1 << 20).astype(dt),)
                f, ref = fb.jit(fb.gelu, threads=1), np_gelu
            elif work == "softmax":
                xs = (rng.standard_normal((1024, 1024)).astype(dt),)
                f, ref = fb.jit(lambda x: fb.softmax(x, axis=-1), threads=1), np_softmax
            else:
                xs = (rng.standard_normal((256, 512)).astype(dt), (rng.standard_normal((512, 512)) / 20).astype(dt),
                      (rng.standard_normal(512) / 10).astype(dt), (rng.standard_normal((512, 256)) / 20).astype(dt),
                      (rng.standard_normal(256) / 10).astype(dt))
                f, ref = fb.jit(fb_mlp, threads=1), np_mlp
            got = f(*xs)
            want = ref(*[x.astype(np.float32) for x in xs]).astype(dt)
            err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            t = measure_interleaved({"fusebind": lambda: f(*xs), "numpy": lambda: ref(*xs)}, budget_s=args.budget)
            tf, tn = t["fusebind"].median, t["numpy"].median
            fused = "yes" if "region @" in f.explain(*xs) else "no"
            rows.append((work, name, fmt_time(tf), fmt_time(tn), fmt_ratio(tn / tf), fused, f"{err:.3g}"))
            print(*rows[-1], sep="  ", file=sys.stderr)
    print(markdown_table(["workload", "dtype", "fusebind", "numpy", "numpy/fusebind", "fused", "max |fb - f32 ref|"],
                         rows))


if __name__ == "__main__":
    main()
