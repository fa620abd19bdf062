"""The tiled attention kernel (runtime/attention.py) against numpy's composition: causal and
not, keep / drop / additive masks, several S (one not a multiple of the block), heads, f32 and
f64, with numpy's and the native block softmax; the exact fallbacks (a row that keeps nothing, a
fill whose exp does not vanish)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind.runtime.attention as att
from fusebind.runtime.attention import AttentionArgs, MaskPlans, attention, mask_plan
from fusebind.runtime.attention_bind import softmax_block_kernel
from fusebind.runtime.dtypes import descriptor_for


def reference(q, kt, v, args: AttentionArgs) -> np.ndarray:
    s = q @ kt
    if args.scale is not None:
        s = s / q.dtype.type(args.scale[1]) if args.scale[0] == "div" else s * q.dtype.type(args.scale[1])
    if args.mask_kind == "keep":
        s = np.where(args.mask, s, q.dtype.type(args.fill))
    elif args.mask_kind == "drop":
        s = np.where(args.mask, q.dtype.type(args.fill), s)
    elif args.mask_kind == "add":
        s = s + args.mask
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return (e / np.sum(e, axis=-1, keepdims=True)) @ v


def _inputs(heads: int, sq: int, sk: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, heads, sq, 8)).astype(dtype)
    kt = rng.standard_normal((2, heads, 8, sk)).astype(dtype)
    v = rng.standard_normal((2, heads, sk, 8)).astype(dtype)
    return q, kt, v


def _native(dtype):
    kernel = softmax_block_kernel("f32" if dtype == np.float32 else "f64")

    def softmax(s: np.ndarray, p: np.ndarray) -> None:
        kernel(descriptor_for(s), descriptor_for(p))
    return softmax


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(att, "BLOCK_ELEMENTS", 1)  # 16-row blocks: several blocks at these sizes
    monkeypatch.setattr(att, "MIN_ROWS", 16)
    return att.block_rows(2 * 3, 37, 37)


def _check(out, ref, dtype):
    tol = 2e-6 if dtype == np.float32 else 1e-13
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert np.max(np.abs(out - ref)) <= tol * max(1.0, np.max(np.abs(ref))), np.max(np.abs(out - ref))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["causal", "drop", "add", "none", "div"])
@pytest.mark.parametrize("sq,sk", [(37, 37), (16, 40)])
def test_matches_numpy(small_blocks, dtype, kind, sq, sk) -> None:
    assert small_blocks == 16
    q, kt, v = _inputs(3, sq, sk, dtype)
    causal = np.tril(np.ones((sq, sk), bool), k=sk - sq)
    args = {"causal": AttentionArgs(("mul", 0.35), "keep", causal, -1e9),
            "drop": AttentionArgs(("mul", 0.35), "drop", ~causal, float(np.finfo(dtype).min)),
            "add": AttentionArgs(("mul", 0.35), "add", np.where(causal, 0, -1e4).astype(dtype), None),
            "none": AttentionArgs(None, None, None, None),
            "div": AttentionArgs(("div", 2.8), "keep", causal[None, None], -np.inf)}[kind]
    ref = reference(q, kt, v, args)
    for softmax in (att._numpy_softmax, _native(dtype)):
        out = np.empty_like(ref)
        attention(q, kt, v, out, args, softmax, plans=MaskPlans())
        _check(out, ref, dtype)


def test_causal_plan_skips_the_upper_tiles() -> None:
    keep = np.tril(np.ones((64, 64), bool))
    all_rows, blocks = mask_plan(keep, 16, np.dtype(np.float32))
    assert all_rows
    assert [(b.lo, b.hi, b.c0, b.c1) for b in blocks] == [(0, 16, 1, 16), (0, 32, 17, 32), (0, 48, 33, 48),
                                                          (0, 64, 49, 64)]
    assert blocks[0].bias is not None and blocks[0].bias[0, 0] == -np.inf and blocks[0].bias[-1, -1] == 0


def test_a_row_that_keeps_nothing_is_numpys_uniform_row(small_blocks) -> None:
    q, kt, v = _inputs(3, 37, 37, np.float32)
    keep = np.tril(np.ones((37, 37), bool))
    keep[20] = False  # numpy: every score of row 20 is the fill, softmax is uniform
    args = AttentionArgs(("mul", 0.35), "keep", keep, -1e9)
    out = np.empty((2, 3, 37, 8), np.float32)
    attention(q, kt, v, out, args, _native(np.float32), plans=MaskPlans())
    ref = reference(q, kt, v, args)
    _check(out, ref, np.float32)
    np.testing.assert_allclose(out[:, :, 20], v.mean(axis=2), rtol=1e-5, atol=1e-6)


def test_a_fill_that_does_not_vanish_is_computed_over_every_column(small_blocks) -> None:
    q, kt, v = _inputs(3, 37, 37, np.float32)
    keep = np.tril(np.ones((37, 37), bool))
    args = AttentionArgs(("mul", 0.35), "keep", keep, -2.0)  # exp(-2 - max) is not 0
    out = np.empty((2, 3, 37, 8), np.float32)
    attention(q, kt, v, out, args, plans=MaskPlans())
    _check(out, reference(q, kt, v, args), np.float32)


def test_the_plan_cache_follows_the_mask_values() -> None:
    q, kt, v = _inputs(1, 32, 32, np.float32)
    plans = MaskPlans()
    keep = np.tril(np.ones((32, 32), bool))
    out = np.empty((2, 1, 32, 8), np.float32)
    for k in (keep, np.triu(np.ones((32, 32), bool)), keep):  # same shape, new values: re-planned
        args = AttentionArgs(None, "keep", k, -1e9)
        attention(q, kt, v, out, args, plans=plans)
        _check(out, reference(q, kt, v, args), np.float32)


@pytest.mark.parametrize("shape", [(2, 3, 37, 37), (1, 1, 1, 37), (37,)])
def test_per_head_and_padding_masks(small_blocks, shape) -> None:
    q, kt, v = _inputs(3, 37, 37, np.float32)
    keep = np.random.default_rng(2).random(shape) < 0.7
    keep[..., 0] = True  # every row keeps a key
    args = AttentionArgs(("mul", 0.35), "keep", keep, -1e9)
    out = np.empty((2, 3, 37, 8), np.float32)
    attention(q, kt, v, out, args, _native(np.float32), plans=MaskPlans())
    _check(out, reference(q, kt, v, args), np.float32)


def test_transposed_views_in_and_out() -> None:
    rng = np.random.default_rng(3)
    raw = rng.standard_normal((2, 37, 3, 3, 8)).astype(np.float32)  # [B, S, (q k v), H, D]
    q, kt, v = raw[:, :, 0].transpose(0, 2, 1, 3), raw[:, :, 1].transpose(0, 2, 3, 1), raw[:, :, 2].transpose(0, 2, 1, 3)
    args = AttentionArgs(("mul", 0.35), "keep", np.tril(np.ones((37, 37), bool)), -1e9)
    out_raw = np.empty((2, 37, 3, 8), np.float32)
    attention(q, kt, v, out_raw.transpose(0, 2, 1, 3), args, _native(np.float32), plans=MaskPlans())
    _check(out_raw, reference(q, kt, v, args).transpose(0, 2, 1, 3), np.float32)
