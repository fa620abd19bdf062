"""prim.reduce_argmax / prim.reduce_argmin / prim.reduce_prod (issue 14) against numpy (values,
dtype, shape) through the interpreter, arm 0 (the op's reference) and the fused arm: numpy's
first-occurrence rule (ties, all -inf / +inf rows), the first NaN winning, -0.0 == 0.0, every
axis and keepdims, integer extremes; top-1 sampling `np.argmax(logits / t, axis=-1)` as one fused
region; an empty axis is numpy's ValueError; integer products wrap as numpy's.

Compile cost: one (6, 9) shape per dtype, so each kernel is built once per object cache."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.trace import trace
from fusebind.dialect import interpret, print_module
from fusebind.dialect.errors import FusebindValueError
from fusebind.lowering.accumulate_arg import _I64_MAX

RNG = np.random.default_rng(14)


def _data(dt):
    x = (RNG.standard_normal((6, 9)) * 3).astype(dt)
    if np.dtype(dt).kind == "f":
        x[0, [2, 6]] = np.nan  # the first NaN wins, for argmax and argmin
        x[1, :] = -np.inf  # argmax of all -inf: index 0 (the accumulator starts at -inf)
        x[2, :] = np.inf
        x[3, [1, 4]] = x[3].max() + 1  # a tie: the first occurrence
        x[3, [3, 7]] = x[3].min() - 1
        x[4, :3] = [-0.0, 0.0, -0.0]
        x[4, 3:] = -1.0
    else:
        info = np.iinfo(dt)  # halved: _args doubles them
        x[1, :] = info.min // 2
        x[2, [0, 5]] = info.max // 2
        x[3, [2, 8]] = info.min // 2
    return x


def _three_ways(fn, x):
    module = trace(fn, [x], ["a0"], "f")
    f = fb.jit(fn)
    return {"interpreter": interpret(module, x), "arm 0": fb.compile(print_module(module), optimize=False)(x),
            "fused": f(x), "fused again": f(x)}, f


def _args(a):
    # a producer each, so each reduction is a fused region (the row-wise and the column form);
    # the last two alone: the ops' static kernels
    return (np.argmax(a * 2, axis=1), np.argmin(a * 3, axis=0, keepdims=True), a.argmin(1), np.argmax(a, axis=0))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64])
def test_arg_reductions_match_numpy_on_every_arm(dt) -> None:
    x = _data(dt)
    with np.errstate(invalid="ignore"):
        want = _args(x)
    got, f = _three_ways(_args, x)
    for arm, outs in got.items():
        for g, w in zip(outs, want):
            assert g.dtype == np.int64 and g.shape == w.shape and np.array_equal(g, w), (arm, g, w)
    assert f.stats.fused_calls == 4 and f.stats.arm0_calls == 0, f.stats  # two regions, two calls
    assert "no static kernel" not in f.explain(x)  # the lone ones ran as the op's static (all-dynamic) kernel


def test_argmax_axis_none_bool_and_flat_index() -> None:
    b = _data(np.float32) > 0
    f = fb.jit(lambda a: (np.argmax(a), a.argmin(), np.argmax(a, keepdims=True)))
    for g, w in zip(f(b), (np.argmax(b), b.argmin(), np.argmax(b, keepdims=True))):
        assert g.dtype == np.int64 and g.shape == np.shape(w) and np.array_equal(g, w)


def test_top1_sampling_is_one_fused_region() -> None:
    logits = RNG.standard_normal((6, 9)).astype(np.float32)
    t = np.float32(0.7)
    f = fb.jit(lambda lg, temp: np.argmax(lg / temp, axis=-1))
    assert np.array_equal(f(logits, t), np.argmax(logits / t, axis=-1)) and f(logits, t).dtype == np.int64
    explain = f.explain(logits, t)
    assert explain.count("region @") == 1 and "chosen: fused" in explain, explain
    assert f.stats.fused_calls == 2 and f.stats.arm0_calls == 0, f.stats


def test_empty_axis_is_numpys_error() -> None:
    x = np.zeros((3, 0), np.float32)
    with pytest.raises(FusebindValueError, match="attempt to get argmax of an empty sequence"):
        fb.jit(lambda a: np.argmax(a, axis=1))(x)
    r = fb.jit(lambda a: np.argmin(a, axis=0))(x)  # nothing to compute: an empty int64 result
    assert r.dtype == np.int64 and r.shape == (0,)


def test_accumulator_start_is_past_every_index() -> None:
    assert _I64_MAX == np.iinfo(np.int64).max


@pytest.mark.parametrize("dt", [np.float64, np.int32, np.int64, np.bool_])
def test_multiply_reduce_is_numpys_product(dt) -> None:
    x = (RNG.standard_normal((6, 9)) * 1.3).astype(dt)
    if np.dtype(dt).kind == "i":
        x = RNG.integers(-1000, 1000, (6, 9)).astype(dt)  # the products wrap, as numpy's

    def prods(a):
        return (np.multiply.reduce(a, axis=1), np.multiply.reduce(a, axis=0, keepdims=True),
                np.multiply.reduce(a, axis=None, initial=2), np.multiply.reduce(a, axis=1, where=a > 0, initial=1))

    got, want = fb.jit(prods)(x), prods(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.dtype(dt).kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-12)  # reassociated: within rounding of numpy's order
        else:
            assert np.array_equal(g, w), (g, w)


def test_multiply_reduce_of_an_empty_axis_is_one() -> None:
    r = fb.jit(lambda a: np.multiply.reduce(a, axis=1))(np.zeros((2, 0), np.float64))
    assert r.dtype == np.float64 and np.array_equal(r, np.ones(2))


def test_vmapped_argmax_shifts_its_axis() -> None:
    x = _data(np.float32).reshape(3, 2, 9)
    r = fb.jit(fb.vmap(lambda a: np.argmax(a * 2, axis=1)))(x)
    assert r.dtype == np.int64 and np.array_equal(r, np.argmax(x * 2, axis=2))


def test_numpy_prod() -> None:
    """np.prod and x.prod(): numpy's dtype (int32 and bool in int64, wrapping), initial=, keepdims=,
    dtype=, and the ndarray method."""
    for a in (RNG.integers(-3000, 3000, (6, 9)).astype(np.int32), RNG.standard_normal((6, 9)) > 0):

        def prods(v):
            return np.prod(v, axis=1), v.prod(), np.prod(v, axis=0, keepdims=True, initial=2), np.prod(v, dtype=np.float64)

        for g, w in zip(fb.jit(prods)(a), prods(a)):
            assert g.dtype == w.dtype and g.shape == w.shape and np.allclose(g, w, rtol=1e-12), (g, w)
