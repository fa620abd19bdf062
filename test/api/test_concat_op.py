"""numpy's joins as `prim.concat` (issue 13): np.concatenate / stack / hstack / vstack / dstack /
column_stack / append give numpy's values, dtype and shape through the interpreter, arm 0 and the
fused arm, for every element type, every axis (negative too), zero-length and mixed-dtype pieces,
non-contiguous arguments and broadcasting consumers; RoPE (slices + concat) and a QKV split put
back together run as one fused region each.

Compile cost: the fused cases of one dtype share one function (two regions), for three dtypes by
default; the full join x axis x dtype matrix runs on the interpreter and arm 0, which compile
nothing for a concat. FUSEBIND_LONG=1 adds f64 and i32 to the fused cases and runs every join
of the matrix fused."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.trace import trace
from fusebind.dialect import interpret, print_module
from fusebind.dialect.prim_layout import ConcatOp

from api_trace_helpers import same

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


def _sample(shape, dtype, seed=0):
    v = np.random.default_rng(seed).integers(-50, 50, size=shape)
    return (v > 0) if dtype == np.bool_ else v.astype(dtype)


# every join numpy offers, each with a different layout of the same three (2, 3, 4) arrays
JOINS = {
    "concatenate axis 0": lambda a, b, c: np.concatenate([a, b, c]),
    "concatenate axis 1": lambda a, b, c: np.concatenate((a, b), axis=1),
    "concatenate axis -1": lambda a, b, c: np.concatenate([a, c, b], axis=-1),
    "concatenate axis -3": lambda a, b, c: np.concatenate([c, a], axis=-3),
    "concatenate axis None": lambda a, b, c: np.concatenate([a, b], axis=None),
    "concatenate one piece": lambda a, b, c: np.concatenate([b], axis=2),
    "concatenate with empty": lambda a, b, c: np.concatenate([a[:, :0], b, a[:, 3:], c[:, 1:]], axis=1),
    "stack axis 0": lambda a, b, c: np.stack([a, b]),
    "stack axis -1": lambda a, b, c: np.stack([a, b, c], axis=-1),
    "stack axis 2": lambda a, b, c: np.stack((c, a), axis=2),
    "hstack": lambda a, b, c: np.hstack([a, b]),
    "hstack 1-d": lambda a, b, c: np.hstack([a[0, 0], b[1, 2], c[0, 0, :1]]),
    "vstack": lambda a, b, c: np.vstack([a, b, c]),
    "vstack 1-d": lambda a, b, c: np.vstack([a[0, 0], b[1, 1]]),
    "dstack": lambda a, b, c: np.dstack([a, c]),
    "dstack 2-d": lambda a, b, c: np.dstack([a[0], b[1]]),
    "column_stack": lambda a, b, c: np.column_stack([a[0, 0], b[0, 1], c[1, 2]]),
    "column_stack 2-d": lambda a, b, c: np.column_stack([a[0], b[1]]),
    "append": lambda a, b, c: np.append(a, b),
    "append axis 1": lambda a, b, c: np.append(a, c, axis=1),
    "fb.concatenate": lambda a, b, c: fb.concatenate([a, b], axis=-2),
}


def _all_joins(a, b, c):
    return tuple(fn(a, b, c) for fn in JOINS.values())


def _abc(dtype):
    return tuple(_sample((2, 3, 4), dtype, seed) for seed in range(3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_join_matches_numpy_on_the_interpreter_and_arm0(dtype) -> None:
    abc = _abc(dtype)
    want = _all_joins(*abc)
    module = trace(_all_joins, list(abc), ["a", "b", "c"], "f")
    assert sum(isinstance(op, ConcatOp) for op in module.walk()) >= len(JOINS) - 2  # one piece: no op
    for arm, got in (("interpreter", interpret(module, *abc)),
                     ("arm 0", fb.compile(print_module(module), optimize=False)(*abc))):
        assert len(got) == len(want)
        for name, g, w in zip(JOINS, got, want):
            try:
                same(g, w)
            except AssertionError as exc:
                raise AssertionError(f"{arm}: {name}: {exc}") from None


def _fused_mix(a, b, c):
    """Joins of equal and unequal pieces (slices, a reversed one) feeding broadcasting consumers:
    two regions, one per result."""
    equal = np.concatenate([a, b[:, ::-1]], axis=-1)  # (2, 3, 8)
    unequal = np.concatenate([c[..., :3], a[..., :1], b], axis=-1)  # 3 + 1 + 4
    return equal * c[..., :1] + unequal, np.stack([a, c], axis=-1) + b[..., None]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_] + ([np.float64, np.int32] if LONG else []))
def test_joins_in_fused_regions_match_numpy(dtype, object_cache) -> None:
    abc = _abc(dtype)
    with np.errstate(over="ignore"):
        want = _fused_mix(*abc)
    f = fb.jit(_fused_mix, cache=object_cache)
    for got in (f(*abc), f(*abc)):
        for g, w in zip(got, want):
            same(g, w)
    assert f.stats.arm0_calls == 0 and f.stats.compiles <= 2
    assert f.explain(*abc).count("prim.concat") >= 3


@pytest.mark.skipif(not LONG, reason="long run: FUSEBIND_LONG=1 runs every join fused, per dtype")
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_join_fused(dtype, object_cache) -> None:
    abc = _abc(dtype)
    got = fb.jit(_all_joins, cache=object_cache)(*abc)
    for name, g, w in zip(JOINS, got, _all_joins(*abc)):
        same(g, w)


def test_mixed_dtypes_promote_as_numpy() -> None:
    i32, i64, f32, b = ((np.arange(6) % 4).astype(t).reshape(2, 3) for t in (np.int32, np.int64, np.float32, np.bool_))

    def joins(i32, i64, f32, b):
        return (np.concatenate([i32, f32]), np.concatenate([b, i32], axis=1), np.stack([i32, i64]),
                np.concatenate([f32, i64]), np.hstack([b, b]), np.append(f32, b),
                np.concatenate([i32, i32], dtype=np.float64), np.concatenate([f32, f32], dtype=np.int32,
                                                                             casting="unsafe"))
    module = trace(joins, [i32, i64, f32, b], ["i", "j", "f", "b"], "f")
    args = (i32, i64, f32, b)
    for got in (interpret(module, *args), fb.compile(print_module(module), optimize=False)(*args)):
        for g, w in zip(got, joins(*args)):
            same(g, w)

    def fused(i32, f32, b):  # the casts and the concats in one region
        return np.concatenate([i32, f32]) + np.concatenate([b, i32], axis=0)
    f = fb.jit(fused)
    same(f(i32, f32, b), fused(i32, f32, b))
    assert f.stats.arm0_calls == 0


def test_non_contiguous_arguments_and_python_scalars_in_pieces() -> None:
    big = np.arange(4 * 6 * 8, dtype=np.float64).reshape(4, 6, 8)
    a, b = big[::2, ::-1], big.transpose(1, 0, 2)[:2, :, ::2][..., :4].transpose(1, 0, 2)[::2]  # (2, 6, 8), (2, 2, 4)
    f = fb.jit(lambda a, b: (np.concatenate([a[..., :4], b], axis=1) * 2.0, np.vstack([a[0], a[1]]),
                             np.append(a[0, 0], 7)))
    got = f(a, b)
    want = (np.concatenate([a[..., :4], b], axis=1) * 2.0, np.vstack([a[0], a[1]]), np.append(a[0, 0], 7))
    for g, w in zip(got, want):
        same(g, w)


def test_join_errors_are_numpys() -> None:
    """The class numpy raises (and FusebindError) with numpy's own message."""
    x = np.zeros((2, 3), np.float32)
    cases = [
        (lambda x: np.concatenate([x, x[0]]), ValueError),
        (lambda x: np.concatenate([x, x.T], axis=1), ValueError),
        (lambda x: np.concatenate([x, x], axis=2), np.exceptions.AxisError),
        (lambda x: np.concatenate([x[0, 0], x[0, 1]]), ValueError),
        (lambda x: np.stack([x, x[:1]]), ValueError),
        (lambda x: np.vstack([x, x[0, :2]]), ValueError),
        (lambda x: np.concatenate([x, x], dtype=np.int32), TypeError),
    ]
    for fn, cls in cases:
        with pytest.raises(cls) as want:
            fn(x)
        with pytest.raises(cls) as info:
            fb.jit(fn)(x)
        assert isinstance(info.value, fb.FusebindError), repr(info.value)
        assert str(want.value).lower() in str(info.value).lower(), (str(info.value), str(want.value))


