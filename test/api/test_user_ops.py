"""User-defined ops (issue 12): one class in the user's module, `fn = fb.register_op(OpClass)`, no other edit.

The op classes (`mylib.cube` x*x*x and `mylib.hypot2` a*a + b*b, f32/f64) are defined only in
test/api/user_ops.py, which the lit test test/lit/tools/user-op-plugin.mlir also loads as a
`fusebind-opt --plugin`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from xdsl.irdl import irdl_op_definition

import fusebind as fb
from fusebind.dialect import BinaryOp, UnaryOp, interpret, parse_module, print_module
from user_ops import CubeOp, Hypot2Op, cube, hypot2

X32 = np.linspace(-2, 2, 64, dtype=np.float32)
Y32 = np.linspace(3, -1, 64, dtype=np.float32)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_through_jit_the_values_are_numpy_s(dt: type) -> None:
    x, y = X32.astype(dt), Y32.astype(dt)
    got = fb.jit(lambda a: cube(a))(x)
    assert got.dtype == dt
    np.testing.assert_allclose(got, x * x * x, rtol=1e-6)
    got = fb.jit(lambda a, b: hypot2(a, b))(x, y)
    assert got.dtype == dt
    np.testing.assert_allclose(got, x * x + y * y, rtol=1e-6)


def test_on_numpy_arrays_it_computes_the_reference_with_numpy_s_dtype_rules() -> None:
    np.testing.assert_array_equal(cube(X32), X32 * X32 * X32)
    assert cube(X32).dtype == np.float32 and hypot2(X32, 2.0).dtype == np.float32  # a Python float is weak
    assert cube(np.arange(3, dtype=np.int32)).dtype == np.float64  # numpy's float-function table
    np.testing.assert_array_equal(cube(np.arange(3)), np.arange(3.0) ** 3)
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(lambda m: cube(m))(np.array([True, False]))
    assert str(info.value) == ("fusebind: in '<lambda>': mylib.cube of a bool array is not supported: mylib.cube "
                               "takes float32, float64; cast first: x.astype(np.float32)")
    with pytest.raises(fb.UnsupportedOperation) as info:
        hypot2(X32)
    assert str(info.value) == "mylib.hypot2() takes 2 operands (lhs, rhs), 1 given"


def test_an_op_refuses_a_dtype_outside_its_dtypes_naming_the_op_and_dtypes() -> None:
    @irdl_op_definition
    class HalfOp(UnaryOp):  # f32 only
        name = "mylib.half32"
        DTYPES: ClassVar[frozenset[str]] = frozenset({"f32"})

        def scalar_body(self, b: Any, *args: Any) -> Any:
            return b.mul(args[0], b.constant(0.5, b.elem(args[0])))

        def _ref(self, x: np.ndarray) -> np.ndarray:
            return x * np.asarray(0.5, x.dtype)

    half = fb.register_op(HalfOp)
    np.testing.assert_array_equal(fb.jit(lambda a: half(a))(X32), X32 * np.float32(0.5))
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(lambda a: half(a))(X32.astype(np.float64))
    assert str(info.value) == ("fusebind: in '<lambda>': mylib.half32 of a float64 array is not supported: "
                               "mylib.half32 takes float32; cast first: x.astype(np.float32)")


def test_the_trace_prints_parses_and_interprets() -> None:
    f = fb.jit(lambda a, b: hypot2(cube(a) + 1.0, b) * 2.0)
    text = f.mlir(X32, Y32)
    assert "mylib.cube %a : tensor<64xf32> -> tensor<64xf32>" in text
    assert "mylib.hypot2 %" in text
    module = parse_module(text)
    module.verify()
    assert print_module(module) == print_module(parse_module(print_module(module)))
    out = interpret(module, X32, Y32)
    np.testing.assert_allclose(out, ((X32 ** 3 + 1) ** 2 + Y32 * Y32) * 2, rtol=1e-6)


def test_it_fuses_with_its_neighbours_and_the_fused_arm_runs() -> None:
    f = fb.jit(lambda a, b: hypot2(cube(a) + 1.0, b) * 2.0)
    np.testing.assert_allclose(f(X32, Y32), ((X32 ** 3 + 1) ** 2 + Y32 * Y32) * 2, rtol=1e-6)
    explain = f.explain(X32, Y32)
    region = next(line for line in explain.splitlines() if line.startswith("region @"))
    assert "mylib.cube" in region and "mylib.hypot2" in region and "prim.add" in region
    assert "chosen: fused" in explain
    f(X32, Y32)
    assert f.stats.fused_calls >= 1


def test_a_name_clash_is_an_error_naming_the_first_registration() -> None:
    @irdl_op_definition
    class OtherCube(UnaryOp):
        name = "mylib.cube"
        DTYPES: ClassVar[frozenset[str]] = frozenset({"f32"})

    with pytest.raises(fb.OpRegistrationError) as info:
        fb.register_op(OtherCube)
    msg = str(info.value)
    assert msg.startswith("register_op: op name 'mylib.cube' is already registered by user_ops:CubeOp (")
    assert "user_ops.py:" in msg and "give the new op another name" in msg
    assert isinstance(info.value, ValueError)
    assert fb.register_op(CubeOp)(X32).dtype == np.float32  # the same class again: a no-op


def test_the_prim_prefix_is_refused() -> None:
    @irdl_op_definition
    class Sneaky(BinaryOp):
        name = "prim.hypot2"
        DTYPES: ClassVar[frozenset[str]] = frozenset({"f32"})

    with pytest.raises(fb.OpRegistrationError) as info:
        fb.register_op(Sneaky)
    assert str(info.value) == ("register_op: 'prim.hypot2' uses the 'prim.' prefix, which belongs to fusebind; a "
                               "user op uses its own dialect prefix, e.g. 'mylib.hypot2'")
    assert Hypot2Op.KIND == "mylib.hypot2"
