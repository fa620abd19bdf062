"""The native attention kernel (lowering/attention_ir.py, runtime/attention_native.py) against
numpy's composition: no mask, causal keep / drop masks (-inf and finite fills), mul and div
scales, transposed views in and out, rows and key counts that are not multiples of the lanes or
the block; NaN rows as numpy's; bitwise the same result on 1, 2, 4 and 8 pool threads; and what
it does not cover (f64, additive masks, rows keeping nothing, a fill that does not vanish) is
answered False, so the tiled loop computes it (through fb.jit: numpy's values, NaN rows too)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusebind as fb
import fusebind.compiler.attention_rule as attention_rule
from fusebind.runtime.attention import AttentionArgs, MaskPlans
from fusebind.runtime.attention_native import NativeAttention, block_rows
from fusebind.runtime.pool import NativePool

# one set of shapes for every case: 2 x 3 heads, 150 queries, 141 keys (block tails, lane tails)
B, H, SQ, SK, D, DV = 2, 3, 150, 141, 40, 36


def reference(q, kt, v, args: AttentionArgs) -> np.ndarray:
    s = q @ kt
    if args.scale is not None:
        c = q.dtype.type(args.scale[1])
        s = s / c if args.scale[0] == "div" else s * c
    if args.mask_kind == "keep":
        s = np.where(args.mask, s, q.dtype.type(args.fill))
    elif args.mask_kind == "drop":
        s = np.where(args.mask, q.dtype.type(args.fill), s)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        return (e / np.sum(e, axis=-1, keepdims=True)) @ v


def _inputs(seed: int = 0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, SQ, D)).astype(dtype)
    kt = rng.standard_normal((B, H, D, SK)).astype(dtype)
    v = rng.standard_normal((B, H, SK, DV)).astype(dtype)
    return q, kt, v


CAUSAL = np.tril(np.ones((SQ, SK), bool))
CASES = {
    "plain": AttentionArgs(None, None, None, None),
    "mul": AttentionArgs(("mul", 1 / math.sqrt(D)), None, None, None),
    "div": AttentionArgs(("div", math.sqrt(D)), None, None, None),
    "mul negative": AttentionArgs(("mul", -0.3), None, None, None),  # not folded into the exp
    "causal -inf": AttentionArgs(("mul", 0.125), "keep", CAUSAL, -math.inf),
    "causal drop -1e9": AttentionArgs(("div", 8.0), "drop", ~CAUSAL, -1e9),
    "band": AttentionArgs(None, "keep", np.triu(CAUSAL, -40), -math.inf),
}


def _run(q, kt, v, args, pool=None, out=None):
    out = np.full(q.shape[:-1] + (v.shape[-1],), np.nan, np.float32) if out is None else out
    assert NativeAttention(pool).run(q, kt, v, out, args, MaskPlans())
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_numpy(case) -> None:
    q, kt, v = _inputs()
    args = CASES[case]
    np.testing.assert_allclose(_run(q, kt, v, args), reference(q, kt, v, args), rtol=1e-4, atol=1e-6)


def test_transposed_views_in_and_out() -> None:
    rng = np.random.default_rng(1)
    q = rng.standard_normal((B, SQ, H, D)).astype(np.float32).transpose(0, 2, 1, 3)  # rows strided by H*D
    k = rng.standard_normal((B, H, SK, D)).astype(np.float32)
    v = rng.standard_normal((B, SK, H, DV)).astype(np.float32).transpose(0, 2, 1, 3)
    kt = k.swapaxes(-1, -2)  # column-major matrices: the gemm's Trans flag
    raw = np.full((B, SQ, H, DV), np.nan, np.float32)
    args = CASES["causal -inf"]
    _run(q, kt, v, args, out=raw.transpose(0, 2, 1, 3))
    np.testing.assert_allclose(raw.transpose(0, 2, 1, 3), reference(q, kt, v, args), rtol=1e-4, atol=1e-6)


def test_nan_and_inf_rows_are_numpys() -> None:
    q, kt, v = _inputs(2)
    q[0, 1, 7, 3] = np.nan  # every score of the row NaN
    q[1, 2, 100, :] = np.inf  # +-inf scores: inf - inf in the softmax
    kt[1, 0, :, 5] = np.nan  # one key NaN: every row that keeps it
    for case in ("mul", "causal -inf"):
        got, want = _run(q, kt, v, CASES[case]), reference(q, kt, v, CASES[case])
        assert np.isnan(want).any()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_bitwise_the_same_at_any_thread_count() -> None:
    q, kt, v = _inputs(3)
    for case in ("mul", "causal -inf"):
        results = []
        for threads in (1, 2, 4, 8):
            pool = NativePool(threads)
            try:
                results.append(_run(q, kt, v, CASES[case], pool))
            finally:
                pool.close()
        for r in results[1:]:
            assert r.tobytes() == results[0].tobytes(), case


def test_tasks_are_fixed_by_shape() -> None:
    assert block_rows(8, 2048, 2048) == 128 and block_rows(8, 128, 128) == 128
    assert block_rows(1, 256, 256) == 64  # a 2-D block still gives MIN_TASKS tasks
    assert block_rows(1, 16, 16) == 16
    assert block_rows(8, 128, 128, masked=True) == 64 and block_rows(8, 2048, 2048, masked=True) == 128


def test_what_it_does_not_cover_is_answered_false() -> None:
    q, kt, v = _inputs(4)
    out = np.zeros((B, H, SQ, DV), np.float32)
    na = NativeAttention()
    nothing = CAUSAL.copy()
    nothing[5] = False  # a row that keeps nothing: numpy's answer needs every column
    refused = [(q.astype(np.float64), kt.astype(np.float64), v.astype(np.float64), out.astype(np.float64),
                CASES["mul"]),
               (q, kt, v, out, AttentionArgs(None, "add", np.zeros((SQ, SK), np.float32), None)),
               (q, kt, v, out, AttentionArgs(None, "keep", nothing, -math.inf)),
               (q, kt, v, out, AttentionArgs(None, "keep", CAUSAL, -5.0)),  # exp(-5 - max) is not 0
               (q, kt, v, out, AttentionArgs(None, "keep", np.broadcast_to(CAUSAL, (B, H, SQ, SK)), -math.inf)),
               (q[..., ::2], kt[..., ::2, :], v, out, CASES["mul"])]  # no unit stride in q's matrices
    for args in refused:
        assert not na.run(*args[:4], args[4], MaskPlans())
    assert not out.any()


def test_fully_masked_rows_through_the_jit_are_numpys_nan(monkeypatch) -> None:
    monkeypatch.setattr(attention_rule, "MIN_SCORES", 0)
    keep = CAUSAL.copy()
    keep[9] = False

    def masked(q, k, v):
        s = q @ np.swapaxes(k, -1, -2) * 0.125
        s = np.where(keep, s, -np.inf)
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True) @ v

    q, kt, v = _inputs(5)
    k = np.ascontiguousarray(kt.swapaxes(-1, -2))
    f = fb.jit(masked)
    got = f(q, k, v)
    with np.errstate(invalid="ignore"):
        want = masked(q, k, v)
    assert np.isnan(want[:, :, 9]).all() and not np.isnan(np.delete(want, 9, axis=2)).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert "attention:native" in f.explain(q, k, v)


def test_a_mask_argument_is_replanned_when_its_values_change(monkeypatch) -> None:
    monkeypatch.setattr(attention_rule, "MIN_SCORES", 0)

    def masked(q, k, v, keep):
        s = np.where(keep, q @ np.swapaxes(k, -1, -2) * 0.125, -np.inf)
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True) @ v

    q, kt, v = _inputs(6)
    k = np.ascontiguousarray(kt.swapaxes(-1, -2))
    f = fb.jit(masked)
    for keep in (CAUSAL, np.triu(CAUSAL, -40), CAUSAL):
        np.testing.assert_allclose(f(q, k, v, keep), masked(q, k, v, keep), rtol=1e-4, atol=1e-6)
    assert "attention:native" in f.explain(q, k, v, CAUSAL)


def test_repeated_calls_follow_their_operands(monkeypatch) -> None:
    """The bound kernel replays its plan for the same layout: new values, new buffers."""
    monkeypatch.setattr(attention_rule, "MIN_SCORES", 0)

    def causal(q, k, v):
        s = np.where(CAUSAL, q @ np.swapaxes(k, -1, -2) * 0.125, -np.inf)
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True) @ v

    f = fb.jit(causal)
    kept = []
    for seed in (7, 8, 7):
        q, kt, v = _inputs(seed)
        k = np.ascontiguousarray(kt.swapaxes(-1, -2))
        y = f(q, k, v)
        np.testing.assert_allclose(y, causal(q, k, v), rtol=1e-4, atol=1e-6)
        kept.append(y)  # results stay alive: each call writes a new buffer
    assert kept[0].tobytes() == kept[2].tobytes() and kept[0].tobytes() != kept[1].tobytes()
    assert "attention:native" in f.explain(q, k, v)
