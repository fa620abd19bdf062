"""The op registry (dialect/registry.py): append-only, clash errors naming the earlier source,
`prim.` refused for user ops, fingerprints that follow the body, and user ops that parse,
print, verify and interpret once registered."""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

import numpy as np
import pytest
from xdsl.irdl import irdl_op_definition
from xdsl.traits import Commutative

from fusebind.dialect import (
    BinaryOp, FusebindValueError, IRVerifyError, OpRegistrationError, UnaryOp, UnknownOpError, interpret,
    make_context, op_class, op_fingerprint, parse_module, print_module, prim, register_op, registered_ops,
)
from fusebind.dialect.types import FLOAT_TYPES


@irdl_op_definition
class CubeOp(UnaryOp):
    """x * x * x: a user op defined only in this test file."""

    name = "regtest.cube"
    DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES
    FLOPS_PER_ELEMENT: ClassVar[float] = 2.0

    def scalar_body(self, b: Any, *args: Any) -> Any:
        return b.mul(b.mul(args[0], args[0]), args[0])

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        (x,) = arrays
        return x * x * x


@irdl_op_definition
class HypotOp(BinaryOp):
    name = "regtest.hypot"
    DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES

    def scalar_body(self, b: Any, *args: Any) -> Any:
        x, y = args
        return b.sqrt(b.add(b.mul(x, x), b.mul(y, y)))

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        return np.hypot(*arrays)


register_op(CubeOp)
register_op(HypotOp)

TEXT = """func.func @main(%a: tensor<4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = regtest.cube %a : tensor<4xf32> -> tensor<4xf32>
  %1 = regtest.hypot %0, %b : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %1 : tensor<3x4xf32>
}
"""


def test_every_builtin_is_registered_first_with_its_short_kind() -> None:
    ops = registered_ops()
    n = len(prim.ALL_PRIM_OPS)
    assert ops[:n] == prim.ALL_PRIM_OPS
    assert ops.index(CubeOp) >= n and ops.index(HypotOp) == ops.index(CubeOp) + 1
    for cls in prim.ALL_PRIM_OPS:
        assert op_class(cls.KIND) is cls and op_class(cls.name) is cls and cls.name == "prim." + cls.KIND


def test_user_op_kind_is_its_full_name() -> None:
    assert CubeOp.KIND == "regtest.cube"
    assert op_class("regtest.cube") is CubeOp


def test_a_name_clash_names_the_earlier_source() -> None:
    @irdl_op_definition
    class OtherCube(UnaryOp):
        name = "regtest.cube"
        DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES

    with pytest.raises(OpRegistrationError) as info:
        register_op(OtherCube)
    msg = str(info.value)
    assert "'regtest.cube' is already registered by " + __name__ + ":CubeOp (" in msg
    assert f"{__file__}:{inspect.getsourcelines(CubeOp)[1]})" in msg
    assert "append-only" in msg
    assert isinstance(info.value, FusebindValueError) and isinstance(info.value, ValueError)
    assert op_class("regtest.cube") is CubeOp  # nothing replaced


def test_clash_with_a_builtin_names_its_module() -> None:
    with pytest.raises(OpRegistrationError, match=r"'prim.add' is already registered by "
                                                  r"fusebind.dialect.prim_elementwise:AddOp \("):
        register_op(irdl_op_definition(type("AddAgain", (BinaryOp,), {"name": "prim.add", "__module__": __name__})))


def test_reregistering_the_same_class_is_a_no_op() -> None:
    before = registered_ops()
    assert register_op(CubeOp) is CubeOp
    assert registered_ops() == before


def test_prim_prefix_is_refused_for_user_ops() -> None:
    @irdl_op_definition
    class Sneaky(UnaryOp):
        name = "prim.cube_user"
        DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES

    with pytest.raises(OpRegistrationError, match=r"'prim.cube_user' uses the 'prim.' prefix, which belongs to "
                                                  r"fusebind; a user op uses its own dialect prefix, e.g. "
                                                  r"'mylib.cube_user'"):
        register_op(Sneaky)
    with pytest.raises(UnknownOpError):
        op_class("prim.cube_user")


