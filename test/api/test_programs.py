"""Whole programs people write (issue 13's list), run fused and checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

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


def _regions(explain: str) -> list[str]:
    return [line for line in explain.splitlines() if line.startswith("region @")]


def test_cross_entropy_with_integer_labels_runs_fused() -> None:
    """log-softmax, then the label's entry by take_along_axis, then the mean: the gather is an index
    map of the region that computes the loss (no intermediate log-probability array)."""
    logits = RNG.standard_normal((32, 10)).astype(np.float32)
    labels = RNG.integers(0, 10, 32).astype(np.int64)

    def cross_entropy(z, y):
        m = z.max(axis=-1, keepdims=True)
        logp = z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))
        return -np.take_along_axis(logp, y[:, None], axis=-1).mean()

    f = fb.jit(cross_entropy)
    got, want = f(logits, labels), cross_entropy(logits, labels)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape == ()
    np.testing.assert_allclose(got, want, rtol=2e-6)
    assert f.stats.arm0_calls == 0
    assert any("prim.take_along" in r for r in _regions(f.explain(logits, labels)))
    with pytest.raises(fb.IndexOutOfBounds, match="index 10 is out of bounds for axis 1 with size 10"):
        f(logits, np.where(np.arange(32) == 3, 10, labels))


def test_rope_with_slices_and_concatenate_is_one_fused_region() -> None:
    """RoPE as written in models: rotate_half by slicing and concatenate, times cos and sin."""
    x = RNG.standard_normal((4, T, D)).astype(np.float32)
    ang = np.arange(T, dtype=np.float32)[:, None] / (10000.0 ** (np.arange(0, D, 2, dtype=np.float32) / D))
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1).astype(np.float32)
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1).astype(np.float32)

    def rope(x, cos, sin):
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + np.concatenate([-x2, x1], axis=-1) * sin

    f = fb.jit(rope)
    got, want = f(x, cos, sin), rope(x, cos, sin)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    regions = _regions(f.explain(x, cos, sin))
    assert len(regions) == 1 and "prim.concat" in regions[0] and "prim.slice" in regions[0], regions
    assert f.stats.arm0_calls == 0


def test_scatter_add_histogram_with_fb_at() -> None:
    labels = RNG.integers(0, 64, 4096).astype(np.int64)
    weights = RNG.random(4096).astype(np.float32)

    def hist(y, w):
        return fb.at(np.zeros(64, np.float32))[y].add(w), fb.at(np.zeros(64, np.int64))[y].add(1)

    f = fb.jit(hist)
    (h, c), want_c = f(labels, weights), np.bincount(labels, minlength=64)
    want_h = np.zeros(64, np.float32)
    np.add.at(want_h, labels, weights)
    assert h.dtype == np.float32 and c.dtype == np.int64 and h.shape == c.shape == (64,)
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(h, want_h)  # the same order of additions as np.add.at
    assert f.stats.arm0_calls == 0


def test_model_forward_with_a_dict_of_parameters_and_a_static_flag() -> None:
    rng = np.random.default_rng(5)
    params = {"w1": rng.standard_normal((D, 16)).astype(np.float32), "b1": rng.standard_normal(16).astype(np.float32),
              "w2": rng.standard_normal((16, D)).astype(np.float32), "ln": {"g": np.ones(D, np.float32) * 1.5}}
    x = rng.standard_normal((T, D)).astype(np.float32)

    def forward(params, x, *, residual=True, eps=1e-5):
        h = np.maximum(x @ params["w1"] + params["b1"], 0) @ params["w2"]
        h = x + h if residual else h
        mu = h.mean(axis=-1, keepdims=True)
        var = ((h - mu) ** 2).mean(axis=-1, keepdims=True)
        return {"y": (h - mu) / np.sqrt(var + np.float32(eps)) * params["ln"]["g"], "mean": mu[:, 0]}

    f = fb.jit(forward, static_argnames=("residual",))
    for residual in (True, False):
        got, want = f(params, x, residual=residual), forward(params, x, residual=residual)
        assert sorted(got) == ["mean", "y"]
        for k in want:
            assert got[k].dtype == want[k].dtype == np.float32 and got[k].shape == want[k].shape
            np.testing.assert_allclose(got[k], want[k], rtol=2e-5, atol=2e-5)
    assert f.stats.traces == 2 and f.stats.arm0_calls == 0  # one trace per value of the static flag
    f(params, x * 2, residual=True)
    assert f.stats.traces == 2
