"""np.cumsum / np.cumprod and their family (api/numpy_scans.py, prim.scan): numpy's values, dtype
and shape through the interpreter, arm 0 (fb.compile without fusion) and the fused arm, for
f32/f64/i32/i64/bool, axis 0 / -1 / None, a consumer after the scan, an empty axis, integer
wrap-around, include_initial, the nan forms; numpy's errors and the refusals.

Compile cost: every case is one output of one function (one arm-0 plan, one fused compile)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from api_trace_helpers import interp
from fusebind.api.trace import trace
from fusebind.dialect import print_module

RNG = np.random.default_rng(14)
F32 = RNG.standard_normal((5, 7)).astype(np.float32)
F64 = RNG.standard_normal((3, 4, 6))
I32 = RNG.integers(-2**31, 2**31 - 1, (4, 6), dtype=np.int32)  # int64 on numpy 2: no wrap, large values
I64 = RNG.integers(-2**62, 2**62, (6, 3), dtype=np.int64)  # sums and products wrap
BOOL = RNG.random((4, 5)) < 0.7
NAN = np.where(RNG.random((4, 5)) < 0.3, np.nan, RNG.standard_normal((4, 5))).astype(np.float32)
EMPTY = np.zeros((0, 3), np.float32)
ARGS = [F32, F64, I32, I64, BOOL, NAN, EMPTY]


def _all(f32, f64, i32, i64, b, nan, empty):
    """Each scan numpy's docs list, on the arrays above (names in _NAMES)."""
    return (np.cumsum(f32, axis=0), np.cumsum(f32, axis=-1), np.cumsum(f32), f32.cumprod(axis=1),
            np.cumsum(f64, axis=1), np.cumprod(f64, axis=-1), f64.cumsum(),
            np.cumsum(i32, axis=0), np.cumprod(i32, axis=-1), np.cumsum(i32, dtype=np.int32),
            np.cumsum(i64, axis=0), np.cumprod(i64, axis=1), np.cumprod(i64),
            np.cumsum(b, axis=1), np.cumprod(b, axis=0), np.cumsum(b, axis=-1, dtype=bool), np.cumsum(b),
            np.nancumsum(nan, axis=1), np.nancumprod(nan, axis=0), np.nancumsum(nan), np.cumsum(nan, axis=1),
            np.cumulative_sum(f32, axis=1, include_initial=True), np.cumulative_prod(i32, axis=0),
            np.cumulative_sum(f32[0]), np.cumulative_prod(b, axis=1, include_initial=True),
            np.cumsum(f32, axis=1) * 2.0 + f32,  # a consumer after the scan
            np.exp(np.cumsum(f32, axis=0) - 1.0).sum(axis=0),  # a consumer chain and a reduction
            np.cumsum(empty, axis=0), np.cumprod(empty, axis=1), np.cumsum(empty),
            np.cumulative_sum(empty, axis=0, include_initial=True))


_NAMES = ["f32 cumsum 0", "f32 cumsum -1", "f32 cumsum None", "f32 cumprod 1",
          "f64 cumsum 1", "f64 cumprod -1", "f64 cumsum None",
          "i32 cumsum 0", "i32 cumprod -1", "i32 cumsum dtype=int32",
          "i64 cumsum 0", "i64 cumprod 1", "i64 cumprod None",
          "bool cumsum 1", "bool cumprod 0", "bool cumsum dtype=bool", "bool cumsum None",
          "nancumsum 1", "nancumprod 0", "nancumsum None", "cumsum with NaN",
          "cumulative_sum include_initial", "cumulative_prod i32", "cumulative_sum 1-D",
          "cumulative_prod bool include_initial", "consumer", "consumer chain and sum",
          "empty cumsum 0", "empty cumprod 1", "empty cumsum None", "empty cumulative_sum include_initial"]


