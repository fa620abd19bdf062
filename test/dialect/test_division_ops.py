"""prim.floordiv, prim.rem and integer prim.pow: numpy's answer at every edge, in the
reference (the interpreter's oracle) and in the scalar body (what kernels compute),
and numpy's error for a negative integer power."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.ir import Block

from fusebind.dialect import interpret, parse_module, prim
from fusebind.dialect.scalar import NumpyScalarBuilder
from fusebind.dialect.types import numpy_dtype, tensor_type

FLOAT_EDGES = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 5.0, -5.0, 0.1, -0.1, 3.5, -7.25, 1e30, -1e-30,
               1e-45, 7.0, -2.0]


def int_edges(elem: str) -> list[int]:
    info = np.iinfo(numpy_dtype(elem))
    return [info.min, info.min + 1, info.max, -7, -3, -1, 0, 1, 3, 7, 2, -2]


def grid(elem: str) -> tuple[np.ndarray, np.ndarray]:
    values = np.array(FLOAT_EDGES if elem[0] == "f" else int_edges(elem), dtype=numpy_dtype(elem))
    a, b = np.meshgrid(values, values)
    return a.reshape(-1), b.reshape(-1)


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal values, dtypes and (for floats) signs of zero; NaN equals NaN."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    return bool(np.array_equal(np.isnan(got), np.isnan(want)) and
                np.array_equal(np.where(np.isnan(got), 0, got), np.where(np.isnan(want), 0, want)) and
                np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)])))


def binary_op(cls: type, elem: str, n: int) -> prim.BinaryOp:
    a, b = Block(arg_types=[tensor_type((n,), elem)] * 2).args
    op = cls(a, b)
    op.verify()
    return op


@pytest.mark.parametrize("elem", ["f32", "f64", "i32", "i64"])
@pytest.mark.parametrize("cls,fn", [(prim.FloorDivOp, np.floor_divide), (prim.RemOp, np.remainder)],
                         ids=["floordiv", "rem"])
def test_floordiv_and_rem_are_numpys_at_every_edge(cls: type, fn: np.ufunc, elem: str) -> None:
    a, b = grid(elem)
    op = binary_op(cls, elem, a.size)
    with np.errstate(all="ignore"):
        want = fn(a, b)
        body = op.scalar_body(NumpyScalarBuilder(), a, b)
    assert same_bits(op.reference(a, b), want)
    assert same_bits(body, want)


def test_integer_division_edges_llvm_leaves_undefined() -> None:
    """x // 0 == 0, x % 0 == 0, MIN // -1 == MIN (wraps), MIN % -1 == 0, the divisor's sign."""
    for elem in ("i32", "i64"):
        lo = np.iinfo(numpy_dtype(elem)).min
        a = np.array([7, -7, lo, lo, 5, -5, 5, -5], numpy_dtype(elem))
        b = np.array([0, 0, -1, -1, 3, 3, -3, -3], numpy_dtype(elem))
        q = binary_op(prim.FloorDivOp, elem, 8).reference(a, b)
        r = binary_op(prim.RemOp, elem, 8).reference(a, b)
        assert q.tolist() == [0, 0, lo, lo, 1, -2, -2, 1]
        assert r.tolist() == [0, 0, 0, 0, 2, 1, -1, -2]


def test_float_divmod_signs_of_zero_and_infinities() -> None:
    op_q, op_r = binary_op(prim.FloorDivOp, "f64", 6), binary_op(prim.RemOp, "f64", 6)
    a = np.array([-0.0, 1.0, -1.0, 1.0, 5.0, np.inf])
    b = np.array([2.0, -np.inf, np.inf, 0.0, -0.0, 2.0])
    q, r = op_q.reference(a, b), op_r.reference(a, b)
    assert same_bits(q, np.array([-0.0, -1.0, -1.0, np.inf, -np.inf, np.nan]))
    assert same_bits(r, np.array([0.0, -np.inf, np.inf, np.nan, np.nan, np.nan]))


def test_floordiv_and_rem_refuse_bool() -> None:
    from xdsl.utils.exceptions import VerifyException

    for cls in (prim.FloorDivOp, prim.RemOp):
        a, b = Block(arg_types=[tensor_type((3,), "i1")] * 2).args
        with pytest.raises(VerifyException, match=f"{cls.name}: operand element type i1 is not supported; "
                                                  "expected one of f32, f64, i32, i64"):
            cls(a, b).verify()


