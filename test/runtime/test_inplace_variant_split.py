"""An in-place region split over the native pool runs a variant compiled for any shape.

Regression: the in-place variant was compiled for the region's static shape and then called on
chunks along axis 0 (threads=2, >= SPLIT_THRESHOLD elements). Each chunk's call ran over the
whole static shape from the chunk's base, past the buffer's end: wrong values (max error 0.33 on
the SwiGLU block) and a corrupted heap ("free(): invalid pointer" at exit)."""

from __future__ import annotations

import numpy as np

import fusebind as fb
from fusebind.runtime.call import SPLIT_THRESHOLD

T, D, F = 256, 64, 512  # the epilogue's output, T x F, is above the split threshold
RNG = np.random.default_rng(5)
X = RNG.uniform(-1, 1, (T, D)).astype(np.float32)
W1 = RNG.uniform(-0.1, 0.1, (D, F)).astype(np.float32)
W3 = RNG.uniform(-0.1, 0.1, (D, F)).astype(np.float32)


def swiglu_gate(x, w1, w3):
    a = x @ w1
    return a * (1 / (1 + np.exp(-a))) * (x @ w3)


def test_a_split_in_place_epilogue_gives_numpys_values() -> None:
    assert T * F >= SPLIT_THRESHOLD
    f = fb.jit(swiglu_gate, threads=2)
    want = swiglu_gate(X, W1, W3)
    for _ in range(3):  # the first call plans, the next run the fast path
        got = f(X, W1, W3)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    why = f.explain(X, W1, W3)
    assert "its in-place kernel variant" in why and "split over 2 threads" in why, why
    # one thread: the same epilogue values (BLAS at one thread may round the matmul differently)
    np.testing.assert_allclose(fb.jit(swiglu_gate, threads=1)(X, W1, W3), got, rtol=1e-5, atol=1e-7)
