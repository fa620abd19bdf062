"""The math ops (dialect/prim_math.py): numpy's transcendentals on traced arrays, as the numpy
ufunc and as fb.<name>, give numpy's dtype and shape, numpy's values on the interpreter and
arm 0 (their reference is numpy's ufunc) and values within the measured ULP bound of
docs/FASTMATH.md on the fused arm, NaN / inf / signed zeros included; integer operands
compute in float64 as numpy's table says.

Compile cost: one fused function of all the ops per float dtype, one chain, and arm 0's static
kernels for int32 operands (f64); FUSEBIND_LONG=1 adds arm 0 for f32 and f64."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusebind as fb
from api_trace_helpers import interp, same
from fusebind.api.trace import trace
from fusebind.dialect import print_module
from fusebind.dialect.prim_math import MATH_OPS
from fusebind.lowering.fastmath import ULP_BOUNDS
from fusebind.lowering.fastmath_trig import TRIG_APPROXIMATIONS

LONG = os.environ.get("FUSEBIND_LONG") == "1"
UNARY = [c.KIND for c in MATH_OPS if c.KIND not in ("arctan2", "hypot")]
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0]


def _arrays(dtype):
    """x anywhere (specials included), u in [-1, 1] (arcsin arccos arctanh), p >= 1 (arccosh)."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-30, 30, 57), [1e5, -3e7, 1e30], SPECIALS]).astype(dtype)
    u = np.concatenate([rng.uniform(-1, 1, 60), SPECIALS]).astype(dtype)
    p = np.concatenate([1 + rng.exponential(3.0, 60), SPECIALS]).astype(dtype)
    return x, u, p


def _domain(kind, x, u, p):
    return u if kind in ("arcsin", "arccos", "arctanh") else p if kind == "arccosh" else x


def _all_ops(x, u, p):
    """Every op once: np.<ufunc>, and fb.exp2 (np.exp2 is still prim.pow(2, x), see prim_math)."""
    outs = [getattr(np, k)(_domain(k, x, u, p)) if k != "exp2" else fb.exp2(x) for k in UNARY]
    return (*outs, np.arctan2(x, u), np.hypot(x, p))


def _numpy_all(x, u, p):
    with np.errstate(all="ignore"):
        return tuple([getattr(np, k)(_domain(k, x, u, p)) for k in UNARY] + [np.arctan2(x, u), np.hypot(x, p)])


def _ulps(got, want_wide, dtype):
    with np.errstate(all="ignore"):
        rounded = np.abs(want_wide.astype(dtype))
        err = np.abs(got.astype(want_wide.dtype) - want_wide) / np.spacing(rounded).astype(want_wide.dtype)
        same_special = (np.isnan(got) & np.isnan(want_wide)) | (got == want_wide.astype(dtype))
    return np.where(same_special, 0.0, np.where(np.isnan(err), np.inf, err))


def _bound(kind, elem):
    return ULP_BOUNDS[(kind, elem)] if kind in ("expm1",) else TRIG_APPROXIMATIONS[kind].ulps[elem]


