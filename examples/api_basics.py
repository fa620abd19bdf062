"""The Python API in a few lines: jit a numpy-style function, call it, look inside.

`fb.jit` traces the function on the first call for each input signature
(shapes, dtypes) into prim ops, fuses what has a kernel (or compiles one),
and runs the plan. `.mlir()` is the traced IR, `.optimized()` the IR after
fusion, `.explain()` the plan: regions, ids, costs and the arm each runs.

Run: python examples/api_basics.py
"""

from __future__ import annotations

import sys

import numpy as np

import fusebind as fb


@fb.jit
def gelu_residual(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x + gelu(x @ w + b): a matmul with a fused epilogue."""
    return x + fb.gelu(fb.matmul(x, w) + b)


def main() -> int:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 128)) / np.sqrt(128)).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)

    y = gelu_residual(x, w, b)
    h = x @ w + b
    expected = x + 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    err = float(np.max(np.abs(y - expected)))
    print(f"result {y.dtype}{list(y.shape)}, max abs error vs numpy {err:.3g}")
    print("--- traced IR")
    print(gelu_residual.mlir(x, w, b))
    print("--- plan")
    print(gelu_residual.explain(x, w, b))
    print("--- stats")
    print(gelu_residual.stats)
    return 0 if err < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
