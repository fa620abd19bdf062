"""numpy's integer, bitwise and division semantics through every arm (issue 14): `//`, `%`,
np.fmod, divmod, `& | ^ ~ << >>`, the logical functions and float -> int casts, on the edge
values where LLVM has undefined behaviour and numpy does not (x // 0, x % 0, MIN // -1 and
MIN % -1 must not trap in the fused kernel; shifts by the width or more, or negative; NaN, inf
and out-of-range casts give numpy's x86-64 INT_MIN), and numpy's float divmod (-0.0, inf, NaN).

Compile count dominates, so each dtype's cases are one traced function over arrays of edge
pairs, compiled once per arm: the interpreter (the ops' numpy references), arm 0 (fb.compile
without fusion) and the fused arm (fb.jit, every call fused). Values, dtype and shape exactly;
floats bit for bit (the sign of a zero and NaN included). Arm 0 compiles one static kernel per
op and dtype, so by default it runs on int32, float64 and bool (the lowering is the fused arm's,
element type aside); FUSEBIND_LONG=1 runs it on every dtype.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.trace import trace_graph
from fusebind.dialect import interpret, print_module

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
INTS = (np.int32, np.int64)
FLOATS = (np.float32, np.float64)


class Arms:
    """One traced function compiled once per arm: interpreter, arm 0 (no fusion), fused (fb.jit)."""

    def __init__(self, fn: Callable[..., Any], example: list[np.ndarray], cache: Any) -> None:
        self.module, graph = trace_graph(fn, example, [f"a{i}" for i in range(len(example))], "t")
        self.hidden = [cap.array() for cap, _ in graph.captures.values()]
        self.arm0 = fb.compile(print_module(self.module), optimize=False)
        self.fused = fb.jit(fn, cache=cache)
        self.with_arm0 = LONG or example[0].dtype in (np.int32, np.float64, np.bool_)

    def run(self, *args: np.ndarray) -> dict[str, tuple[Any, ...]]:
        out = {"interpreter": interpret(self.module, *args, *self.hidden), "fused": self.fused(*args)}
        if self.with_arm0:
            out["arm 0"] = self.arm0(*args, *self.hidden)
        return out


def exactly(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), (what, got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind == "f":  # bit for bit: -0.0 and NaN as numpy's
        same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    else:
        same = got == want
    bad = np.nonzero(~same.reshape(-1))[0][:6]
    assert not bad.size, f"{what}: at {bad} got {got.reshape(-1)[bad]} want {want.reshape(-1)[bad]}"


def check_arms(fn: Callable[..., Any], names: list[str], args: list[np.ndarray], cache: Any) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # numpy warns on x // 0 (and so does the interpreter); the values count
        want = fn(*args)
        arms = Arms(fn, args, cache)
        results = arms.run(*args)
    assert len(want) == len(names)
    for arm, got in results.items():
        assert len(got) == len(want), arm
        for name, g, w in zip(names, got, want):
            exactly(g, w, f"{args[0].dtype} {name} ({arm})")
    stats = arms.fused.stats
    assert stats.fused_calls >= 1 and stats.arm0_calls == 0, arms.fused.explain(*args)


def edge_pairs(dt: Any) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dt)
    edges = np.array([info.min, info.min + 1, info.max, info.max - 1, -7, -3, -2, -1, 0, 1, 2, 3, 7], dt)
    a, b = (v.reshape(-1) for v in np.meshgrid(edges, edges))
    return a, b


def shift_pairs(dt: Any) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dt)
    xs = np.array([0, 1, -1, 5, -5, info.min, info.max], dt)
    x, s = (v.reshape(-1) for v in np.meshgrid(xs, np.arange(-3, 71, dtype=dt)))
    return x, s


INT_CASES: dict[str, Callable[..., Any]] = {
    "a // b": lambda a, b, x, s: a // b,
    "a % b": lambda a, b, x, s: a % b,
    "np.fmod": lambda a, b, x, s: np.fmod(a, b),
    "divmod[0]": lambda a, b, x, s: divmod(a, b)[0],
    "divmod[1]": lambda a, b, x, s: np.divmod(a, b)[1],
    "np.mod": lambda a, b, x, s: np.mod(a, b),
    "a // 0": lambda a, b, x, s: a // 0,  # constant divisors: LLVM folds them by its own rules
    "a % 0": lambda a, b, x, s: a % 0,
    "a // -1": lambda a, b, x, s: a // -1,
    "a % -1": lambda a, b, x, s: a % -1,
    "fmod(a, -1)": lambda a, b, x, s: np.fmod(a, -1),
    "a & b": lambda a, b, x, s: a & b,
    "a | b": lambda a, b, x, s: a | b,
    "a ^ b": lambda a, b, x, s: a ^ b,
    "~a": lambda a, b, x, s: ~a,
    "np.invert": lambda a, b, x, s: np.invert(b),
    "a & 7 | -8": lambda a, b, x, s: (a & 7) | -8,
    "x << s": lambda a, b, x, s: x << s,
    "x >> s": lambda a, b, x, s: x >> s,
    "x << 3": lambda a, b, x, s: x << 3,
    "x >> 1": lambda a, b, x, s: x >> 1,
    "x << 64": lambda a, b, x, s: x << 64,  # the width or more, a constant count
    "x >> 64": lambda a, b, x, s: x >> 64,
    "1 << (s & 15)": lambda a, b, x, s: 1 << (s & 15),
    "logical_and": lambda a, b, x, s: np.logical_and(a, b),
    "logical_or": lambda a, b, x, s: np.logical_or(a, b),
    "logical_xor": lambda a, b, x, s: np.logical_xor(a, b),
    "logical_not": lambda a, b, x, s: np.logical_not(a),
    "a & (b > 0)": lambda a, b, x, s: a & (b > 0),  # bool with int: numpy's int dtype
}


@pytest.mark.parametrize("dt", INTS, ids=lambda d: np.dtype(d).name)
def test_integer_division_bitwise_and_shifts_match_numpy_on_every_arm(dt: Any, object_cache: Any) -> None:
    names = list(INT_CASES)
    fn = lambda a, b, x, s: tuple(INT_CASES[n](a, b, x, s) for n in names)  # noqa: E731
    check_arms(fn, names, [*edge_pairs(dt), *shift_pairs(dt)], object_cache)


FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0, 7.0, -7.0, 0.1, 1e-30, 1e30, -1e30, np.inf, -np.inf,
               np.nan]
CAST_EDGES = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, -1e19, 1e30, 2147483648.0, 2147483647.0, -2147483648.0,
              -2147483904.0, 9.3e18, -9.3e18, 2.75, -2.75, 0.0, -0.0, -0.5, 1.0]

FLOAT_CASES: dict[str, Callable[..., Any]] = {
    "a // b": lambda a, b, c: a // b,
    "a % b": lambda a, b, c: a % b,
    "np.fmod": lambda a, b, c: np.fmod(a, b),
    "divmod[0]": lambda a, b, c: np.divmod(a, b)[0],
    "divmod[1]": lambda a, b, c: divmod(a, b)[1],
    "a // 0.0": lambda a, b, c: a // 0.0,
    "a % -0.0": lambda a, b, c: a % -0.0,
    "astype(int32)": lambda a, b, c: c.astype(np.int32),
    "astype(int64)": lambda a, b, c: c.astype(np.int64),
    "astype(bool)": lambda a, b, c: c.astype(np.bool_),
    "int32 round trip": lambda a, b, c: c.astype(np.int32).astype(c.dtype),
    "int64 == MIN": lambda a, b, c: c.astype(np.int64) == np.iinfo(np.int64).min,
    "(2c).astype(int32) // 3": lambda a, b, c: (c * 2).astype(np.int32) // 3,
    "logical_xor": lambda a, b, c: np.logical_xor(a, b),  # NaN is true, -0.0 is false
    "logical_not": lambda a, b, c: np.logical_not(c),
}


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_float_divmod_fmod_and_casts_to_int_match_numpy_on_every_arm(dt: Any, object_cache: Any) -> None:
    a, b = (v.reshape(-1) for v in np.meshgrid(np.array(FLOAT_EDGES, dt), np.array(FLOAT_EDGES, dt)))
    c = np.array(CAST_EDGES, dt)
    with np.errstate(invalid="ignore"):  # numpy's x86-64 answer on this machine, pinned
        assert c.astype(np.int32)[0] == np.iinfo(np.int32).min
    names = list(FLOAT_CASES)
    fn = lambda a, b, c: tuple(FLOAT_CASES[n](a, b, c) for n in names)  # noqa: E731
    check_arms(fn, names, [a, b, c], object_cache)


BOOL_CASES: dict[str, Callable[..., Any]] = {
    "p & q": lambda p, q, i: p & q,
    "p | q": lambda p, q, i: p | q,
    "p ^ q": lambda p, q, i: p ^ q,
    "~p": lambda p, q, i: ~p,
    "np.invert": lambda p, q, i: np.invert(q),
    "p ^ True": lambda p, q, i: p ^ True,
    "p & i": lambda p, q, i: p & i,
    "i | q": lambda p, q, i: i | q,
    "logical_and": lambda p, q, i: np.logical_and(p, q),
    "logical_or": lambda p, q, i: np.logical_or(p, i),
    "logical_xor": lambda p, q, i: np.logical_xor(p, q),
    "logical_not": lambda p, q, i: np.logical_not(i),
    "(~p).all()": lambda p, q, i: (~p).all(),  # ~ on the bool read of a reduction (an i1 constant)
    "np.invert(q).any()": lambda p, q, i: np.invert(q).any(),
}


def test_bool_bitwise_and_logical_match_numpy_on_every_arm(object_cache: Any) -> None:
    p = np.array([True, False, True, False])
    q = np.array([True, True, False, False])
    i = np.array([0, -1, 2, np.iinfo(np.int32).min], np.int32)
    names = list(BOOL_CASES)
    fn = lambda p, q, i: tuple(BOOL_CASES[n](p, q, i) for n in names)  # noqa: E731
    check_arms(fn, names, [p, q, i], object_cache)


def test_the_fb_functions_are_numpy_s_traced_and_eager() -> None:
    a, b = edge_pairs(np.int32)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = (np.floor_divide(a, b), np.remainder(a, b), np.fmod(a, b))
        eager = (fb.floor_divide(a, b), fb.remainder(a, b), fb.fmod(a, b))
        traced = fb.jit(lambda a, b: (fb.floor_divide(a, b), fb.remainder(a, b), fb.fmod(a, b)))(a, b)
    for name, e, t, w in zip(("floor_divide", "remainder", "fmod"), eager, traced, want):
        exactly(e, w, f"fb.{name} eager")
        exactly(t, w, f"fb.{name} traced")


@pytest.mark.parametrize("fn", [lambda p, q: p << q, lambda p, q: np.right_shift(p, q), lambda p, q: np.fmod(p, q)],
                         ids=["<<", "right_shift", "fmod"])
def test_bool_shifts_and_fmod_compute_in_numpys_int8_loop(fn: Callable[..., Any]) -> None:
    """int8 is a fusebind dtype (issue 14's integer widths): numpy's answer, int8 (was a refusal)."""
    p, q = (v.reshape(-1) for v in np.meshgrid([True, False], [True, False]))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # fmod by False warns in numpy; the value is 0
        want = fn(p, q)
        got = fb.jit(fn)(p, q)
    assert want.dtype == np.int8
    exactly(got, want, "bool loop")


@pytest.mark.parametrize("fn", [lambda x: x & x, lambda x: x << 1, lambda x: ~x], ids=["&", "<<", "~"])
def test_bitwise_of_floats_is_numpy_s_type_error(fn: Callable[..., Any]) -> None:
    x = np.array([1.5, 2.0])
    with pytest.raises(TypeError) as want:
        fn(x)
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(fn)(x)
    assert isinstance(info.value, TypeError) and "not supported for the input types" in str(info.value)
    assert "not supported for the input types" in str(want.value)


def _xorshift_bits(x: Any) -> Any:
    """Marsaglia's xorshift64 step, then byte fields and their row sums: shifts, xor, masks and
    a reduction over them in one program (a hash or RNG kernel written in numpy)."""
    x = x ^ (x << 13)
    x = x ^ (x >> 7)  # arithmetic on int64, as numpy's
    x = x ^ (x << 17)
    low, high = x & 0xFF, (x >> 56) & 0xFF
    return x, (low | (high << 8)).sum(axis=1), ((x >> 63) & 1).astype(np.bool_)


def test_an_xorshift_hash_with_byte_fields_and_a_row_sum_runs_fused(object_cache: Any) -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, (8, 64), dtype=np.int64, endpoint=True)
    f = fb.jit(_xorshift_bits, cache=object_cache)
    for got, want, name in zip(f(x), _xorshift_bits(x), ("state", "field sums", "sign bits")):
        exactly(got, want, name)
    assert f.stats.arm0_calls == 0 and f.stats.fused_calls >= 1, f.explain(x)
