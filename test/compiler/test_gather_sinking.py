"""Gather sinking (compiler/gather_sinking.py): a gather of an elementwise result gathers the
operands instead, so the fused kernel reads the argument and stores no whole-size intermediate;
values stay numpy's and index checks stay (the IR forms: test/lit/compiler/sink-gathers.mlir)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusebind as fb

RNG = np.random.default_rng(3)
Z = RNG.standard_normal((64, 50)).astype(np.float32)
Y = RNG.integers(0, 50, 64)


def cross_entropy(z, y):
    m = z.max(axis=-1, keepdims=True)
    logp = z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(logp, y[:, None], axis=-1).mean()


def test_cross_entropys_gather_reads_the_logits_argument() -> None:
    f = fb.jit(cross_entropy)
    np.testing.assert_allclose(f(Z, Y), cross_entropy(Z, Y), rtol=2e-6)
    ir = str(f.optimized(Z, Y))
    (line,) = [ln for ln in ir.splitlines() if "prim.take_along" in ln]
    # the region's block argument of z (%z_1), not a computed log-probability value
    assert re.search(r"prim\.take_along %z(_\d+)?, ", line) and "tensor<64x50xf32>" in line, line
    assert "prologue: take_along z," in f.explain(Z, Y)


def test_a_shared_elementwise_op_is_cloned_and_both_results_match() -> None:
    def f(z, y):
        d = np.exp(z * 0.5)
        return d, np.take_along_axis(d, y[:, None] % 50, axis=1) + 1.0

    got, want = fb.jit(f)(Z, Y), f(Z, Y)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_a_take_of_a_broadcasting_sum_by_computed_indices() -> None:
    w = RNG.standard_normal(50).astype(np.float32)

    def f(z, w, i):
        return np.take(z + w, i * 2, axis=1) * 3.0

    i = np.array([0, 24, -25, 3], np.int64)
    g = fb.jit(f)
    np.testing.assert_array_equal(g(Z, w, i), f(Z, w, i))
    with pytest.raises(fb.IndexOutOfBounds, match="index 50 is out of bounds for axis 1 with size 50"):
        g(Z, w, np.array([1, 25]))


def test_the_check_stays_when_nothing_is_gathered() -> None:
    def f(m, i):  # every operand has size 1 on the axis: the gather stays and checks its indices
        return np.take_along_axis(np.broadcast_to(m * 2.0, (64, 3)), i + 1, axis=1)

    m = RNG.standard_normal((64, 1)).astype(np.float32)
    i = RNG.integers(0, 2, (64, 2))
    g = fb.jit(f)
    np.testing.assert_array_equal(g(m, i), f(m, i))
    with pytest.raises(fb.IndexOutOfBounds, match="index 3 is out of bounds for axis 1 with size 3"):
        g(m, np.full((64, 2), 2))
