"""f16 and bf16 through fb.jit: numpy's dtypes for f16, JAX's lattice for bf16, fused programs.

Promotion (api/promotion.py, docs/DTYPES.md): f16 follows numpy exactly; bf16 follows JAX
(`jnp.promote_types`, table below, read from jax 0.4 in /work/benchenv): `bf16 * 2.0` and
`bf16 @ bf16` stay bf16, `bf16 + f16` is f32, `bf16 + int32 array` is bf16 (numpy + ml_dtypes:
float64). The programs: a bf16 MLP and an f16 MLP, x @ W1 + b1 -> GELU -> @ W2 + b2, fused
(explain shows the regions), against the f32 reference.

MLP tolerance, elementwise: |fb - ref| <= 4 u (|h| @ |W2| + |b2| + |ref|), u the unit roundoff of
the type (2^-11 f16, 2^-8 bf16). Why: each matmul is one BLAS kernel (f32 accumulation) whose
result is rounded once (<= u relative), the epilogue (bias + GELU) is one fused kernel rounded
once (<= u, GELU's slope is <= 1.13), so the hidden layer h carries <= 2.2 u relative error per
element, which the second matmul carries into at most 2.2 u * (|h| @ |W2|); the second bias add
and its rounding add <= u (|b2| + |ref|). 4 u covers the sum with margin; a kernel computing in
the narrow type op by op (k-term sums rounded at each step) would exceed it.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect.types import FAMILIES
from fusebind.api.promotion import BFLOAT16, bf16_lattice, is_floating

#: the narrow floats are a family of the element table (dialect/types.py FAMILIES): until it is
#: switched on they are refused as unsupported dtypes, and these tests have nothing to run
pytestmark = pytest.mark.skipif(not FAMILIES["narrow_float"], reason="FAMILIES['narrow_float'] is off")
BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
UNIT = {F16: 2.0 ** -11, BF16: 2.0 ** -8}

#: jnp.promote_types(a, b) for bfloat16 (jax 0.4, /work/benchenv): the lattice this module follows
JAX_BF16 = {"int8": BF16, "uint8": BF16, "int16": BF16, "int32": BF16, "int64": BF16, "bool": BF16,
            "float16": np.dtype(np.float32), "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
            "bfloat16": BF16}


def test_the_lattice_is_jaxs_for_bfloat16_and_silent_without_it() -> None:
    for other, want in JAX_BF16.items():
        other_dt = BF16 if other == "bfloat16" else np.dtype(other)
        assert bf16_lattice([BF16, other_dt]) == want, other
    assert bf16_lattice([BF16, float]) == BF16 and bf16_lattice([BF16, int]) == BF16
    assert bf16_lattice([F16, np.dtype(np.int32)]) is None  # f16 is numpy's
    assert is_floating(BF16) and is_floating(F16) and not is_floating(np.int32) and BFLOAT16 == BF16


def _x(dt: np.dtype, shape: tuple[int, ...] = (4, 8)) -> np.ndarray:
    return np.random.default_rng(3).uniform(-1.5, 1.5, shape).astype(dt)


@pytest.mark.parametrize("name, fn, args, want", [
    ("bf16 * 2.0", lambda a: a * 2.0, (BF16,), BF16),
    ("bf16 @ bf16", lambda a: a @ a.T, (BF16,), BF16),
    ("bf16 + f16", lambda a, b: a + b, (BF16, F16), np.dtype(np.float32)),
    ("bf16 + f32", lambda a, b: a + b, (BF16, np.float32), np.dtype(np.float32)),
    ("bf16 + i32 array", lambda a, b: a + b, (BF16, np.int32), BF16),
    ("np.maximum(bf16, i32)", lambda a, b: np.maximum(a, b), (BF16, np.int32), BF16),
    ("bf16 / bf16", lambda a: a / a, (BF16,), BF16),
    ("bf16 < 1", lambda a: a < 1, (BF16,), np.dtype(np.bool_)),
    ("f16 * 2.0", lambda a: a * 2.0, (F16,), F16),
    ("f16 @ f16", lambda a: a @ a.T, (F16,), F16),
    ("f16 + i32 array (numpy)", lambda a, b: a + b, (F16, np.int32), np.dtype(np.float64)),
    ("np.exp(bool) (numpy's table)", lambda a: np.exp(a > 0), (np.float32,), F16),
    ("fb.exp(bool)", lambda a: fb.exp(a > 0), (np.float32,), F16),
    ("np.tanh(bf16)", lambda a: np.tanh(a), (BF16,), BF16),
])
def test_result_dtypes(name: str, fn, args: tuple, want: np.dtype) -> None:
    arrays = [_x(np.dtype(d)) for d in args]
    got = fb.jit(fn)(*arrays)
    assert got.dtype == want, name
    # values: the same computation in f32, rounded to the result type once
    ref = fn(*[a.astype(np.float32) if is_floating(a.dtype) else a for a in arrays])
    ref = np.asarray(ref)
    tol = UNIT.get(want, 2.0 ** -24) * 4
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol)


def test_a_narrow_chain_is_one_fused_region_rounded_once() -> None:
    x = _x(BF16, (16, 64))
    f = fb.jit(lambda a: np.tanh(a * 1.5) * a + 1.0)
    got = f(x)
    a = x.astype(np.float32)
    want = (np.tanh(a * 1.5) * a + 1.0).astype(BF16)
    assert got.dtype == BF16
    assert np.max(np.abs(got.astype(np.float32) - want.astype(np.float32))) <= np.max(np.abs(want.astype(np.float32))) * 2 ** -7
    assert "region @" in f.explain(x) and "fused arm" in f.explain(x)


def _mlp(x, w1, b1, w2, b2):
    return fb.gelu(x @ w1 + b1) @ w2 + b2


def _gelu32(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))


@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
def test_an_mlp_runs_fused_and_matches_the_f32_reference(dt: np.dtype) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 32)).astype(dt)
    w1 = (rng.standard_normal((32, 64)) / 6).astype(dt)
    b1 = (rng.standard_normal(64) / 10).astype(dt)
    w2 = (rng.standard_normal((64, 16)) / 8).astype(dt)
    b2 = (rng.standard_normal(16) / 10).astype(dt)
    f = fb.jit(_mlp)
    got = f(x, w1, b1, w2, b2)
    assert got.dtype == dt and got.shape == (8, 16)
    explain = f.explain(x, w1, b1, w2, b2)
    assert "region @" in explain and "no fused regions" not in explain
    f32 = [v.astype(np.float32) for v in (x, w1, b1, w2, b2)]
    h = _gelu32(f32[0] @ f32[1] + f32[2])
    ref = h @ f32[3] + f32[4]
    bound = 4 * UNIT[dt] * (np.abs(h) @ np.abs(f32[3]) + np.abs(f32[4]) + np.abs(ref))
    err = np.abs(got.astype(np.float64) - ref)
    assert np.all(err <= bound), f"max error / bound {np.max(err / bound):.2f}"


@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
def test_reductions_accumulate_in_f32(dt: np.dtype) -> None:
    """A sum of 4096 ones: a sequential narrow accumulator stalls at 256 (bf16) / 2048 (f16), the
    f32 one is exact. (np.mean of bf16 is numpy_reductions' to map: it still reads bf16 as an
    integer dtype there, a clear refusal; f16 only here.)"""
    x = np.ones(4096, dt)
    s, mx = fb.jit(lambda a: (a.sum(), a.max()))(x)
    assert s.dtype == dt and s == dt.type(4096) and mx == dt.type(1)
    rows = fb.jit(lambda a: a.sum(axis=1))(np.full((3, 3000), 1.0, dt))
    assert rows.dtype == dt and np.array_equal(rows.astype(np.float32), np.full(3, 3000, np.float32).astype(dt))
    if dt == F16:
        m = fb.jit(lambda a: a.mean())(x)
        assert m.dtype == dt and m == dt.type(1)


@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
def test_scans_and_scatter_adds_combine_in_f32(dt: np.dtype) -> None:
    """np.cumsum and fb.at(...).add of narrow floats run native (no compile failure: a bf16 add
    would need __truncsfbf2) and combine in f32, each result rounded once."""
    x = np.random.default_rng(5).standard_normal((16, 40)).astype(dt)
    f = fb.jit(lambda a: (np.cumsum(a * 2, axis=1), fb.at(a)[np.array([0, 1, 1])].add(a[:3] * 2)))
    scan, added = f(x)
    a = x.astype(np.float32)
    want_scan = np.cumsum(a * 2, axis=1).astype(dt)
    want_added = a.copy()
    np.add.at(want_added, np.array([0, 1, 1]), (a[:3] * 2).astype(dt).astype(np.float32))
    assert scan.dtype == dt and added.dtype == dt
    assert np.array_equal(scan, want_scan) and np.array_equal(added, want_added.astype(dt))
    explain = f.explain(x)
    assert "failed" not in explain and "no static kernel" not in explain


def test_a_bfloat16_numpy_constant_is_an_operand_like_any_float() -> None:
    """ml_dtypes' bfloat16 has kind "V" (numpy's void kind), which the operand check refused as
    "not an array of numbers" for a captured constant."""
    c = np.full(8, 2.5, BF16)
    got = fb.jit(lambda a: (a + c, np.add(a, c)))(np.ones((4, 8), BF16))
    for g in got:
        assert g.dtype == BF16 and np.array_equal(g.astype(np.float32), np.full((4, 8), 3.5, np.float32))


@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
def test_softmax_rows_compile_and_round_once(dt: np.dtype) -> None:
    """The row-wise kernel (softmax: a blocked map-sum of the exp row, then x * (1/s)) computes the
    narrow row in f32; it failed to compile (an f16 1/s of a widened sum, exp inlined in f16)."""
    x = np.random.default_rng(2).standard_normal((64, 256)).astype(dt)
    f = fb.jit(lambda a: fb.softmax(a, axis=-1))
    got = f(x)
    a = x.astype(np.float32)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)).astype(dt)
    assert got.dtype == dt and ulps_at_most(got, want, dt, 1)
    explain = f.explain(x)
    assert "compile of" not in explain and "no static kernel" not in explain and "region @softmax" in explain


def ulps_at_most(got: np.ndarray, want: np.ndarray, dt: np.dtype, n: int) -> bool:
    spacing = np.abs(np.spacing(want).astype(np.float64))
    return bool(np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= n * spacing))


def test_mean_var_std_of_bfloat16_traced_arrays_match_numpy() -> None:
    """bfloat16 is kind 'V' in numpy: the reductions' float check once refused it as an integer dtype=."""
    import ml_dtypes

    x = (np.arange(8, dtype=np.float32).reshape(2, 4) / 3).astype(ml_dtypes.bfloat16)
    for f in (lambda a: np.mean(a, axis=-1), lambda a: np.var(a, axis=-1), lambda a: np.std(a)):
        got, want = fb.jit(f)(x), f(x)
        assert got.dtype == want.dtype == ml_dtypes.bfloat16 and got.shape == want.shape
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
