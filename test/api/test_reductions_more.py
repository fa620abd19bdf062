"""issue 14's reductions on traced arrays against numpy (values, dtype, shape): fb.logsumexp
(scipy's semantics: all -inf slices give -inf, +inf gives inf, NaN propagates, integers in
float64), np.average with constant weights (1-D along an axis, full shape, returned=, keepdims=,
integer a in float64; zero-sum and mis-shaped weights are numpy's errors, traced weights a clear
refusal), var/std with ddof, ptp, count_nonzero and the nan-reductions in one traced function
per dtype (one compile each; the i32 one under FUSEBIND_LONG=1)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect.errors import FusebindError, FusebindValueError, UnsupportedOperation

RNG = np.random.default_rng(1414)
X = (RNG.standard_normal((6, 9)) * 20).astype(np.float32)
X[1, :] = -np.inf
X[2, 4] = np.inf
X[3, 0] = np.nan
XI = RNG.integers(-9, 9, (6, 9)).astype(np.int32)
W1 = RNG.random(9).astype(np.float32)
WF = RNG.random((6, 9))


def _lse_ref(a, axis=None, keepdims=False):
    """scipy.special.logsumexp's definition (scipy is not a dependency)."""
    a = a.astype(np.float64) if a.dtype.kind in "iub" else a
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else (np.squeeze(out, axis=axis) if axis is not None else out.reshape(()))


def _check(got, want, rtol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, equal_nan=True)


def test_logsumexp_is_scipys() -> None:
    f = fb.jit(lambda a: (fb.logsumexp(a, axis=1), fb.logsumexp(a, axis=0, keepdims=True), fb.logsumexp(a)))
    got = f(X)
    _check(got[0], _lse_ref(X, 1), 1e-6)
    assert got[0][1] == -np.inf and got[0][2] == np.inf and np.isnan(got[0][3])  # the -inf row is -inf, not nan
    _check(got[1], _lse_ref(X, 0, True), 1e-6)
    _check(got[2], _lse_ref(X), 1e-6)
    _check(fb.jit(lambda a: fb.logsumexp(a, axis=-1))(XI), _lse_ref(XI, -1), 1e-12)  # int32 in float64


def test_logsumexp_refusals() -> None:
    with pytest.raises(UnsupportedOperation, match=r"fusebind.logsumexp\(..., b= or return_sign=True\) is not "
                                                   r"supported; scale inside"):
        fb.jit(lambda a: fb.logsumexp(a, b=a))(X)
    with pytest.raises(UnsupportedOperation, match=r"fusebind.logsumexp works on traced arrays inside a "
                                                   r"@fusebind.jit function; got ndarray \(outside one, use "
                                                   r"scipy.special.logsumexp"):
        fb.logsumexp(X)


def _averages(a):
    return (np.average(a, axis=1, weights=W1), np.average(a, weights=WF), np.average(a, axis=0, weights=WF,
                                                                                     keepdims=True),
            *np.average(a, axis=1, weights=W1, returned=True), *np.average(a, axis=0, returned=True))


@pytest.mark.parametrize("a", [np.nan_to_num(X, posinf=3, neginf=-3), XI], ids=["f32", "i32"])
def test_average_with_constant_weights(a) -> None:
    for g, w in zip(fb.jit(_averages)(a), _averages(a)):
        _check(g, w, 1e-5)


def test_average_errors() -> None:
    with pytest.raises(FusebindError, match="numpy.average: Weights sum to zero, can't be normalized"):
        fb.jit(lambda a: np.average(a, axis=1, weights=np.zeros(9)))(X)
    with pytest.raises(FusebindValueError, match="numpy.average: Shape of weights must be consistent with shape of "
                                                 "a along specified axis"):
        fb.jit(lambda a: np.average(a, axis=1, weights=np.ones(3)))(X)
    with pytest.raises(FusebindError):  # traced weights: never an unchecked division by a zero sum
        fb.jit(lambda a: np.average(a, axis=1, weights=a))(X)


def _many(a):
    return (np.var(a, axis=1), np.var(a, axis=0, ddof=1), np.std(a, ddof=1), a.std(axis=1, ddof=2, keepdims=True),
            np.ptp(a, axis=1), np.count_nonzero(a, axis=0), np.count_nonzero(a > 0), np.nansum(a, axis=1),
            np.nanmax(a, axis=0), np.nanmin(a, axis=1), np.nanmean(a, axis=1))


@pytest.mark.parametrize("a", [np.where(np.isinf(X), 1.5, X), pytest.param(XI, marks=pytest.mark.slow)],
                         ids=["f32 with a nan", "i32"])  # i32 (11 kernels) under FUSEBIND_LONG=1
def test_moment_and_nan_reductions(a) -> None:
    with np.errstate(invalid="ignore"):
        want = _many(a)
    for g, w in zip(fb.jit(_many)(a), want):
        _check(g, w, 2e-5 if a.dtype == np.float32 else 1e-12)


def test_variance_normalised_features_run_fused() -> None:
    """issue 14's program: (x - mean) / std(ddof=1) per feature column, fused, numpy's values."""
    a = np.where(np.isfinite(X), X, 0.5)
    f = fb.jit(lambda v: (v - v.mean(axis=0)) / np.std(v, axis=0, ddof=1))
    _check(f(a), (a - a.mean(axis=0)) / np.std(a, axis=0, ddof=1), 2e-5)
    assert f.stats.fused_calls >= 1 and f.stats.arm0_calls == 0, f.stats


def test_nanvar_nanstd_nanprod() -> None:
    """np.nanvar / nanstd / nanprod: NaNs left out, ddof, NaN where count - ddof <= 0, integers as
    var/std/prod."""
    a = np.where(np.isinf(X), 1.5, X) / 20
    a[4, :8] = np.nan  # one non-NaN left: ddof=1 gives NaN (numpy warns)

    def nans(v):
        return (np.nanvar(v, axis=1), np.nanstd(v, axis=1, ddof=1, keepdims=True), np.nanvar(v, ddof=1),
                np.nanprod(v, axis=1))

    with np.errstate(invalid="ignore", divide="ignore"), pytest.warns(RuntimeWarning):
        want = nans(a)
    for g, w in zip(fb.jit(nans)(a), want):
        _check(g, w, 2e-5)
    _check(fb.jit(lambda v: np.nanstd(v, axis=0))(XI), np.nanstd(XI, axis=0), 1e-12)