def _same(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    if "consumer" in what:  # exp and the fused sum: within rounding
        np.testing.assert_allclose(got, want, rtol=2e-6, err_msg=what)
    else:  # the scan itself: numpy's sequential order, bit for bit (integers wrap as numpy's)
        np.testing.assert_array_equal(got, want, err_msg=what)


def test_every_scan_is_numpys_answer_on_the_interpreter_arm0_and_fused(object_cache) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        want = _all(*ARGS)
    assert len(want) == len(_NAMES)
    module = trace(_all, ARGS, [f"a{i}" for i in range(len(ARGS))], "f")
    assert sum(op.name == "prim.scan" for op in module.walk()) >= 20
    fused = fb.jit(_all, cache=object_cache)
    arms = {"interpreter": interp(_all, *ARGS), "arm 0": fb.compile(print_module(module), optimize=False)(*ARGS),
            "fused": fused(*ARGS)}
    for arm, got in arms.items():
        assert len(got) == len(want)
        for name, g, w in zip(_NAMES, got, want):
            _same(g, w, f"{arm}: {name}")
    assert fused.stats.arm0_calls == 0 and fused.stats.fused_calls >= 1, fused.stats


def test_a_bad_axis_is_numpys_axis_error() -> None:
    f = fb.jit(lambda x: np.cumsum(x, axis=2))
    with pytest.raises(np.exceptions.AxisError) as err:
        f(F32)
    assert isinstance(err.value, fb.FusebindError)
    assert "axis 2 is out of bounds for array of dimension 2" in str(err.value)


def test_cumulative_sum_of_a_matrix_needs_an_axis_as_numpy_says() -> None:
    with pytest.raises(ValueError) as err:
        fb.jit(lambda x: np.cumulative_sum(x))(F32)
    assert isinstance(err.value, fb.FusebindError)
    try:
        np.cumulative_sum(F32)
    except ValueError as exc:
        assert str(exc) in str(err.value)


def test_an_unsupported_dtype_is_refused_with_what_fusebind_has() -> None:
    with pytest.raises(fb.UnsupportedOperation, match=r"numpy.cumprod needs dtype complex64, which fusebind does "
                                                      r"not support \(it has float32, float64, int32, int64, bool, "
                                                      r"float16, bfloat16, int8, "):
        fb.jit(lambda x: np.cumprod(x, dtype=np.complex64))(F32)


def test_the_scan_op_verifies_and_its_reference_is_numpys() -> None:
    from fusebind.dialect.prim_scan import ScanOp
    from fusebind.dialect.errors import ShapeInferenceError
    from xdsl.dialects.builtin import TensorType, f32
    from xdsl.utils.test_value import create_ssa_value

    x = create_ssa_value(TensorType(f32, [5, 7]))
    op = ScanOp(x, "sum", -1)
    assert op.axis_value() == 1 and op.kind_value() == "sum"
    op.verify()
    np.testing.assert_array_equal(op.reference(F32), np.cumsum(F32, axis=1))
    with pytest.raises(ShapeInferenceError, match=r"prim.scan: axis 2 is out of range \[0, 2\) for a rank-2 "
                                                  "operand"):
        ScanOp(x, "sum", 2)
    with pytest.raises(ShapeInferenceError, match="prim.scan: kind 'mean' is not one of sum, prod, max, min"):
        ScanOp(x, "mean", 0)


# Hand-written fused regions (the scan rule, compiler/scan_rule.py, makes them from traced code too):
# the lowering (lowering/emit_scan.py) on every dtype, axis 0 / 1 / middle, a dynamic dim
# and a consumer, exact against numpy (its sequential order; integers wrap).
SRC = """
func.func @main(%a: tensor<4x6xf32>, %b: tensor<3x4x5xf64>, %c: tensor<7x3xi32>, %d: tensor<9xi64>, %e: tensor<?x5xf32>) -> (tensor<4x6xf32>, tensor<3x4x5xf64>, tensor<7x3xi32>, tensor<9xi64>, tensor<?x5xf32>) {
  %r0 = fused.region @s0 (%a) : (tensor<4x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%x: tensor<4x6xf32>):
    %s = prim.scan %x {kind = "sum", axis = 1} : tensor<4x6xf32> -> tensor<4x6xf32>
    %m = prim.add %s, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    fused.yield %m : tensor<4x6xf32>
  }
  %r1 = fused.region @s1 (%b) : (tensor<3x4x5xf64>) -> tensor<3x4x5xf64> {
  ^bb0(%x: tensor<3x4x5xf64>):
    %s = prim.scan %x {kind = "prod", axis = 0} : tensor<3x4x5xf64> -> tensor<3x4x5xf64>
    %m = prim.add %s, %x : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
    fused.yield %m : tensor<3x4x5xf64>
  }
  %r2 = fused.region @s2 (%c) : (tensor<7x3xi32>) -> tensor<7x3xi32> {
  ^bb0(%x: tensor<7x3xi32>):
    %s = prim.scan %x {kind = "sum", axis = 0} : tensor<7x3xi32> -> tensor<7x3xi32>
    %m = prim.mul %s, %x : (tensor<7x3xi32>, tensor<7x3xi32>) -> tensor<7x3xi32>
    fused.yield %m : tensor<7x3xi32>
  }
  %r3 = fused.region @s3 (%d) : (tensor<9xi64>) -> tensor<9xi64> {
  ^bb0(%x: tensor<9xi64>):
    %s = prim.scan %x {kind = "prod", axis = 0} : tensor<9xi64> -> tensor<9xi64>
    %m = prim.add %s, %x : (tensor<9xi64>, tensor<9xi64>) -> tensor<9xi64>
    fused.yield %m : tensor<9xi64>
  }
  %r4 = fused.region @s4 (%e) : (tensor<?x5xf32>) -> tensor<?x5xf32> {
  ^bb0(%x: tensor<?x5xf32>):
    %s = prim.scan %x {kind = "sum", axis = 0} : tensor<?x5xf32> -> tensor<?x5xf32>
    %m = prim.mul %s, %x : (tensor<?x5xf32>, tensor<?x5xf32>) -> tensor<?x5xf32>
    fused.yield %m : tensor<?x5xf32>
  }
  func.return %r0, %r1, %r2, %r3, %r4 : tensor<4x6xf32>, tensor<3x4x5xf64>, tensor<7x3xi32>, tensor<9xi64>, tensor<?x5xf32>
}
"""


def test_the_scan_lowering_is_numpys_answer_bit_for_bit_in_a_fused_region(object_cache) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    a[:, 0] = -0.0  # numpy's cumsum starts at x[0]: -0.0 stays -0.0 (and -0.0 + -0.0 is -0.0)
    b = rng.standard_normal((3, 4, 5))
    c = rng.integers(-2**31, 2**31 - 1, (7, 3), dtype=np.int32)  # int32 sums wrap
    d = rng.integers(-2**40, 2**40, 9, dtype=np.int64)  # int64 products wrap
    e = rng.standard_normal((11, 5)).astype(np.float32)
    f = fb.compile(SRC, cache=object_cache)
    got = f(a, b, c, d, e)
    with np.errstate(over="ignore"):
        want = (np.cumsum(a, axis=1) + a, np.cumprod(b, axis=0) + b, np.cumsum(c, axis=0, dtype=np.int32) * c,
                np.cumprod(d) + d, np.cumsum(e, axis=0) * e)
    for name, g, w in zip(["f32 axis 1", "f64 axis 0 of 3", "i32 wrap", "i64 wrap", "dynamic dim"], got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        np.testing.assert_array_equal(g, w, err_msg=name)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=name)
    assert f.stats.arms.arm0_calls == 0 and f.stats.arms.fused_calls == 5, f.stats


def test_a_zero_d_array_scans_as_its_ravel_for_any_axis_numpy_accepts() -> None:
    s = np.array(2.5, np.float32)
    f = fb.jit(lambda x: (np.cumsum(x, axis=0), np.cumprod(x, axis=-1), np.cumulative_sum(x, axis=0), np.cumsum(x)))
    for got, want in zip(f(s), (np.cumsum(s, axis=0), np.cumprod(s, axis=-1), np.cumulative_sum(s, axis=0),
                                np.cumsum(s))):
        assert got.dtype == want.dtype and got.shape == want.shape == (1,)
        np.testing.assert_array_equal(got, want)
