"""The rest of issue 14's reductions and math (helper H-F): ufunc.accumulate for add / multiply /
maximum / minimum (prim.scan sum / prod / max / min), against numpy's values, dtype and shape
through the interpreter, arm 0 (fb.compile without fusion) and the fused arm; numpy's errors and
the refusals.

Compile cost: every case is one output of one function (one arm-0 plan, one fused compile)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from api_trace_helpers import interp
from fusebind.api.trace import trace
from fusebind.dialect import print_module

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
    """Each accumulate numpy offers for the four ufuncs (names in _ACC_NAMES)."""
    return (np.add.accumulate(f32), np.maximum.accumulate(f32, axis=1), np.minimum.accumulate(f32, axis=0),
            np.maximum.accumulate(f32, axis=-1) * 2.0 + f32, np.multiply.accumulate(f64, axis=2),
            np.maximum.accumulate(f64, axis=1), np.add.accumulate(f64, axis=-1, dtype=np.float32),
            np.add.accumulate(i32), np.multiply.accumulate(i32, axis=1), np.maximum.accumulate(i32, axis=1),
            np.minimum.accumulate(i32, axis=0, dtype=np.float64), np.add.accumulate(i32, dtype=np.int32),
            np.multiply.accumulate(i64, axis=0), np.minimum.accumulate(i64, axis=1),
            np.add.accumulate(b, axis=1), np.maximum.accumulate(b, axis=1), np.minimum.accumulate(b, axis=0),
            np.multiply.accumulate(b, axis=1))


_ACC_NAMES = ["f32 add 0", "f32 max 1 (NaN, zeros)", "f32 min 0", "f32 max -1 and a consumer", "f64 mul 2",
              "f64 max 1", "f64 add -1 dtype=f32", "i32 add (int64 on numpy 2)", "i32 mul 1", "i32 max 1",
              "i32 min 0 dtype=f64", "i32 add dtype=int32", "i64 mul 0 (wraps)", "i64 min 1", "bool add 1",
              "bool max 1", "bool min 0", "bool mul 1"]


def _same(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want, err_msg=what)  # NaNs in the same places
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{what}: sign bits")


def test_accumulate_is_numpys_answer_on_the_interpreter_arm0_and_fused(object_cache) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        want = _accumulate(*ARGS)
    assert want[7].dtype == np.int64  # numpy 2: add.accumulate of an int32 is the platform int, like cumsum
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