def _within_bounds(got, xup, elem) -> None:
    dtype = np.float32 if elem == "f32" else np.float64
    wide = tuple(a.astype(np.float64 if elem == "f32" else np.longdouble) for a in xup)
    for name, g, w in zip(UNARY + ["arctan2", "hypot"], got, _numpy_all(*wide)):
        assert g.dtype == dtype and g.shape == w.shape, name
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=name)
        zero = w == 0
        np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]), err_msg=name)
        err = _ulps(g, w, dtype)
        assert err.max() <= _bound(name, elem), (name, float(err.max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_interpreter_is_numpys_answer_and_arm0_within_the_bound(dtype) -> None:
    xup = _arrays(np.float64)
    xup = tuple(a[np.isfinite(a)].round().astype(dtype)[:60] if dtype == np.int32 else a.astype(dtype) for a in xup)
    module = trace(_all_ops, list(xup), ["x", "u", "p"], "f")
    assert {c.name for c in MATH_OPS} <= {op.name for op in module.walk()}
    for name, g, w in zip(UNARY + ["arctan2", "hypot"], interp(_all_ops, *xup), _numpy_all(*xup)):
        try:
            same(g, w)  # float64 for int32 operands, as numpy
        except AssertionError as exc:
            raise AssertionError(f"interpreter: {name}: {exc}") from None
    if dtype != np.int32 and not LONG:
        return  # arm 0 compiles one static kernel per op: by default only for int32 (the f64 kernels)
    # arm 0: each op is its own static kernel (the fast-math function)
    got = fb.compile(print_module(module), optimize=False)(*xup)
    _within_bounds(got, tuple(a.astype(np.float64) for a in xup) if dtype == np.int32 else xup,
                   "f32" if dtype == np.float32 else "f64")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_arm_is_within_the_documented_ulp_bound(dtype, object_cache) -> None:
    xup = _arrays(dtype)
    f = fb.jit(_all_ops, cache=object_cache)
    got = f(*xup)
    assert f.stats.arm0_calls == 0, f.explain(*xup)
    _within_bounds(got, xup, "f32" if dtype == np.float32 else "f64")


def test_a_fused_chain_of_math_ops_matches_numpy(object_cache) -> None:
    rng = np.random.default_rng(3)
    x, y = (rng.uniform(-50, 50, (8, 64)).astype(np.float32) for _ in range(2))
    z = rng.uniform(-0.9, 40, (8, 64)).astype(np.float32)

    def chain(x, y, z):
        return np.sin(x) * np.cos(y) + np.log1p(z) - np.arctan2(y, 2.0) * np.tanh(z)

    f = fb.jit(chain, cache=object_cache)
    got = f(x, y, z)
    want = chain(x.astype(np.float64), y.astype(np.float64), z.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == (8, 64)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    explain = f.explain(x, y, z)
    assert f.stats.arm0_calls == 0 and explain.count("region @") == 1 and "chosen: fused" in explain, explain


def test_dtypes_follow_numpys_table() -> None:
    i = np.arange(-3, 5, dtype=np.int32)
    f32 = np.linspace(-2, 2, 8, dtype=np.float32)
    same(fb.jit(lambda a: np.sin(a))(i), np.sin(i))  # int32 -> float64
    same(fb.jit(lambda a: fb.cos(a))(i), np.cos(i))
    got = fb.jit(lambda a, b: np.arctan2(a, b))(i, i + 10)
    assert got.dtype == np.float64 and got.shape == (8,)
    np.testing.assert_allclose(got, np.arctan2(i, i + 10), rtol=5e-16, atol=0)
    got = fb.jit(lambda a: np.hypot(a, 2.0))(f32)  # a Python float is weak: float32
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.hypot(f32, np.float32(2.0)), rtol=1e-6)
    got = fb.jit(lambda a: fb.log2(a))(np.array([1, 2, 1024, 2**40], dtype=np.int64))
    same(got, np.array([0.0, 1.0, 10.0, 40.0]))  # log2 of a power of two is exact
    assert fb.sin(np.float32(0.5)).dtype == np.float32  # no traced operand: numpy's own


def test_special_arguments_are_numpys() -> None:
    x = np.array([1.0, -1.0, np.inf, -np.inf, np.nan, -0.0, 0.0], dtype=np.float64)
    f = fb.jit(lambda a: (np.arcsin(a), np.arccos(a), np.arctanh(a), np.log1p(-a), np.tan(a), np.arccosh(a)))
    with np.errstate(all="ignore"):
        want = (np.arcsin(x), np.arccos(x), np.arctanh(x), np.log1p(-x), np.tan(x), np.arccosh(x))
    for g, w in zip(f(x), want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(g[~np.isnan(w)], w[~np.isnan(w)], rtol=4e-16)
        np.testing.assert_array_equal(np.signbit(g[w == 0]), np.signbit(w[w == 0]))  # a NaN's sign is not numpy's promise
    big = np.array([3e38, -1e38, 1e20, 12345.678, 1.5707964], dtype=np.float32)  # f32 Payne-Hanek reduction
    g = fb.jit(lambda a: (np.sin(a), np.cos(a), np.tan(a)))(big)
    for got, fn in zip(g, (np.sin, np.cos, np.tan)):
        np.testing.assert_allclose(got, fn(big.astype(np.float64)), rtol=1.2e-7)


def test_scalar_bodies_on_the_numpy_builder_are_the_references() -> None:
    from xdsl.ir import Block

    from fusebind.dialect.scalar import NumpyScalarBuilder
    from fusebind.dialect.types import tensor_type

    x = np.array([0.5, -0.25, 2.0, np.nan, -0.0], dtype=np.float32)
    for cls in MATH_OPS:
        n = len(cls.get_irdl_definition().operands)
        op = cls(*Block(arg_types=[tensor_type(x.shape, "f32")] * n).args)
        args = (x,) * n
        got = op.scalar_body(NumpyScalarBuilder(), *args)
        assert got.dtype == np.float32, cls.name
        np.testing.assert_array_equal(got, op.reference(*args), err_msg=cls.name)


def test_a_bool_operand_computes_in_float16_as_numpy() -> None:
    b = np.array([True, False])
    for fn in (lambda a: np.sin(a), lambda a: fb.hypot(a, a)):
        got, want = fb.jit(fn)(b), np.asarray(fn(b))
        assert got.dtype == np.float16 == want.dtype
        np.testing.assert_array_equal(got, want)
