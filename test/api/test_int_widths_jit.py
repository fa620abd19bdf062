"""Every numpy integer width (int8 int16 uint8 uint16 uint32 uint64, issue 14) end to end: the
integer ops, reductions, scans, casts and promotions against numpy (values, dtype, shape) through
the interpreter, arm 0 (fb.compile without fusion: one static kernel per op) and the fused arm.

Compile count dominates, so each width's cases are outputs of one traced function over arrays of
edge values, compiled once per arm (as test_integer_semantics.check_arms). By default the matrix runs
uint8 on every arm and int16 on the interpreter and the fused arm; FUSEBIND_LONG=1 runs every width
on every arm (the casts, promotions and programs below run by default on the widths they name).
The UB edges: x // 0, x % 0, MIN // -1 (signed), shifts by the width or more and negative counts,
float -> int of NaN, inf and out-of-range values (numpy's x86-64 answer, pinned below).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import pytest

import fusebind as fb
from test_integer_semantics import LONG, Arms, exactly

WIDTHS = (np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64)
#: the default slice: uint8 on every arm, int16 on the interpreter and the fused arm (the lowering is
#: one for every width, element type aside); FUSEBIND_LONG=1 runs every width on every arm
DEFAULT_WIDTHS = (np.uint8, np.int16)
ARM0_WIDTHS = WIDTHS if LONG else (np.uint8,)
OTHER = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float32, np.float64,
         np.bool_)
#: float -> int cast edges; 16 of them, so every element is in numpy's vector loop (a float -> uint32
#: cast's scalar tail, the last n % 4 elements, goes through int64 and differs out of range)
CAST_EDGES = [np.nan, np.inf, -np.inf, -1.0, 300.0, -129.0, 1e10, -1e10, 3e9, -3e9, 1.9e19, 2.0 ** 63, 2.0 ** 64,
              255.9, -0.5, 65535.0]


def edge_pairs(dt: Any) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dt)
    vals = {info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2, 3, 7}
    if info.min < 0:
        vals |= {-1, -2, -7}
    edges = np.array(sorted(vals), dt)
    a, b = (v.reshape(-1) for v in np.meshgrid(edges, edges))
    return a, b


def shift_pairs(dt: Any) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dt)
    xs = np.array(sorted({0, 1, 5, info.min, info.max, info.max // 3}), dt)
    counts = np.arange(-3, np.dtype(dt).itemsize * 8 + 3).astype(dt)  # wraps: -3 is 253 in uint8
    x, s = (v.reshape(-1) for v in np.meshgrid(xs, counts))
    return x, s


CASES: dict[str, Callable[..., Any]] = {
    "a + b": lambda a, b, x, s, f: a + b,
    "a - b": lambda a, b, x, s, f: a - b,
    "a * b": lambda a, b, x, s, f: a * b,
    "a // b": lambda a, b, x, s, f: a // b,
    "a % b": lambda a, b, x, s, f: a % b,
    "np.fmod": lambda a, b, x, s, f: np.fmod(a, b),
    "divmod[0]": lambda a, b, x, s, f: divmod(a, b)[0],
    "divmod[1]": lambda a, b, x, s, f: np.divmod(a, b)[1],
    "a // 0": lambda a, b, x, s, f: a // 0,
    "a % 0": lambda a, b, x, s, f: a % 0,
    "a & b": lambda a, b, x, s, f: a & b,
    "a | b": lambda a, b, x, s, f: a | b,
    "a ^ b": lambda a, b, x, s, f: a ^ b,
    "~a": lambda a, b, x, s, f: ~a,
    "x << s": lambda a, b, x, s, f: x << s,
    "x >> s": lambda a, b, x, s, f: x >> s,
    "x >> 1": lambda a, b, x, s, f: x >> 1,
    "a < b": lambda a, b, x, s, f: a < b,
    "a >= b": lambda a, b, x, s, f: a >= b,
    "a == b": lambda a, b, x, s, f: a == b,
    "maximum": lambda a, b, x, s, f: np.maximum(a, b),
    "minimum": lambda a, b, x, s, f: np.minimum(a, b),
    "abs": lambda a, b, x, s, f: np.abs(a),
    "negative": lambda a, b, x, s, f: -a,
    "a + 3": lambda a, b, x, s, f: a + 3,  # a weak Python int keeps the width (NEP 50)
    "a * 2.5": lambda a, b, x, s, f: a * 2.5,  # float64
    "a / b": lambda a, b, x, s, f: a / b,  # true division in float64
    "where": lambda a, b, x, s, f: np.where(a > b, a, b),
    "clip": lambda a, b, x, s, f: np.clip(a, 1, 5),
    "sum": lambda a, b, x, s, f: a.sum(),  # the platform int: int64 / uint64
    "sum(axis)": lambda a, b, x, s, f: a.reshape(int(np.sqrt(a.size)), -1).sum(axis=0),
    "prod": lambda a, b, x, s, f: (b & 3).prod(),
    "max": lambda a, b, x, s, f: a.max(),
    "min": lambda a, b, x, s, f: b.min(),
    "argmax": lambda a, b, x, s, f: a.argmax(),
    "argmin": lambda a, b, x, s, f: b.argmin(),
    "mean": lambda a, b, x, s, f: a.mean(),
    "f.astype": lambda a, b, x, s, f: f.astype(a.dtype),  # float -> this width: numpy's x86-64 answer
    **{f"astype({np.dtype(t).name})": (lambda t: lambda a, b, x, s, f: a.astype(t))(t) for t in OTHER},
    **{f"{np.dtype(t).name} -> a": (lambda t: lambda a, b, x, s, f: b.astype(t).astype(a.dtype))(t)
       for t in OTHER if np.dtype(t).kind != "b"},
}


def check_arms(fn: Callable[..., Any], names: list[str], args: list[np.ndarray], with_arm0: bool, cache: Any) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # numpy warns on x // 0 and out-of-range casts; the values count
        want = fn(*args)
        arms = Arms(fn, args, cache)
        arms.with_arm0 = with_arm0
        results = arms.run(*args)
    assert len(want) == len(names)
    for arm, got in results.items():
        for name, g, w in zip(names, got, want):
            exactly(g, w, f"{args[0].dtype} {name} ({arm})")
    stats = arms.fused.stats
    assert stats.fused_calls >= 1 and stats.arm0_calls == 0, arms.fused.explain(*args)
    assert "no static kernel" not in arms.fused.explain(*args)


@pytest.mark.parametrize("dt", [d if d in DEFAULT_WIDTHS else pytest.param(d, marks=pytest.mark.skipif(
    not LONG, reason="FUSEBIND_LONG=1 runs every width")) for d in WIDTHS], ids=lambda d: np.dtype(d).name)
def test_every_integer_op_on_every_width_is_numpys_answer_on_every_arm(dt: Any, object_cache: Any) -> None:
    a, b = edge_pairs(dt)
    x, s = shift_pairs(dt)
    f = np.array(CAST_EDGES, np.float64)
    names = list(CASES)
    fn = lambda a, b, x, s, f: tuple(CASES[n](a, b, x, s, f) for n in names)  # noqa: E731
    check_arms(fn, names, [a, b, x, s, f], dt in ARM0_WIDTHS, object_cache)


@pytest.mark.parametrize("dt", [np.uint8, *(pytest.param(d, marks=pytest.mark.skipif(
    not LONG, reason="FUSEBIND_LONG=1 runs every width")) for d in (np.int16, np.uint64))], ids=lambda d: np.dtype(d).name)
def test_scans_are_numpys_answer_on_every_arm(dt: Any, object_cache: Any) -> None:
    """cumsum / cumprod in numpy's dtype (the platform int: uint8 -> uint64, int16 -> int64), wrapping.
    (A lone scan runs its reference inside fb.jit until a rule makes scans regions: values only.)"""
    a, b = edge_pairs(dt)
    fn = lambda a, b: (np.cumsum(a), np.cumprod(b & 3), np.cumsum(a.reshape(int(np.sqrt(a.size)), -1), axis=0))  # noqa: E731
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = fn(a, b)
        arms = Arms(fn, [a, b], object_cache)
        arms.with_arm0 = True
        results = arms.run(a, b)
    for arm, got in results.items():
        for name, g, w in zip(("cumsum", "cumprod", "cumsum(axis=0)"), got, want):
            exactly(g, w, f"{np.dtype(dt)} {name} ({arm})")


def test_float_to_unsigned_casts_are_numpys_x86_64_answer() -> None:
    """Pinned so a numpy that changes its answer fails here, not as a mismatch in the matrix."""
    f = np.array(CAST_EDGES, np.float64)
    with np.errstate(invalid="ignore"):
        assert f.astype(np.uint8)[:8].tolist() == [0, 0, 0, 255, 44, 127, 0, 0]
        assert f.astype(np.uint32)[:8].tolist() == [2 ** 31, 0, 2 ** 31, 2 ** 32 - 1, 300, 2 ** 32 - 129, 0, 2 ** 31]
        assert f.astype(np.uint64)[:4].tolist() == [2 ** 63, 0, 2 ** 63, 2 ** 64 - 1]
    g = fb.jit(lambda v: (v.astype(np.uint8), v.astype(np.uint32), v.astype(np.uint64), v.astype(np.int16)))
    with np.errstate(invalid="ignore"):
        for got, want in zip(g(f.astype(np.float32)), (f.astype(np.float32).astype(t) for t in
                                                        (np.uint8, np.uint32, np.uint64, np.int16))):
            exactly(got, want, f"float32 -> {want.dtype}")


PROMOTIONS = [  # numpy 2 (NEP 50): mixed signed/unsigned, weak Python scalars
    ("uint8 + int8", lambda u, i: u + i, np.uint8, np.int8, np.int16),
    ("uint16 * int16", lambda u, i: u * i, np.uint16, np.int16, np.int32),
    ("uint32 - int32", lambda u, i: u - i, np.uint32, np.int32, np.int64),
    ("uint64 + int64", lambda u, i: u + i, np.uint64, np.int64, np.float64),
    ("uint8 + uint16", lambda u, i: u + i, np.uint8, np.uint16, np.uint16),
    ("int8 * int16", lambda u, i: u * i, np.int8, np.int16, np.int16),
    ("uint8 max int8", lambda u, i: np.maximum(u, i), np.uint8, np.int8, np.int16),
    ("uint8 // int8", lambda u, i: u // i, np.uint8, np.int8, np.int16),
    ("uint8 + np.int8(3)", lambda u, i: u + np.int8(3), np.uint8, np.int8, np.int16),
    ("uint8 - 1", lambda u, i: u - 1, np.uint8, np.int8, np.uint8),
    ("uint8 * 1.5", lambda u, i: u * 1.5, np.uint8, np.int8, np.float64),
    ("int8 / int8", lambda u, i: i / i, np.uint8, np.int8, np.float64),
    ("uint8 == uint16", lambda u, i: u == i.astype(np.uint16), np.uint8, np.int8, np.bool_),
]


def _promotion_operands(du: Any, di: Any) -> tuple[np.ndarray, np.ndarray]:
    u = np.array([0, 1, 7, np.iinfo(du).max, np.iinfo(du).max // 2, 3], du)
    i = np.array([-1, 1, -7, np.iinfo(di).min, np.iinfo(di).max, 2], np.int64).astype(di)  # -1 wraps if unsigned
    return u, i


def test_mixed_sign_and_weak_scalar_promotion_is_numpys(object_cache: Any) -> None:
    """Every case is one output of one jitted function (one compile)."""
    args = [a for _, _, du, di, _ in PROMOTIONS for a in _promotion_operands(du, di)]

    def all_cases(*xs: Any) -> tuple:
        return tuple(fn(xs[2 * k], xs[2 * k + 1]) for k, (_, fn, _, _, _) in enumerate(PROMOTIONS))

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = all_cases(*args)
        got = fb.jit(all_cases, cache=object_cache)(*args)
    for (name, _, _, _, want_dt), g, w in zip(PROMOTIONS, got, want):
        assert w.dtype == want_dt, name
        exactly(g, w, name)


def test_a_python_int_out_of_the_width_is_numpys_overflow_error() -> None:
    u = np.array([1, 2], np.uint8)
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        u + 300
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        fb.jit(lambda x: x + 300)(u)
    with pytest.raises(OverflowError, match="Python integer 200 out of bounds for int8"):
        fb.jit(lambda x: x * 200)(u.astype(np.int8))


def test_float_functions_of_small_ints_follow_numpys_table() -> None:
    """exp(int16/uint16) is float32, exp of the 32/64-bit ints float64; exp(int8/uint8) is float16,
    which is H-B's narrow_float family: until it is on, a clear error naming float16."""
    table = ((np.int16, np.float32), (np.uint16, np.float32), (np.uint32, np.float64), (np.uint64, np.float64))
    for dt, want in table if LONG else table[::3]:
        x = np.array([0, 1, 5, 9], dt)
        got = fb.jit(lambda v: (np.exp(v), np.sqrt(v)))(x)
        for g, w in zip(got, (np.exp(x), np.sqrt(x))):
            assert g.dtype == w.dtype == want
            np.testing.assert_allclose(g, w, rtol=4 * np.finfo(want).eps)
    from fusebind.dialect.types import FAMILIES
    if not FAMILIES["narrow_float"]:
        for dt in (np.int8, np.uint8):
            with pytest.raises(fb.UnsupportedOperation, match="float16"):
                fb.jit(lambda v: np.exp(v))(np.array([1, 2], dt))


MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def normalise(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (H, W, 3) -> float32 (img / 255 - mean) / std per channel, and back to uint8."""
    y = ((img / np.float32(255.0) - MEAN) / STD).astype(np.float32)
    back = np.clip((y * STD + MEAN) * 255 + 0.5, 0, 255).astype(np.uint8)
    return y, back


def test_uint8_image_normalisation_runs_fused_and_matches_numpy(object_cache: Any) -> None:
    rng = np.random.default_rng(14)
    img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    img[0, 0] = (0, 255, 128)
    want_y, want_back = normalise(img)
    f = fb.jit(normalise, cache=object_cache)
    y, back = f(img)
    assert (y.dtype, y.shape, back.dtype, back.shape) == (np.float32, img.shape, np.uint8, img.shape)
    np.testing.assert_allclose(y, want_y, rtol=2e-6, atol=2e-6)
    # the round trip: numpy's own back is img; ours may differ by one step where y is a rounding away
    assert np.array_equal(want_back, img)
    assert np.abs(back.astype(np.int16) - want_back).max() <= 1 and (back == want_back).mean() > 0.999
    text = f.explain(img)
    assert "region @" in text and f.stats.fused_calls >= 1 and f.stats.arm0_calls == 0, text


#: the gaps issue 14's integer widths first found outside the lowering (fixed: numpy's answers now)
KNOWN_GAPS = [
    pytest.param(lambda u, i, n: u.var(), id="uint8.var"),
    pytest.param(lambda u, i, n: u + n, id="uint8 + traced Python int 300"),
    pytest.param(lambda u, i, n: i.astype(np.int64) < u.astype(np.uint64) * np.uint64(2 ** 62), id="int64 < uint64"),
    pytest.param(lambda u, i, n: (u < 300, u == -1), id="uint8 < 300"),
    pytest.param(lambda u, i, n: np.sign(u), id="np.sign(uint8)"),
    pytest.param(lambda u, i, n: (np.broadcast_to(u * 1.5, (3, 4))[:, u % 4], np.take(i * 2, i.astype(np.int16) % 4),
                                  np.take_along_axis(u * 3, (u % 4).astype(np.uint16), 0)), id="x[:, uint8 index]"),
    pytest.param(lambda u, i, n: (u.astype(np.uint64) < -1, u.astype(np.uint64) >= n - 301,
                                  -5 < u.astype(np.uint64), i.astype(np.int64) == u.astype(np.uint64)),
                 id="uint64 against negative and traced Python ints"),
    pytest.param(lambda u, i, n: (np.less(i, u.astype(np.uint64)), np.greater_equal(u.astype(np.uint64), i),
                                  np.not_equal(i.astype(np.int32), u.astype(np.uint64))), id="mixed-sign ufuncs"),
]


@pytest.mark.parametrize("fn", KNOWN_GAPS)
def test_the_first_gaps_outside_the_lowering_give_numpys_answer(fn: Callable[..., Any]) -> None:
    u = np.array([1, 200, 255, 0], np.uint8)
    i = np.array([-3, 5, 127, -128], np.int8)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            want: Any = fn(u, i, 300)
        except OverflowError as exc:  # numpy's answer for uint8 + 300
            with pytest.raises(OverflowError, match=str(exc)):
                fb.jit(fn)(u, i, 300)
            return
        got = fb.jit(fn)(u, i, 300)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        exactly(g, w, "known gap")
