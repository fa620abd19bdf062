"""The reference interpreter: the examples against hand-written numpy, and
its argument checks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from fusebind.dialect import InterpretError, interpret, parse_module

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RNG = np.random.default_rng(7)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_mlp_block_matches_numpy() -> None:
    m = parse_module((EXAMPLES / "mlp.mlir").read_text())
    # examples/mlp.mlir: any number of rows, d_model 64, hidden 256
    x, g, b = f32(8, 64), f32(64), f32(64)
    w1, b1, w2, b2 = f32(64, 256), f32(256), f32(256, 64), f32(64)
    got = interpret(m, x, g, b, w1, b1, w2, b2, entry="mlp")
    mu = x.mean(1, keepdims=True)
    var = ((x - mu) ** 2).mean(1, keepdims=True)
    ln = (x - mu) / np.sqrt(var + 1e-5) * g + b
    h = ln @ w1 + b1
    gelu = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    expected = x + gelu @ w2 + b2
    assert got.dtype == np.float32 and got.shape == (8, 64)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_attention_matches_numpy() -> None:
    m = parse_module((EXAMPLES / "mlp.mlir").read_text())
    q, k, v = f32(2, 8, 16), f32(2, 8, 16), f32(2, 8, 16)
    got = interpret(m, q, k, v, entry="attention")
    s = q @ k.transpose(0, 2, 1) / 4
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, p @ v, rtol=1e-5, atol=1e-5)


def test_chain_and_dynamic_gelu() -> None:
    m = parse_module((EXAMPLES / "chain.mlir").read_text())
    a, b, c = f32(1024), f32(1024), f32(1024)
    np.testing.assert_allclose(interpret(m, a, b, c, entry="chain"), np.maximum(a * b + c, 0), rtol=1e-6)
    x = f32(37)
    expected = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x], np.float32)
    np.testing.assert_allclose(interpret(m, x, entry="gelu_erf"), expected, rtol=1e-5, atol=1e-6)


def test_fused_region_runs_its_body_and_multiple_results() -> None:
    m = parse_module("""
func.func @main(%a: tensor<3xf64>) -> (tensor<3xf64>, tensor<f64>) {
  %r, %s = fused.region @pair id 5 (%a) : (tensor<3xf64>) -> (tensor<3xf64>, tensor<f64>) {
  ^bb0(%x: tensor<3xf64>):
    %e = prim.exp %x : tensor<3xf64> -> tensor<3xf64>
    %m = prim.reduce_sum %e {axes = [0]} : tensor<3xf64> -> tensor<f64>
    fused.yield %e, %m : tensor<3xf64>, tensor<f64>
  }
  func.return %r, %s : tensor<3xf64>, tensor<f64>
}""")
    a = np.array([0.0, 1.0, 2.0])
    e, s = interpret(m, a)
    np.testing.assert_allclose(e, np.exp(a))
    assert s.shape == () and s == pytest.approx(np.exp(a).sum())


SIMPLE = """
func.func @main(%a: tensor<?x3xf32>, %b: tensor<3xi32>) -> tensor<?x3xf32> {
  func.return %a : tensor<?x3xf32>
}
func.func @other(%a: tensor<2xf32>) -> tensor<2xf32> {
  func.return %a : tensor<2xf32>
}
"""


def test_default_entry_is_main_and_dynamic_dims_accept_any_size() -> None:
    m = parse_module(SIMPLE)
    a = f32(5, 3)
    np.testing.assert_array_equal(interpret(m, a, np.zeros(3, np.int32)), a)


def test_wrong_dtype_names_the_argument() -> None:
    m = parse_module(SIMPLE)
    with pytest.raises(InterpretError, match=r"@main argument #1: expected dtype int32 \(i32\), found int64"):
        interpret(m, f32(5, 3), np.zeros(3, np.int64))
    assert issubclass(InterpretError, ValueError)


def test_wrong_shape_names_the_argument() -> None:
    m = parse_module(SIMPLE)
    with pytest.raises(InterpretError, match=r"@main argument #0: expected shape \(\?, 3\)"):
        interpret(m, f32(5, 4), np.zeros(3, np.int32))


def test_wrong_argument_count_and_unknown_entry() -> None:
    m = parse_module(SIMPLE)
    with pytest.raises(InterpretError, match="@main takes 2 arguments, 1 given"):
        interpret(m, f32(5, 3))
    with pytest.raises(InterpretError, match="no function @nope in the module; it has @main, @other"):
        interpret(m, entry="nope")


def test_ambiguous_entry_is_refused() -> None:
    m = parse_module(SIMPLE.replace("@main", "@first"))
    with pytest.raises(InterpretError, match="cannot choose an entry"):
        interpret(m, f32(2))


def test_runtime_broadcast_mismatch_is_reported() -> None:
    m = parse_module("""
func.func @main(%a: tensor<?xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = prim.add %a, %b : (tensor<?xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}""")
    np.testing.assert_allclose(interpret(m, f32(1), np.ones(4, np.float32)).shape, (4,))
    with pytest.raises(InterpretError, match=r"prim.add failed on operand shapes \(3,\), \(4,\)"):
        interpret(m, f32(3), np.ones(4, np.float32))