def test_a_long_axis_has_no_gather_limit() -> None:
    x = np.arange(1 << 16, dtype=np.float32)  # the masked-max gathers refused this (2^33 work)
    f = fb.jit(lambda x: np.concatenate([x, x[:5], -x]) + 1.0)
    same(f(x), np.concatenate([x, x[:5], -x]) + np.float32(1.0))


def _rope(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin


def _one_region(explain: str) -> str:
    regions = [line for line in explain.splitlines() if line.startswith("region @")]
    assert len(regions) == 1 and "chosen: fused" in explain, explain
    return regions[0]


def test_rope_with_slices_and_concat_is_one_fused_region(object_cache) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 16)).astype(np.float32)
    cos, sin = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(2))
    f = fb.jit(_rope, cache=object_cache)
    got, want = f(x, cos, sin), _rope(x, cos, sin)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    region = _one_region(f.explain(x, cos, sin))
    assert "prim.concat" in region and region.count("prim.slice") == 2, region
    assert f.stats.arm0_calls == 0
    np.testing.assert_allclose(f(x[:, ::-1], cos, sin), _rope(x[:, ::-1], cos, sin), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("split", ["slices", "np.split"])
def test_qkv_split_then_concat_back_is_one_fused_region(split, object_cache) -> None:
    x = np.random.default_rng(6).standard_normal((4, 24)).astype(np.float32)

    def qkv(x):
        q, k, v = np.split(x, 3, axis=-1) if split == "np.split" else (x[:, :8], x[:, 8:16], x[:, 16:])
        return np.concatenate([v * 2.0, q, k + 1.0], axis=-1)

    f = fb.jit(qkv, cache=object_cache)
    same(f(x), np.concatenate([x[:, 16:] * np.float32(2.0), x[:, :8], x[:, 8:16] + np.float32(1.0)], axis=-1))
    region = _one_region(f.explain(x))
    assert "prim.concat" in region and region.count("prim.slice") == 3, region
    assert f.stats.arm0_calls == 0


def test_a_concat_used_twice_nested_and_sliced_matches_numpy(object_cache) -> None:
    """A concat that is a result and is read again, a concat of a concat, a slice of a concat."""
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((16, 24)).astype(np.float32)

    def f(a, b):
        c = np.concatenate([np.exp(a), b[:, ::-1]], axis=-1)
        d = np.concatenate([c, a], axis=1)
        return c, c * 2.0, d[:, ::3] + 1.0, np.concatenate([a[::-1], a[::2]], 0) * 3.0

    g = fb.jit(f, cache=object_cache)
    for got in (g(a, b), g(a, b)):
        for x, y in zip(got, f(a, b)):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_allclose(x, y, rtol=1e-6)
    assert g.stats.arm0_calls == 0
