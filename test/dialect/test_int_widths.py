"""The integer widths of issue 14 (i8 i16 ui8 ui16 ui32 ui64) in the dialect: the element table
names them (`ui8` is `tensor<4xui8>`, xDSL's unsigned IntegerType), every integer op's
`scalar_body` on numpy's scalar builder and its `reference` agree with numpy on the edge values
(x // 0, x % 0, MIN // -1, shifts by the width or more and negative counts, wrap-around), and the
text scalar builder writes the signless MLIR type with the unsigned ops where the element is
unsigned (divui, remui, shrui, cmpi ult, extui, uitofp). The API-level matrix (interpreter, arm 0
and the fused arm) is test/api/test_int_widths_jit.py.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerType, Signedness
from xdsl.ir import Block

from fusebind.dialect import interpret, parse_module, print_module, prim
from fusebind.dialect.prim_bitwise import BitwiseAndOp, BitwiseOrOp, BitwiseXorOp, InvertOp, LeftShiftOp, RightShiftOp
from fusebind.dialect.prim_division import FmodOp
from fusebind.dialect.scalar import NumpyScalarBuilder
from fusebind.dialect.types import (ELEMENT_TYPES, ELEMENTS, FAMILIES, INT_TYPES, UINT_TYPES, element_type,
                                    element_type_name, name_of_numpy_dtype, numpy_dtype, tensor_type)
from fusebind.lowering.abi import DType
from fusebind.lowering.scalar_text import TextScalarBuilder

WIDTHS = ("i8", "i16", "ui8", "ui16", "ui32", "ui64")


def edges(elem: str) -> np.ndarray:
    dt = numpy_dtype(elem)
    info = np.iinfo(dt)
    vals = {info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2, 3, 7}
    if info.min < 0:
        vals |= {-1, -2, -3, -7}
    return np.array(sorted(vals), dtype=dt)


def pairs(elem: str) -> tuple[np.ndarray, np.ndarray]:
    e = edges(elem)
    a, b = np.meshgrid(e, e)
    return a.reshape(-1), b.reshape(-1)


def block_args(*types: tuple[tuple[int, ...], str]) -> list:
    return list(Block(arg_types=[tensor_type(s, e) for s, e in types]).args)


def same(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), (what, got.dtype, want.dtype, got.shape, want.shape)
    bad = np.nonzero(got.reshape(-1) != want.reshape(-1))[0][:5]
    assert not bad.size, f"{what}: at {bad} got {got.reshape(-1)[bad]} want {want.reshape(-1)[bad]}"


def test_the_family_is_on_and_named_as_mlir_names_them() -> None:
    assert FAMILIES["int_widths"]
    assert set(WIDTHS) <= set(ELEMENT_TYPES) and set(WIDTHS) <= INT_TYPES
    assert UINT_TYPES == {"ui8", "ui16", "ui32", "ui64"}
    assert element_type("ui8") == IntegerType(8, Signedness.UNSIGNED)
    assert element_type("i8") == IntegerType(8, Signedness.SIGNLESS)
    for e in WIDTHS:
        assert element_type_name(element_type(e)) == e
        assert name_of_numpy_dtype(numpy_dtype(e)) == e
        assert DType.parse(e).value == e and DType.from_numpy(numpy_dtype(e)).value == e
        assert DType.parse(e).mlir == ELEMENTS[e].mlir == f"i{ELEMENTS[e].bits}"
    text = ("builtin.module {\n  func.func @f(%a: tensor<4xui8>, %b: tensor<4xui8>) -> tensor<4xui8> {\n"
            "    %0 = prim.floordiv %a, %b : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>\n"
            "    func.return %0 : tensor<4xui8>\n  }\n}")
    module = parse_module(text)
    assert "tensor<4xui8>" in print_module(module)
    a, b = np.array([255, 7, 0, 200], np.uint8), np.array([2, 0, 3, 255], np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(interpret(module, a, b), np.array([127, 0, 0, 0], np.uint8), "interpreted ui8 floordiv")


BINARY: dict[str, tuple[type, Any]] = {
    "add": (prim.AddOp, np.add), "sub": (prim.SubOp, np.subtract), "mul": (prim.MulOp, np.multiply),
    "floordiv": (prim.FloorDivOp, np.floor_divide), "rem": (prim.RemOp, np.remainder), "fmod": (FmodOp, np.fmod),
    "div": (prim.DivOp, np.floor_divide), "max": (prim.MaxOp, np.maximum), "min": (prim.MinOp, np.minimum),
    "and": (BitwiseAndOp, np.bitwise_and), "or": (BitwiseOrOp, np.bitwise_or),
    "xor": (BitwiseXorOp, np.bitwise_xor),
}


def numpy_answer(fn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's value, with numpy's x86-64 x // 0 == x % 0 == 0 (numpy gives that, and warns)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = np.asarray(fn(a, b))
    if fn in (np.floor_divide, np.remainder, np.fmod):
        out = np.where(b == 0, np.zeros((), out.dtype), out)
    return out.astype(a.dtype)


@pytest.mark.parametrize("elem", WIDTHS)
@pytest.mark.parametrize("kind", list(BINARY))
def test_binary_integer_ops_reference_and_scalar_body_are_numpys(kind: str, elem: str) -> None:
    cls, fn = BINARY[kind]
    a, b = pairs(elem)
    x, y = block_args((a.shape, elem), (b.shape, elem))
    op = cls(x, y)
    op.verify()
    want = numpy_answer(fn, a, b)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        same(op.reference(a, b), want, f"{kind} {elem} reference")
        same(np.asarray(op.scalar_body(NumpyScalarBuilder(), a, b)).astype(a.dtype), want, f"{kind} {elem} body")


@pytest.mark.parametrize("elem", WIDTHS)
def test_shifts_compare_unary_and_pow(elem: str) -> None:
    dt = numpy_dtype(elem)
    bits = ELEMENTS[elem].bits
    xs = edges(elem)
    counts = np.arange(-3, bits + 3).astype(dt)  # wraps: -3 is 253 in uint8
    x, s = (v.reshape(-1) for v in np.meshgrid(xs, counts))
    with np.errstate(all="ignore"):
        # numpy's npy_lshift / npy_rshift: a count >= the width (a negative one reads as huge) gives
        # 0, or -1 for >> of a negative value; below the width the C shift
        big = s.astype(np.uint64) >= bits
        want_l = np.where(big, np.zeros((), dt), np.left_shift(x, np.where(big, 0, s).astype(dt)))
        want_r = np.where(big, np.where(x < 0, np.array(-1).astype(dt), np.zeros((), dt)),
                          np.right_shift(x, np.where(big, 0, s).astype(dt)))
    for cls, want in ((LeftShiftOp, want_l), (RightShiftOp, want_r)):
        op = cls(*block_args((x.shape, elem), (s.shape, elem)))
        op.verify()
        same(op.reference(x, s), want, f"{op.name} {elem} reference")
        same(np.asarray(op.scalar_body(NumpyScalarBuilder(), x, s)).astype(dt), want, f"{op.name} {elem} body")
    a, b = pairs(elem)
    for pred, fn in (("lt", np.less), ("ge", np.greater_equal), ("eq", np.equal)):
        op = prim.CompareOp(pred, *block_args((a.shape, elem), (b.shape, elem)))
        same(op.reference(a, b), fn(a, b), f"compare {pred} {elem}")
        same(op.scalar_body(NumpyScalarBuilder(), a, b), fn(a, b), f"compare {pred} {elem} body")
    for cls, fn in ((prim.NegOp, np.negative), (prim.AbsOp, np.abs), (InvertOp, np.invert)):
        op = cls(*block_args((xs.shape, elem)))
        op.verify()
        with np.errstate(all="ignore"):
            same(op.reference(xs), fn(xs), f"{op.name} {elem}")
            same(np.asarray(op.scalar_body(NumpyScalarBuilder(), xs)).astype(dt), fn(xs), f"{op.name} {elem} body")
    # pow: wraps modulo 2^width; an unsigned exponent is never negative, so it always has a kernel form
    base, e = np.meshgrid(xs, np.array([0, 1, 2, 3, 7, bits - 1], dt))
    op = prim.PowOp(*block_args((base.shape, elem), (e.shape, elem)))
    with np.errstate(all="ignore"):
        if elem in UINT_TYPES:
            assert op.kernel_computable()
            same(np.asarray(op.scalar_body(NumpyScalarBuilder(), base, e)).astype(dt), np.power(base, e), "pow body")
        same(op.reference(base, e), np.power(base, e), f"pow {elem}")


def test_numpy_scalar_builder_constants_wrap_into_the_element_type() -> None:
    b = NumpyScalarBuilder()
    assert b.constant(-1, "ui8") == 255 and b.constant(-1, "ui8").dtype == np.uint8
    assert b.constant(2 ** 64 - 1, "ui64") == np.iinfo(np.uint64).max
    assert b.constant(255, "i8") == -1 and b.constant(1 << 15, "i16") == -(1 << 15)


def _text(fn: Any, *elems: str) -> tuple[str, str]:
    counter = iter(range(10 ** 6))
    b = TextScalarBuilder(lambda hint="v": f"%{hint}{next(counter)}")
    args = [b.bind(f"%a{i}", e) for i, e in enumerate(elems)]
    out = fn(b, *args)
    return "\n".join(b.lines), b.elem(out)


@pytest.mark.parametrize("elem", ["ui8", "ui16", "ui32", "ui64"])
def test_the_text_builder_writes_the_signless_type_and_unsigned_ops(elem: str) -> None:
    t = ELEMENTS[elem].mlir
    cases = {
        "divui": lambda b, x, y: b.floordiv(x, y), "remui": lambda b, x, y: b.rem(x, y),
        "shrui": lambda b, x, y: b.right_shift(x, y), "cmpi ult": lambda b, x, y: b.compare("lt", x, y),
        "cmpi ugt": lambda b, x, y: b.maximum(x, y), "uitofp": lambda b, x, y: b.cast(x, "f64"),
        "extui": lambda b, x, y: b.cast(x, "i64") if elem != "ui64" else b.cast(b.cast(x, "f32"), "ui64"),
    }
    for op, fn in cases.items():
        text, _ = _text(fn, elem, elem)
        assert f"arith.{op}" in text or (op == "extui" and elem == "ui64"), (op, text)
        assert elem not in text.replace(f"%a0", "").replace(f"%a1", ""), f"{op}: the element name leaks into MLIR: {text}"
        for signed in ("divsi", "floordivsi", "remsi", "shrsi", "cmpi slt", "cmpi sgt", "extsi", "sitofp"):
            assert f"arith.{signed} " not in text or op in ("uitofp",), (op, signed, text)
        assert f": {t}" in text or op in ("uitofp", "extui")
    text, out = _text(lambda b, x: b.abs(x), elem)
    assert (text, out) == ("", elem)  # np.abs of unsigned is the identity: no op
    text, out = _text(lambda b, x: b.cast(x, "i" + elem[2:]), elem)
    assert text.endswith(f"arith.bitcast %a0 : {t} to {t}") and out == "i" + elem[2:]


def test_the_text_builder_keeps_signed_ops_for_signed_widths() -> None:
    for elem in ("i8", "i16"):
        text, _ = _text(lambda b, x, y: b.floordiv(x, y), elem, elem)
        assert "arith.floordivsi" in text and "divui" not in text
        text, _ = _text(lambda b, x, y: b.right_shift(x, y), elem, elem)
        assert "arith.shrsi" in text
        text, _ = _text(lambda b, x: b.cast(x, "ui32"), elem)
        assert f"arith.extsi %a0 : {elem} to i32" in text  # int8 -1 -> uint32 4294967295, as numpy
