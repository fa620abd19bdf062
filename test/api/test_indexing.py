"""Basic indexing and splits (issue 13) as `prim.slice` + `prim.reshape`: numpy's values, dtype and
shape through the interpreter, arm 0 and the fused arm; QKV splits and a RoPE-like rotation run as
one fused region each.

Compile cost: every fused case shares one input shape and dtype, so the kernels are built once per
object cache (the session fixture)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.trace import trace
from fusebind.dialect import interpret, print_module

X = np.random.default_rng(13).standard_normal((7, 6, 8)).astype(np.float32)
# a representative set of basic keys: ints (negative too), slices of every step sign, None, Ellipsis
KEYS = [
    (slice(None), 0), (Ellipsis, slice(None, 4)), (slice(None, None, 2), None), slice(None, None, -1),
    slice(1, -1, 3), -1, (2, slice(None, None, -2), Ellipsis), (None, Ellipsis, None), (slice(5, 0, -2), 3, -3),
    (Ellipsis, 7), (slice(3, 3), slice(None), slice(1, None)), (-7, None, slice(-1, -7, -4), slice(None, None, 3)),
]


def _all_keys(x):
    return tuple(x[k] for k in KEYS)


def _all_keys_math(x):
    return tuple(x[k] * 2.0 + 1.0 for k in KEYS)


def _three_ways(fn, x, cache) -> list[tuple[np.ndarray, ...]]:
    """fn on x by the reference interpreter, arm 0 (no fusion) and the fused arm (fb.jit, synchronous)."""
    module = trace(fn, [x], ["x"], "f")
    interp = interpret(module, x)
    arm0 = fb.compile(print_module(module), optimize=False)(x)
    fused = fb.jit(fn, cache=cache)
    return [tuple(interp), tuple(arm0), tuple(fused(x)), tuple(fused(x))]


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, got.dtype, want.shape, want.dtype)
    assert np.array_equal(got, want), what


@pytest.mark.parametrize("fn", [_all_keys, _all_keys_math])
def test_basic_keys_match_numpy_on_every_arm(fn, object_cache) -> None:
    want = fn(X)
    for arm, got in zip(("interpreter", "arm 0", "fused", "fused again"), _three_ways(fn, X, object_cache)):
        assert len(got) == len(want)
        for k, g, w in zip(KEYS, got, want):
            _same(g, w, f"{arm}: x[{k}]")


def test_slices_are_fresh_arrays_not_views_of_the_argument_or_plan_buffers(object_cache) -> None:
    f = fb.jit(lambda x: ((x * 3.0)[1:, ::-1], x[::2]), cache=object_cache)
    x = X.copy()
    a, b = f(x)
    a0, b0 = a.copy(), b.copy()
    x2 = (X + 1.0).astype(np.float32)
    a2, b2 = f(x2)
    _same(a, a0, "first result kept after a second call")  # not a reused plan buffer
    _same(a2, (x2 * np.float32(3.0))[1:, ::-1], "second call")
    b[...] = 0.0
    _same(x, X, "the argument is untouched by a write to a result")
    _same(b2, x2[::2], "second call")


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.float64])
def test_other_dtypes_and_a_non_contiguous_argument(dtype) -> None:
    x = (np.arange(7 * 6 * 8).reshape(7, 6, 8) % 5).astype(dtype)
    module = trace(_all_keys, [x], ["x"], "f")
    for got in (interpret(module, x), fb.compile(print_module(module), optimize=False)(x)):
        for k, g, w in zip(KEYS, got, _all_keys(x)):
            _same(g, w, f"x[{k}]")
    view = x.transpose(2, 1, 0)[::-1]  # strides of every sign
    f = fb.jit(lambda v: (v[1:, 0], v[..., ::-3]))
    got = f(view)
    _same(got[0], view[1:, 0], "view[1:, 0]")
    _same(got[1], view[..., ::-3], "view[..., ::-3]")


def _one_fused_region(explain: str) -> None:
    assert explain.count("region @") == 1 and "not fused yet" not in explain and "chosen: fused" in explain, explain
    assert "prim.slice" in explain, explain


def _qkv_split(x):
    q, k, v = np.split(x, 3, axis=-1)
    return q * k + v


def _qkv_slice(x):
    return x[:, :8] * x[:, 8:16] + x[:, 16:]


@pytest.mark.parametrize("fn", [_qkv_split, _qkv_slice])
def test_qkv_split_runs_as_one_fused_region(fn, object_cache) -> None:
    x = np.random.default_rng(1).standard_normal((5, 24)).astype(np.float32)
    f = fb.jit(fn, cache=object_cache)
    _same(f(x), x[:, :8] * x[:, 8:16] + x[:, 16:], "qkv")
    _one_fused_region(f.explain(x))
    assert f.stats.fused_calls == 1 and f.stats.arm0_calls == 0


def test_rope_rotation_is_one_fused_region(object_cache) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 16)).astype(np.float32)
    c, s = (rng.standard_normal(8).astype(np.float32) for _ in range(2))

    def rope(x, c, s):
        h = x.shape[-1] // 2
        return x[..., :h] * c - x[..., h:] * s

    f = fb.jit(rope, cache=object_cache)
    want = x[..., :8] * c - x[..., 8:] * s
    np.testing.assert_allclose(f(x, c, s), want, rtol=1e-6, atol=1e-6)
    assert f(x, c, s).dtype == np.float32
    _one_fused_region(f.explain(x, c, s))


@pytest.mark.parametrize("split, args, kw", [
    (np.split, (X, [2, 5]), {}), (np.split, (X, 2), {"axis": 1}), (np.array_split, (X, 3), {"axis": 2}),
    (np.array_split, (X, [0, 9]), {}), (np.hsplit, (X, 3), {}), (np.vsplit, (X, [3]), {}), (np.dsplit, (X, 4), {}),
])
def test_splits_match_numpy(split, args, kw) -> None:
    got = fb.jit(lambda x: tuple(split(x, *args[1:], **kw)))(args[0])
    want = split(*args, **kw)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w, f"{split.__name__}{args[1:]}")


def test_split_of_a_long_axis_has_no_gather_limit() -> None:
    x = np.arange(1 << 22, dtype=np.float32).reshape(2, -1)  # the masked-max gather refused this (2^44 work)
    a, b = fb.jit(lambda x: tuple(np.split(x, 2, axis=1)))(x)
    _same(a, x[:, : 1 << 20], "left")
    _same(b, x[:, 1 << 20:], "right")
    _same(fb.jit(lambda x: x[:, ::-7])(x), x[:, ::-7], "x[:, ::-7]")
