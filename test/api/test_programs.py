"""Whole programs people write (issue 13's list), run fused and checked against numpy."""

from __future__ import annotations

import numpy as np

import fusebind as fb

T, D = 16, 8
RNG = np.random.default_rng(0)
Q, K, V = (RNG.standard_normal((T, D)).astype(np.float32) for _ in range(3))


def causal_attention(q, k, v):
    s = (q @ k.T) / np.float32(np.sqrt(D))
    mask = np.triu(np.ones((T, T), dtype=bool), k=1)  # a constant: baked into the trace
    s = np.where(mask, np.float32(-np.inf), s)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def test_causal_mask_attention_with_triu_and_where_runs_fused() -> None:
    f = fb.jit(causal_attention)
    got, want = f(Q, K, V), causal_attention(Q, K, V)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    assert f.stats.fused_calls == 1 and f.stats.arm0_calls == 0
    regions = [line for line in f.explain(Q, K, V).splitlines() if line.startswith("region @")]
    assert len(regions) == 1 and "prim.select" in regions[0] and "prim.reduce_max" in regions[0]
    # the first row attends only to itself: softmax of one finite score is exactly 1
    np.testing.assert_allclose(got[0], V[0], rtol=1e-6)
