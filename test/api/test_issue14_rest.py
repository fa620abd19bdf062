"""The rest of issue 14's reductions and math (helper H-F): ufunc.accumulate for add / multiply /
maximum / minimum (prim.scan sum / prod / max / min), against numpy's values, dtype and shape
through the interpreter, arm 0 (fb.compile without fusion) and the fused arm; numpy's errors and
the refusals.

Compile cost: every case is one output of one function (one arm-0 plan, one fused compile)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusebind as fb
from api_trace_helpers import interp
from fusebind.api.trace import trace
from fusebind.dialect import print_module

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
RNG = np.random.default_rng(1414)
F32 = RNG.standard_normal((5, 7)).astype(np.float32)
F32[1, 2] = np.nan  # maximum / minimum propagate it along the axis
F32[3, :4] = [-0.0, 0.0, -0.0, 0.0]  # a tie gives the new element: numpy's sign of zero
F64 = RNG.standard_normal((3, 4, 6))
I32 = RNG.integers(-100, 100, (4, 6), dtype=np.int32)
I64 = RNG.integers(-2**62, 2**62, (6, 3), dtype=np.int64)  # products wrap
BOOL = RNG.random((4, 5)) < 0.5
ARGS = [F32, F64, I32, I64, BOOL]


def _accumulate(f32, f64, i32, i64, b):
    """Each accumulate numpy offers for the four ufuncs (names in _ACC_NAMES); every scan is a region of
    its own (one compile each), so the default run takes each kind and dtype once, FUSEBIND_LONG=1 all."""
    cases = [("f32 add 0", lambda: np.add.accumulate(f32)),
             ("f32 max 1 (NaN, zeros)", lambda: np.maximum.accumulate(f32, axis=1)),
             ("f32 min 0", lambda: np.minimum.accumulate(f32, axis=0)),
             ("f32 max -1 and a consumer", lambda: np.maximum.accumulate(f32, axis=-1) * 2.0 + f32),
             ("f64 mul 2", lambda: np.multiply.accumulate(f64, axis=2)),
             ("i32 add (int64 on numpy 2)", lambda: np.add.accumulate(i32)),
             ("i32 min 0 dtype=f64", lambda: np.minimum.accumulate(i32, axis=0, dtype=np.float64)),
             ("i64 mul 0 (wraps)", lambda: np.multiply.accumulate(i64, axis=0)),
             ("bool max 1", lambda: np.maximum.accumulate(b, axis=1))]
    if LONG:
        cases += [("f64 max 1", lambda: np.maximum.accumulate(f64, axis=1)),
                  ("f64 add -1 dtype=f32", lambda: np.add.accumulate(f64, axis=-1, dtype=np.float32)),
                  ("i32 mul 1", lambda: np.multiply.accumulate(i32, axis=1)),
                  ("i32 max 1", lambda: np.maximum.accumulate(i32, axis=1)),
                  ("i32 add dtype=int32", lambda: np.add.accumulate(i32, dtype=np.int32)),
                  ("i64 min 1", lambda: np.minimum.accumulate(i64, axis=1)),
                  ("bool add 1", lambda: np.add.accumulate(b, axis=1)),
                  ("bool min 0", lambda: np.minimum.accumulate(b, axis=0)),
                  ("bool mul 1", lambda: np.multiply.accumulate(b, axis=1))]
    _ACC_NAMES[:] = [name for name, _ in cases]
    return tuple(fn() for _, fn in cases)


_ACC_NAMES: list[str] = []


def _same(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want, err_msg=what)  # NaNs in the same places
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{what}: sign bits")


def test_accumulate_is_numpys_answer_on_the_interpreter_arm0_and_fused(object_cache) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        want = _accumulate(*ARGS)
    assert want[_ACC_NAMES.index("i32 add (int64 on numpy 2)")].dtype == np.int64  # the platform int, like cumsum
    assert len(want) == len(_ACC_NAMES)
    module = trace(_accumulate, ARGS, [f"a{i}" for i in range(len(ARGS))], "f")
    kinds = {op.kind_value() for op in module.walk() if op.name == "prim.scan"}
    assert kinds == {"sum", "prod", "max", "min"}
    fused = fb.jit(_accumulate, cache=object_cache)
    arms = {"interpreter": interp(_accumulate, *ARGS),
            "arm 0": fb.compile(print_module(module), optimize=False)(*ARGS), "fused": fused(*ARGS)}
    for arm, got in arms.items():
        assert len(got) == len(want)
        for name, g, w in zip(_ACC_NAMES, got, want):
            _same(g, w, f"{arm}: {name}")
    assert fused.stats.arm0_calls == 0 and fused.stats.fused_calls >= 1, fused.stats


X = np.ones((3, 4), np.float32)


@pytest.mark.parametrize("fn, cls, message", [
    (lambda a: np.add.accumulate(a, axis=None), fb.FusebindValueError,
     "numpy.add.accumulate: accumulate does not allow multiple axes"),
    (lambda a: np.maximum.accumulate(a.sum()), TypeError, "numpy.maximum.accumulate: cannot accumulate on a scalar"),
    (lambda a: np.add.accumulate(a, axis=2), np.exceptions.AxisError,
     "numpy.add.accumulate: axis 2 is out of bounds for array of dimension 2"),
    (lambda a: np.multiply.accumulate(a, out=np.empty((3, 4), np.float32)), fb.UnsupportedOperation,
     "numpy.multiply.accumulate(..., out=...) cannot write into an array inside a traced function; use the result"),
    (lambda a: np.divide.accumulate(a), fb.UnsupportedOperation,
     "numpy.divide.accumulate is not supported on traced arrays: only add, multiply, maximum and minimum "
     "accumulate (np.cumsum / np.cumprod / np.maximum.accumulate / np.minimum.accumulate); compute other "
     "running results outside the jitted function"),
], ids=["axis None", "0-d", "axis out of range", "out=", "divide"])
def test_accumulate_errors_are_numpys_or_a_named_refusal(fn, cls, message) -> None:
    with pytest.raises(cls) as info:
        fb.jit(fn)(X)
    assert isinstance(info.value, fb.FusebindError)
    assert str(info.value) == f"fusebind: in '<lambda>': {message}"


# ------------------------------------------------------ nanargmax / nanargmin, np.round, np.fix, rint/floor/ceil/trunc
@pytest.fixture
def mapped():
    """The dispatch tables hold the functions below (np.nanargmax / np.nanargmin -> numpy_reductions,
    np.round / np.around -> numpy_rounding.round_, np.fix -> numpy_rounding.fix, the ufuncs)."""
    from fusebind.api import numpy_dispatch as D, numpy_reductions as R, numpy_rounding as RD, numpy_ufuncs as U

    for fn, impl in ((np.nanargmax, R.nanargmax), (np.nanargmin, R.nanargmin), (np.round, RD.round_),
                     (np.around, RD.round_), (np.fix, RD.fix)):
        assert D.TABLE[fn][0] is impl, fn
    for name, impl in RD.UFUNCS.items():
        assert U.ELEMENTWISE[name] is impl, name


NANS = RNG.standard_normal((6, 8)).astype(np.float32)
NANS[RNG.random((6, 8)) < 0.3] = np.nan
NANS[:, 0] = np.nan  # an all-NaN column
NANS[2, 3], NANS[4, 1] = np.inf, -np.inf
NANS[1] = np.where(np.isnan(NANS[1]), np.nan, -np.inf)  # -inf and NaN only: the first -inf
INTS = RNG.integers(-5, 5, (6, 8), dtype=np.int32)


def _nanarg(x, i):
    return (np.nanargmax(x, axis=1), np.nanargmin(x, axis=1), np.nanargmax(x[:, 1:], axis=0, keepdims=True),
            np.nanargmin(x), np.nanargmax(x, keepdims=True), np.nanargmax(i, axis=1), np.nanargmin(i),
            np.nanargmax(x * 2.0, axis=-1))


def _arms(fn, args, object_cache):
    module = trace(fn, args, [f"a{i}" for i in range(len(args))], "f")
    return {"interpreter": lambda *a: interp(fn, *a),
            "arm 0": fb.compile(print_module(module), optimize=False), "fused": fb.jit(fn, cache=object_cache)}


def test_nanargmax_nanargmin_are_numpys_answer_or_its_error_at_the_call(mapped, object_cache) -> None:
    want = _nanarg(NANS, INTS)
    bad = NANS.copy()
    bad[3] = np.nan  # an all-NaN row: numpy raises after computing, and so does each arm, at the call
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        np.nanargmax(bad, axis=1)
    for arm, run in _arms(_nanarg, [NANS, INTS], object_cache).items():
        got = run(NANS, INTS)
        for k, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.dtype == w.dtype and g.shape == w.shape, (arm, k, g.dtype, g.shape, w.shape)
            np.testing.assert_array_equal(g, w, err_msg=f"{arm}: output {k}")
        with pytest.raises(fb.FusebindValueError) as info:
            run(bad, INTS)
        assert isinstance(info.value, ValueError)
        fn_name = {"interpreter": "t", "arm 0": "f", "fused": "_nanarg"}[arm]  # the name each arm traced under
        assert str(info.value) == f"fusebind: in '{fn_name}': numpy.nanargmax: All-NaN slice encountered", arm
    x = np.array([[np.nan, 1.0], [2.0, np.nan]], np.float32)
    np.testing.assert_array_equal(fb.vmap(lambda r: np.nanargmin(r))(x), np.nanargmin(x, axis=1))


ROUND_F64 = np.concatenate([RNG.standard_normal(500) * 10, np.arange(-10, 10) + 0.5,
                            [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**52, 2.0**52 + 1, -2.0**52 - 1, 2.0**53,
                             0.49999999999999994, -0.49999999999999994, 1.5e300, 4503599627370495.5, -0.3]])
ROUND_F32 = np.concatenate([RNG.standard_normal(500).astype(np.float32) * 100,
                            (np.arange(-10, 10) + 0.5).astype(np.float32),
                            np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 2**23, 2**23 + 1, -2**23 - 1, 8388607.5,
                                        0.49999997, -0.49999997, 3e38, -0.7])])
# the extremes: numpy rounds integers in float64 and casts back, so they come back as INT_MIN (x86-64)
ROUND_I64 = np.concatenate([RNG.integers(-10**6, 10**6, 50), [2**63 - 1, -2**63, 2**62 + 1, 2**53 + 3]])
ROUND_I32 = np.concatenate([RNG.integers(-10**6, 10**6, 50), [15, 25, -15, -25, 125, 2**31 - 1, -2**31]]).astype(np.int32)


def _rounding(f, f32, i, i32):
    """The rounding cases, concatenated per dtype (fewer outputs; the fused arm compiles a few regions).
    The default run takes each path once; FUSEBIND_LONG=1 adds the rest."""
    f64s = [np.rint(f), np.floor(f), np.ceil(f), np.trunc(f), np.round(f, 2), np.around(f, -1), np.round(f, 25),
            np.fix(f)]
    f32s = [np.rint(f32), np.floor(f32), np.ceil(f32), np.trunc(f32), f32.round(5), np.round(f32, -2),
            np.round(f32, 40)]
    if LONG:
        f64s += [np.round(f), f.round(3), np.round(f, -3), np.round(f, -25)]
        f32s += [np.round(f32, 1), np.round(f32, -40), np.round(f32 * 3.0 + 1.0, 2)]
    return (np.concatenate(f64s), np.concatenate(f32s), np.concatenate([np.round(i, -2), np.round(i, 2)]),
            np.concatenate([np.round(i32, -1), np.round(i32), np.floor(i32), np.fix(i32)]))


def test_round_and_the_rounding_ufuncs_are_numpys_bits(mapped, object_cache) -> None:
    args = [ROUND_F64, ROUND_F32, ROUND_I64, ROUND_I32]
    with np.errstate(all="ignore"):
        want = _rounding(*args)
        arms = _arms(_rounding, args, object_cache)
        for arm, run in arms.items():
            for k, (g, w) in enumerate(zip(run(*args), want)):
                _same(g, w, f"{arm}: output {k}")  # NaNs where numpy's are, and every sign of zero


@pytest.mark.parametrize("fn, cls, message", [
    (lambda a: np.round(a, 1.5), TypeError, "numpy.round: 'float' object cannot be interpreted as an integer"),
    (lambda a: np.round(a > 0, 1), fb.UnsupportedOperation, None),  # numpy's casting error (bool)
    (lambda a: np.round(a, 1, out=np.empty(3, np.float32)), fb.UnsupportedOperation,
     "numpy.round(..., out=...) cannot write into an array inside a traced function; use the result"),
    (lambda a: np.nanargmax(a, out=np.empty((), np.int64)), fb.UnsupportedOperation,
     "numpy.nanargmax(..., out=...) cannot write into an array inside a traced function; use the result"),
], ids=["float decimals", "bool", "round out=", "nanargmax out="])
def test_rounding_and_nanarg_errors(mapped, fn, cls, message) -> None:
    x = np.float32([0.5, 1.5, -2.5])
    with pytest.raises(cls) as info:
        fb.jit(fn)(x)
    assert isinstance(info.value, fb.FusebindError)
    if message is not None:
        assert str(info.value) == f"fusebind: in '<lambda>': {message}"
