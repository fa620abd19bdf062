"""Each prim op: builder type inference, reference vs numpy for every accepted
dtype (with broadcasting), scalar_body vs reference, flops, and dtype refusal."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect import prim
from fusebind.api.promotion import is_floating
from fusebind.dialect.scalar import NumpyScalarBuilder
from fusebind.dialect.types import (ELEMENT_TYPES, FLOAT_TYPES, INT_TYPES, NUMERIC_TYPES, SIGNED_INT_TYPES, UINT_TYPES, elem_of,
                                    numpy_dtype, shape_of, tensor_type)

#: every numeric element type, in ELEMENT_TYPES order (the integer widths of int_widths included)
NUMERIC = tuple(e for e in ELEMENT_TYPES if e in NUMERIC_TYPES)
FLOATS = tuple(e for e in ELEMENT_TYPES if e in FLOAT_TYPES)  # f32 f64 and the narrow floats

RNG = np.random.default_rng(1234)


def args(*types: tuple[tuple[int | None, ...], str]) -> list:
    return list(Block(arg_types=[tensor_type(s, e) for s, e in types]).args)


def sample(shape: tuple[int, ...], elem: str, positive: bool = False) -> np.ndarray:
    if elem == "i1":
        return RNG.integers(0, 2, shape).astype(bool)
    if elem in INT_TYPES:
        lo = 1 if positive else 0 if elem in UINT_TYPES else -9
        return RNG.integers(lo, 10, shape).astype(numpy_dtype(elem))
    x = RNG.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.1
    return x.astype(numpy_dtype(elem))


def assert_same(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-6, atol: float = 0.0) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape
    if is_floating(actual.dtype):
        if actual.dtype.itemsize == 2:  # f16 / bf16: both sides round one f32 result; allow one step
            rtol = max(rtol, 2 * float(np.finfo(actual.dtype).eps))
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


def check_scalar_body(op: prim.ElementwiseOp, *arrays: np.ndarray) -> None:
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    ins = [np.broadcast_to(a, shape) for a in arrays]
    got = np.asarray(op.scalar_body(NumpyScalarBuilder(), *ins)).astype(numpy_dtype(op.result_elem()))
    assert_same(np.broadcast_to(got, shape), op.reference(*arrays), rtol=1e-5)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(v) for v in x.reshape(-1)], dtype=x.dtype).reshape(x.shape)


UNARY: dict[type, tuple[Callable[[np.ndarray], np.ndarray], tuple[str, ...], bool]] = {
    prim.NegOp: (np.negative, NUMERIC, False),
    prim.AbsOp: (np.abs, NUMERIC, False),
    prim.ReluOp: (lambda x: np.where(x < 0, np.zeros((), x.dtype), x), NUMERIC, False),
    prim.ExpOp: (np.exp, FLOATS, False),
    prim.LogOp: (np.log, FLOATS, True),
    prim.SqrtOp: (np.sqrt, FLOATS, True),
    prim.RsqrtOp: (lambda x: (1 / np.sqrt(x)).astype(x.dtype), FLOATS, True),
    prim.TanhOp: (np.tanh, FLOATS, False),
    prim.SigmoidOp: (lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype), FLOATS, False),
    prim.ErfOp: (_erf, FLOATS, False),
}


@pytest.mark.parametrize("cls", list(UNARY), ids=lambda c: c.KIND)
def test_unary_reference_and_body(cls: type) -> None:
    fn, dtypes, positive = UNARY[cls]
    for elem in ELEMENT_TYPES:
        (x,) = args(((3, 4), elem))
        op = cls(x)
        if elem not in dtypes:
            with pytest.raises(VerifyException, match=f"{op.name}: operand element type {elem} is not supported"):
                op.verify()
            continue
        op.verify()
        assert op.results[0].type == x.type
        a = sample((3, 4), elem, positive)
        assert_same(op.reference(a), fn(a))
        check_scalar_body(op, a)
        assert op.flops() == op.FLOPS_PER_ELEMENT * 12


def test_relu_keeps_negative_zero_and_nan() -> None:
    (x,) = args(((4,), "f32"))
    out = prim.ReluOp(x).reference(np.array([-0.0, np.nan, -1.0, 2.0], np.float32))
    assert np.signbit(out[0]) and out[0] == 0
    assert np.isnan(out[1]) and out[2] == 0 and out[3] == 2


BINARY: dict[type, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], tuple[str, ...]]] = {
    prim.AddOp: (np.add, NUMERIC),
    prim.SubOp: (np.subtract, NUMERIC),
    prim.MulOp: (np.multiply, NUMERIC),
    prim.DivOp: (lambda a, b: a / b if is_floating(a.dtype) else a // b, NUMERIC),
    prim.MaxOp: (np.maximum, NUMERIC),
    prim.MinOp: (np.minimum, NUMERIC),
    prim.FloorDivOp: (np.floor_divide, NUMERIC),
    prim.RemOp: (np.remainder, NUMERIC),
    prim.PowOp: (np.power, NUMERIC),
}


@pytest.mark.parametrize("cls", list(BINARY), ids=lambda c: c.KIND)
@pytest.mark.parametrize("shapes", [((4, 3), (3,)), ((2, 1, 3), (4, 1)), ((5,), (5,)), ((), (2, 2))])
def test_binary_broadcasting_reference_and_body(cls: type, shapes: tuple) -> None:
    fn, dtypes = BINARY[cls]
    sa, sb = shapes
    for elem in ELEMENT_TYPES:
        a_v, b_v = args((sa, elem), (sb, elem))
        op = cls(a_v, b_v)
        assert shape_of(op.results[0].type) == np.broadcast_shapes(sa, sb)
        if elem not in dtypes:
            with pytest.raises(VerifyException, match="is not supported"):
                op.verify()
            continue
        op.verify()
        a = sample(sa, elem, positive=cls is prim.PowOp)
        b = sample(sb, elem, positive=cls in (prim.DivOp, prim.PowOp))
        with np.errstate(all="ignore"):
            assert_same(op.reference(a, b), np.asarray(fn(a, b)).astype(numpy_dtype(elem)))
        if cls is prim.PowOp and elem in SIGNED_INT_TYPES:
            # a traced integer exponent has no kernel form (test_division_ops.py covers the constant one)
            with pytest.raises(prim.KernelFormError, match="prim.pow on i"):
                check_scalar_body(op, a, b)
            continue
        check_scalar_body(op, a, b)


def test_integer_division_is_floor_and_zero_divisor_gives_zero() -> None:
    a_v, b_v = args(((4,), "i32"), ((4,), "i32"))
    op = prim.DivOp(a_v, b_v)
    a = np.array([7, -7, 5, 3], np.int32)
    b = np.array([2, 2, 0, -2], np.int32)
    assert_same(op.reference(a, b), np.array([3, -4, 0, -2], np.int32))
    check_scalar_body(op, a, b)


def test_max_min_propagate_nan() -> None:
    a_v, b_v = args(((2,), "f64"), ((2,), "f64"))
    a = np.array([np.nan, 1.0])
    b = np.array([0.0, np.nan])
    assert np.isnan(prim.MaxOp(a_v, b_v).reference(a, b)).all()
    assert np.isnan(prim.MinOp(a_v, b_v).reference(a, b)).all()


def test_binary_builder_refuses_non_broadcasting_shapes() -> None:
    a_v, b_v = args(((4, 3), "f32"), ((5,), "f32"))
    with pytest.raises(ValueError, match=r"prim.add: operand shapes \(4, 3\) and \(5,\) do not broadcast"):
        prim.AddOp(a_v, b_v)


@pytest.mark.parametrize("pred", ["eq", "ne", "lt", "le", "gt", "ge"])
@pytest.mark.parametrize("elem", ELEMENT_TYPES)
def test_compare(pred: str, elem: str) -> None:
    a_v, b_v = args(((3, 4), elem), ((4,), elem))
    op = prim.CompareOp(pred, a_v, b_v)
    op.verify()
    assert elem_of(op.results[0].type) == "i1"
    a, b = sample((3, 4), elem), sample((4,), elem)
    if elem[0] == "f":
        a[0, 0] = np.nan
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal}[pred]
    assert_same(op.reference(a, b), fn(a, b))
    check_scalar_body(op, a, b)


@pytest.mark.parametrize("elem", ELEMENT_TYPES)
def test_select_broadcasts_three_ways(elem: str) -> None:
    c_v, a_v, b_v = args(((3, 1), "i1"), ((4,), elem), ((3, 4), elem))
    op = prim.SelectOp(c_v, a_v, b_v)
    op.verify()
    assert shape_of(op.results[0].type) == (3, 4)
    c, a, b = sample((3, 1), "i1"), sample((4,), elem), sample((3, 4), elem)
    assert_same(op.reference(c, a, b), np.where(c, a, b))
    check_scalar_body(op, c, a, b)


@pytest.mark.parametrize("src", ELEMENT_TYPES)
@pytest.mark.parametrize("dst", ELEMENT_TYPES)
def test_cast(src: str, dst: str) -> None:
    (x,) = args(((2, 3), src))
    op = prim.CastOp(x, dst)
    op.verify()
    a = sample((2, 3), src) * (3 if src[0] == "f" else 1)
    a = a.astype(numpy_dtype(src))
    assert_same(op.reference(a), a.astype(numpy_dtype(dst)))
    check_scalar_body(op, a)


REDUCTIONS = {
    prim.ReduceSumOp: (lambda x, ax, kd: np.sum(x, axis=ax, keepdims=kd, dtype=x.dtype), NUMERIC),
    prim.ReduceMaxOp: (lambda x, ax, kd: np.max(x, axis=ax, keepdims=kd), (*NUMERIC, "i1")),
    prim.ReduceMinOp: (lambda x, ax, kd: np.min(x, axis=ax, keepdims=kd), (*NUMERIC, "i1")),
    # (a mean of f16 / bf16 accumulates in f32 and rounds once, docs/DTYPES.md)
    prim.ReduceMeanOp: (lambda x, ax, kd: np.mean(x, axis=ax, keepdims=kd, dtype=x.dtype if x.itemsize > 2 else
                                                   np.float32).astype(x.dtype), FLOATS),
}


@pytest.mark.parametrize("cls", list(REDUCTIONS), ids=lambda c: c.KIND)
@pytest.mark.parametrize("axes", [(1,), (0, 2), (-1,), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(cls: type, axes: tuple[int, ...], keepdims: bool) -> None:
    fn, dtypes = REDUCTIONS[cls]
    for elem in ELEMENT_TYPES:
        (x,) = args(((3, 4, 5), elem))
        op = cls(x, axes=list(axes), keepdims=keepdims)
        if elem not in dtypes:
            with pytest.raises(VerifyException, match="is not supported"):
                op.verify()
            continue
        op.verify()
        a = sample((3, 4, 5), elem)
        expected = np.asarray(fn(a, tuple(ax % 3 for ax in axes), keepdims))
        assert shape_of(op.results[0].type) == expected.shape
        # a narrow float's sum rounds its terms' f32 total once: its error is bounded by sum |x|, not |result|
        atol = 4 * float(np.finfo(a.dtype).eps) * float(np.abs(a.astype(np.float64)).sum()) if a.itemsize == 2 \
            and a.dtype.kind != "i" and a.dtype.kind != "u" else 0.0
        assert_same(op.reference(a), expected, rtol=1e-5, atol=atol)
        assert op.flops() == 60.0


def test_reduce_max_propagates_nan() -> None:
    (x,) = args(((2, 3), "f32"))
    a = np.array([[1, np.nan, 2], [3, 4, 5]], np.float32)
    out = prim.ReduceMaxOp(x, axes=[1]).reference(a)
    assert np.isnan(out[0]) and out[1] == 5


@pytest.mark.parametrize("elem", ELEMENT_TYPES)
def test_shape_ops(elem: str) -> None:
    (x,) = args(((4, 3), elem))
    a = sample((4, 3), elem)
    bt = prim.BroadcastToOp(x, (2, 4, 3))
    bt.verify()
    assert_same(bt.reference(a), np.broadcast_to(a, (2, 4, 3)))
    rs = prim.ReshapeOp(x, (2, -1))
    rs.verify()
    assert_same(rs.reference(a), a.reshape(2, 6))
    tr = prim.TransposeOp(x, (1, 0))
    tr.verify()
    assert shape_of(tr.results[0].type) == (3, 4)
    assert_same(tr.reference(a), a.T)
    assert bt.flops() == rs.flops() == tr.flops() == 0.0


@pytest.mark.parametrize("elem", ["f32", "f64", "i32", "i64"])
@pytest.mark.parametrize("shapes", [((4, 3), (3, 5)), ((2, 1, 4, 3), (7, 3, 6)), ((5, 2, 3), (3, 2))])
def test_matmul(elem: str, shapes: tuple) -> None:
    sa, sb = shapes
    a_v, b_v = args((sa, elem), (sb, elem))
    op = prim.MatmulOp(a_v, b_v)
    op.verify()
    a, b = sample(sa, elem), sample(sb, elem)
    expected = np.matmul(a, b)
    assert shape_of(op.results[0].type) == expected.shape
    assert_same(op.reference(a, b), expected, rtol=1e-5)
    assert op.flops() == 2.0 * expected.size * sa[-1]


def test_matmul_dynamic_dims_and_unknown_flops() -> None:
    a_v, b_v = args(((None, 3), "f32"), ((3, None), "f32"))
    op = prim.MatmulOp(a_v, b_v)
    op.verify()
    assert shape_of(op.results[0].type) == (None, None)
    assert op.flops() is None


@pytest.mark.parametrize("elem", ELEMENT_TYPES)
@pytest.mark.parametrize("shape", [(2, 3), (4,), ()])
def test_constant_from_array(elem: str, shape: tuple[int, ...]) -> None:
    a = sample(shape, elem)
    op = prim.ConstantOp.from_array(a)
    op.verify()
    assert_same(op.reference(), a)


def test_splat_constant() -> None:
    from fusebind.dialect import parse_module

    m = parse_module("func.func @f() -> tensor<2x3xf32> {\n"
                     "  %0 = prim.constant dense<2.5> : tensor<2x3xf32>\n  func.return %0 : tensor<2x3xf32>\n}")
    op = next(o for o in m.walk() if isinstance(o, prim.ConstantOp))
    assert_same(op.reference(), np.full((2, 3), 2.5, np.float32))


def test_prim_ops_table_is_complete_and_consistent() -> None:
    expected = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "relu", "add", "sub", "mul",
                "div", "floordiv", "rem", "max", "min", "pow", "compare", "select", "cast", "constant",
                "broadcast_to", "reshape", "transpose", "reduce_sum", "reduce_max", "reduce_min", "reduce_mean",
                "matmul", "slice", "concat", "gather", "take_along", "scatter",  # issue 13: layout, gather, scatter
                "fmod", "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",  # issue 14
                "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "arcsinh", "arccosh",
                "arctanh", "exp2", "expm1", "log2", "log10", "log1p", "cbrt", "hypot",
                "reduce_prod", "reduce_argmax", "reduce_argmin", "scan", "check",
                "window"}  # issue 16: the sliding-window index map
    assert set(prim.PRIM_OPS) == expected
    for kind, cls in prim.PRIM_OPS.items():
        assert cls.name == f"prim.{kind}" and cls.KIND == kind
        assert isinstance(cls.FLOPS_PER_ELEMENT, float)


def test_dynamic_elementwise_flops_unknown() -> None:
    (x,) = args(((None, 4), "f32"))
    assert prim.ExpOp(x).flops() is None
