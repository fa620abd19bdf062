"""parse_module / print_module: round trips and the error types of bad text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fusebind.dialect import (
    FusebindIRError,
    IRParseError,
    IRVerifyError,
    interpret,
    parse_module,
    print_module,
)

SAMPLE = """
func.func @main(%a: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
  %0 = prim.add %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %1 = prim.exp %0 : tensor<4x3xf32> -> tensor<4x3xf32>
  %c = prim.compare lt %0, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %s = prim.select %c, %1, %0 : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %2 = prim.reduce_sum %s {axes = [1], keepdims} : tensor<4x3xf32> -> tensor<4x1xf32>
  %3 = prim.reshape %2 : tensor<4x1xf32> -> tensor<4xf32>
  %k = prim.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %r = fused.region @foo id 3 (%3, %k) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> cost #fused.cost<flops = 4, bytes = 48, ns = 1.5> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %z = prim.mul %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fused.yield %z : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
"""


def test_custom_and_generic_round_trip() -> None:
    m = parse_module(SAMPLE)
    text = print_module(m)
    generic = print_module(m, generic=True)
    assert '"prim.add"' in generic and "prim.add %a, %b" in text
    assert print_module(parse_module(text)) == text
    assert print_module(parse_module(generic)) == text


def test_sample_interprets_like_numpy() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    s = a + b
    expected = np.where(s < b, np.exp(s), s).sum(axis=1) * np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_allclose(interpret(parse_module(SAMPLE), a, b), expected, rtol=1e-6)


def test_syntax_error_is_irparseerror_with_location() -> None:
    with pytest.raises(IRParseError) as info:
        parse_module("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = prim.add %a %a\n}")
    assert info.value.line == 2
    assert isinstance(info.value, FusebindIRError)


def test_unknown_op_is_irparseerror() -> None:
    with pytest.raises(IRParseError):
        parse_module('func.func @f() {\n  "prim.bogus"() : () -> ()\n  func.return\n}')


def test_verifier_failure_is_irverifyerror_with_location() -> None:
    text = (
        "func.func @f(%a: tensor<4x3xf32>, %b: tensor<5xf32>) -> tensor<4x3xf32> {\n"
        "  %0 = prim.add %a, %b : (tensor<4x3xf32>, tensor<5xf32>) -> tensor<4x3xf32>\n"
        "  func.return %0 : tensor<4x3xf32>\n}"
    )
    with pytest.raises(IRVerifyError) as info:
        parse_module(text)
    assert info.value.message == "prim.add: operand shapes (4, 3) and (5,) do not broadcast"
    assert (info.value.line, info.value.column) == (2, 3)


@pytest.mark.parametrize("text", ["", "}", "%0 = ", "func.func @f(", "\x00", "builtin.module {", "prim.add"])
def test_garbage_only_raises_fusebind_errors(text: str) -> None:
    try:
        parse_module(text)
    except FusebindIRError:
        return
    # Empty input is a valid empty module.
    assert text == ""


def test_examples_parse_and_round_trip() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    files = sorted(root.glob("*.mlir"))
    if not files:
        pytest.skip("no examples/*.mlir yet")
    for path in files:
        text = print_module(parse_module(path.read_text()))
        assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_constants_survive_print_and_parse(dtype) -> None:
    """xDSL prints -inf / inf / nan as hex bit patterns (`dense<0xff800000>`) but read such a
    literal back as an integer value (-inf became 4286578688.0): a silent wrong answer on every
    printed-and-reparsed module (arm 0, fusebind-opt). The parser reads the bits, as MLIR does."""
    from fusebind.api.trace import trace_graph

    x = np.array([1.0, -2.0, 3.0], dtype)

    def f(v):
        return v + np.array([-np.inf, np.nan, np.inf], dtype), np.maximum(v, -np.inf) * 1.5

    module, graph = trace_graph(f, [x], ["x"], "f")
    hidden = [cap.array() for cap, _ in graph.captures.values()]
    text = print_module(module)
    assert "0x" in text  # the printed form this guards
    again = parse_module(text)
    assert print_module(again) == text
    for got, want in zip(interpret(again, x, *hidden), f(x)):
        np.testing.assert_array_equal(got, want)
    splat = parse_module(f"""func.func @g() -> tensor<3x{'f32' if dtype == np.float32 else 'f64'}> {{
  %c = prim.constant dense<{'0xff800000' if dtype == np.float32 else '0xfff0000000000000'}> : tensor<3x{'f32' if dtype == np.float32 else 'f64'}>
  func.return %c : tensor<3x{'f32' if dtype == np.float32 else 'f64'}>
}}""")
    np.testing.assert_array_equal(interpret(splat)[0], np.full(3, -np.inf, dtype))