def pow_with_constant(elem: str, base: np.ndarray, exponent: np.ndarray) -> prim.PowOp:
    (x,) = Block(arg_types=[tensor_type(base.shape, elem)]).args
    c = prim.ConstantOp.from_array(exponent.astype(numpy_dtype(elem)))
    op = prim.PowOp(x, c.results[0])
    op.verify()
    return op


@pytest.mark.parametrize("elem", ["i32", "i64"])
def test_integer_pow_wraps_like_numpy_in_reference_and_body(elem: str) -> None:
    dt = numpy_dtype(elem)
    info = np.iinfo(dt)
    base = np.array([3, -3, 2, -2, 0, 1, -1, info.max, info.min, 7, 12345], dt)
    for n in (0, 1, 2, 3, 5, 31, 32, 63, 64, 1000, int(info.max)):
        e = np.full((), n, dt)
        op = pow_with_constant(elem, base, e)
        want = np.power(base, e)
        assert same_bits(op.reference(base, e), want), n
        assert op.kernel_computable()
        # the scalar semantics (the MLIR builder's square-and-multiply is checked through kernels in
        # test/compiler/test_strength.py)
        assert same_bits(np.asarray(op.scalar_body(NumpyScalarBuilder(), base, e)).astype(dt), want), n


def test_negative_integer_power_is_numpys_value_error() -> None:
    base = np.array([2, 3, 4], np.int32)
    e = np.array([1, -1, 2], np.int32)
    op = pow_with_constant("i32", base, e)
    assert not op.kernel_computable()
    with pytest.raises(prim.IntegerPowerError) as info:
        op.reference(base, e)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        "Integers to negative integer powers are not allowed. (prim.pow on int32 with a negative exponent, refused "
        "as numpy's np.power refuses it; cast the base to a float dtype first, e.g. x.astype(np.float64) ** y)")
    with pytest.raises(prim.IntegerPowerError):
        op.check_constant_exponent()  # optimize time, for a static non-empty result
    with pytest.raises(prim.KernelFormError, match="has no kernel form"):
        op.scalar_body(NumpyScalarBuilder(), base, e)


def test_negative_power_of_an_empty_result_raises_nothing_as_in_numpy() -> None:
    base = np.zeros((0, 3), np.int64)
    e = np.array([-1, 2, 3], np.int64)
    assert np.power(base, e).shape == (0, 3)  # numpy's loop never runs
    op = pow_with_constant("i64", base, e)
    op.check_constant_exponent()
    assert same_bits(op.reference(base, e), np.zeros((0, 3), np.int64))


def test_traced_integer_exponent_has_no_kernel_form_but_a_checking_reference() -> None:
    op = binary_op(prim.PowOp, "i64", 3)
    assert op.constant_exponent() is None and not op.kernel_computable()
    with pytest.raises(prim.KernelFormError, match="prim.pow on i64 with an exponent that is not a non-negative "
                                                  "constant has no kernel form"):
        op.scalar_body(NumpyScalarBuilder(), np.ones(3, np.int64), np.ones(3, np.int64))
    assert binary_op(prim.PowOp, "f32", 3).kernel_computable()


def test_interpreter_raises_the_ops_own_error() -> None:
    text = """func.func @f(%a: tensor<3xi32>, %b: tensor<3xi32>) -> tensor<3xi32> {
  %r = prim.pow %a, %b : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  func.return %r : tensor<3xi32>
}"""
    module = parse_module(text)
    with pytest.raises(prim.IntegerPowerError, match="^Integers to negative integer powers are not allowed"):
        interpret(module, np.ones(3, np.int32), np.array([0, -1, 2], np.int32))
    out = interpret(module, np.array([3, -2, 7], np.int32), np.array([40, 31, 0], np.int32))
    assert same_bits(out, np.power(np.array([3, -2, 7], np.int32), np.array([40, 31, 0], np.int32)))


@pytest.mark.parametrize("cls", [prim.ReduceMaxOp, prim.ReduceMinOp], ids=["max", "min"])
def test_bool_max_min_reductions_are_any_all(cls: type) -> None:
    (x,) = Block(arg_types=[tensor_type((3, 4), "i1")]).args
    a = np.array([[True, False, False, False], [True, True, True, True], [False] * 4])
    op = cls(x, axes=[1])
    op.verify()
    out = op.reference(a)
    assert out.dtype == np.bool_
    assert out.tolist() == ([True, True, False] if cls is prim.ReduceMaxOp else [False, True, False])