def test_not_an_op_class_is_refused() -> None:
    with pytest.raises(OpRegistrationError, match="is not an op class"):
        register_op(int)  # type: ignore[arg-type]


def test_unknown_op_names_close_matches() -> None:
    with pytest.raises(UnknownOpError, match=r"^no op 'reduce_summ' is registered; did you mean 'reduce_sum'"):
        op_class("reduce_summ")
    with pytest.raises(KeyError):
        op_class("nothing_like_it_at_all")


def _exec_cube(body: str) -> type:
    """A cube op class from text with no source file (the fingerprint falls back to bytecode)."""
    ns: dict[str, Any] = {"UnaryOp": UnaryOp, "ClassVar": ClassVar, "FLOAT_TYPES": FLOAT_TYPES,
                          "irdl_op_definition": irdl_op_definition}
    exec("@irdl_op_definition\nclass Cube(UnaryOp):\n    name = 'fp.cube'\n"
         "    DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES\n"
         f"    def scalar_body(self, b, *args):\n        return {body}\n", ns)
    return ns["Cube"]


def _file_cube(edited: bool) -> type:
    """Two definitions of one op name in this file, as two versions of a user's module would be."""
    if not edited:
        @irdl_op_definition
        class Cube(UnaryOp):
            name = "fp.cube"
            DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES

            def scalar_body(self, b: Any, *args: Any) -> Any:
                return b.mul(b.mul(args[0], args[0]), args[0])
        return Cube

    @irdl_op_definition
    class Cube(UnaryOp):  # type: ignore[no-redef]
        name = "fp.cube"
        DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES

        def scalar_body(self, b: Any, *args: Any) -> Any:
            return b.mul(args[0], b.mul(args[0], args[0]))
    return Cube


def test_fingerprint_follows_the_body() -> None:
    assert op_fingerprint(_file_cube(False)) == op_fingerprint(_file_cube(False))
    assert op_fingerprint(_file_cube(False)) != op_fingerprint(_file_cube(True))
    body = "b.mul(b.mul(args[0], args[0]), args[0])"
    assert op_fingerprint(_exec_cube(body)) == op_fingerprint(_exec_cube(body))
    assert op_fingerprint(_exec_cube(body)) != op_fingerprint(_exec_cube("b.mul(args[0], b.mul(args[0], args[0]))"))
    assert op_fingerprint(CubeOp) != op_fingerprint(_file_cube(False))  # another name and reference


def test_fingerprint_follows_the_facts() -> None:
    @irdl_op_definition
    class Cube(UnaryOp):
        name = "fp.cube"
        DTYPES: ClassVar[frozenset[str]] = FLOAT_TYPES | {"i32"}

        def scalar_body(self, b: Any, *args: Any) -> Any:
            return b.mul(b.mul(args[0], args[0]), args[0])

    assert op_fingerprint(Cube) != op_fingerprint(_file_cube(False))
    assert len({op_fingerprint(c) for c in prim.ALL_PRIM_OPS}) == len(prim.ALL_PRIM_OPS)


def test_commutative_traits() -> None:
    assert {c.KIND for c in prim.ALL_PRIM_OPS if c.has_trait(Commutative)} == {
        "add", "mul", "max", "min", "bitwise_and", "bitwise_or", "bitwise_xor"}


def test_make_context_parses_prints_verifies_and_interprets_a_user_op() -> None:
    ctx = make_context()
    module = parse_module(TEXT, ctx)
    assert print_module(module) == "builtin.module {\n" + "".join(
        "  " + line + "\n" for line in TEXT.splitlines()) + "}\n"
    a = np.linspace(-2, 2, 4, dtype=np.float32)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = interpret(module, a, b)
    np.testing.assert_array_equal(out, np.hypot(a * a * a, b))
    assert out.dtype == np.float32


def test_user_op_verifies_its_dtypes() -> None:
    bad = TEXT.replace("f32", "i32")
    with pytest.raises(IRVerifyError, match=r"regtest.cube: operand element type i32 is not supported; "
                                            r"expected one of f32, f64"):
        parse_module(bad)
