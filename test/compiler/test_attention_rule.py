"""The attention rule (compiler/attention_rule.py): traced numpy attention and the ONNX-expanded
block both become one attention region run by the tiled kernel (explain() says so), with numpy's
values; near misses are not matched; when the kernel is unavailable the region runs unfused and
the answer is still numpy's; f16 is refused by the rule (its ops fuse as before)."""

from __future__ import annotations

import math
import os
import re
import sys

import numpy as np
import pytest

import fusebind as fb
import fusebind.compiler.attention_rule as attention_rule
import fusebind.runtime.attention_bind as attention_bind

SQ, SK, D = 24, 24, 8


@pytest.fixture(autouse=True)
def small_attention(monkeypatch):
    """These sizes are below the measured crossover: let the rule propose them anyway."""
    monkeypatch.setattr(attention_rule, "MIN_SCORES", 0)


def _inputs(dtype=np.float32, heads: int = 2):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((1, heads, n, D)).astype(dtype) for n in (SQ, SK, SK))


def _softmax(s):
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def causal_attention(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(D))  # a Python float: numpy keeps f32
    s = np.where(np.tril(np.ones((SQ, SK), bool)), s, -1e9)
    return _softmax(s) @ v


def biased_attention(q, k, v, bias):
    return _softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(D) + bias) @ v


def plain_attention(q, k, v):
    return _softmax(q @ np.swapaxes(k, -1, -2)) @ v


def _regions(text: str) -> list[str]:
    return re.findall(r"^region @(\S+) \(FusedOpId \d+\)", text, re.M)


def _check(y, ref, dtype=np.float32):
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


@pytest.mark.parametrize("fn,extra", [(causal_attention, ()), (plain_attention, ()),
                                      (biased_attention, (np.triu(np.full((SQ, SK), -1e4, np.float32), 1),))])
def test_traced_attention_is_one_tiled_region(fn, extra) -> None:
    args = (*_inputs(), *extra)
    f = fb.jit(fn)
    y = f(*args)
    _check(y, fn(*args))
    text = f.explain(*args)
    assert [r for r in _regions(text) if r.startswith("attention_")], text
    assert "attention:native" in text and "chosen: fused" in text, text
    assert re.search(r"^region @attention_\w+ .*prim\.transpose, prim\.matmul", text, re.M), text  # k's swapaxes


def test_f64_runs_the_tiled_kernel() -> None:
    args = _inputs(np.float64)
    f = fb.jit(causal_attention)
    _check(f(*args), causal_attention(*args), np.float64)
    assert "attention:native" in f.explain(*args)


def test_f16_is_not_matched_and_fuses_as_before() -> None:
    args = _inputs(np.float16)
    f = fb.jit(plain_attention)
    y = f(*args)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), plain_attention(*args).astype(np.float32), rtol=2e-2, atol=2e-3)
    assert not [r for r in _regions(f.explain(*args)) if r.startswith("attention_")]


def test_near_misses_are_not_matched() -> None:
    def scores_escape(q, k, v):  # the scores are read outside the form: they must exist
        s = q @ np.swapaxes(k, -1, -2)
        return _softmax(s) @ v, s

    def softmax_over_queries(q, k, v):  # a softmax over the other axis is not attention
        s = q @ np.swapaxes(k, -1, -2)
        e = np.exp(s - np.max(s, axis=-2, keepdims=True))
        return (e / np.sum(e, axis=-2, keepdims=True)) @ v

    args = _inputs()
    for fn in (scores_escape, softmax_over_queries):
        f = fb.jit(fn)
        got, want = f(*args), fn(*args)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            _check(g, w)
        assert not [r for r in _regions(f.explain(*args)) if r.startswith("attention_")]


def test_without_the_kernel_the_region_runs_unfused(monkeypatch) -> None:
    def unavailable(*_args, **_kw):
        raise attention_bind.AttentionUnavailable("attention kernel switched off for this test")

    monkeypatch.setattr(attention_bind, "attention_region_kernel", unavailable)
    args = _inputs(heads=3)  # shapes of their own: a kernel bound by another test is not reused
    f = fb.jit(causal_attention)
    _check(f(*args), causal_attention(*args))
    text = f.explain(*args)
    assert "attention kernel switched off for this test" in text, text
    assert "attention:native" not in text


def test_the_onnx_expanded_block_reaches_the_kernel() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "onnx"))
    try:
        from transformer_block_model import transformer_block
    finally:
        sys.path.pop(0)
    import fusebind.onnx
    from onnx.reference import ReferenceEvaluator

    model = transformer_block()  # test_transformer_block.py's shapes: its kernels are shared
    tokens = np.random.default_rng(1).integers(0, 32, (2, 8)).astype(np.int64)
    f = fusebind.onnx.load(model)
    y = f(tokens)
    ref = ReferenceEvaluator(model).run(None, {"tokens": tokens})[0]
    assert np.max(np.abs(y - ref)) / np.max(np.abs(ref)) < 1e-5
    text = f.explain(tokens)
    assert "attention:native" in text, text
    body = re.search(r"^region @attention_keep \(FusedOpId \d+\): \d+ ops \[(.*)\]$", text, re.M)
    assert body is not None, text
    # q, k, v head transposes and the output's: strided views the kernel reads and writes, no copies
    assert body.group(1).split(", ").count("prim.transpose") == 4, text


def test_below_the_crossover_the_rule_leaves_attention_to_the_other_rules(monkeypatch) -> None:
    monkeypatch.setattr(attention_rule, "MIN_SCORES", SQ * SK + 1)
    args = _inputs(heads=4)  # shapes of their own
    f = fb.jit(plain_attention)
    _check(f(*args), plain_attention(*args))
    text = f.explain(*args)
    assert not [r for r in _regions(text) if r.startswith("attention_")] and "attention:native" not in text, text
