"""prim.gather / prim.take_along lowered as index maps (issue 13): in a fused region the gather is
folded into its consumer's loop (no loop nest, no buffer of its own); the kernels compute the
reference's values for constant, in_bounds and negative indices, i32 and i64 indices, bool data,
strided inputs and dynamic shapes; a broken in_bounds promise still reads inside the operand."""

from __future__ import annotations

import re

import numpy as np

import fusebind as fb
from fusebind.dialect import parse_module
from fusebind.dialect.interpreter import run_function
from fusebind.lowering import emit_linalg
from fusebind.lowering.pipeline import UPSTREAM_PIPELINE, pipeline_text, run_upstream_pipeline

from lowering_helpers import compile_func


def _bufferized(region) -> str:
    """The region's kernel after fusion and bufferization (before loops)."""
    names = [p for p, _ in UPSTREAM_PIPELINE]
    upto = names.index("buffer-deallocation-pipeline") + 1
    return str(run_upstream_pipeline(emit_linalg(region).text, pipeline=pipeline_text(UPSTREAM_PIPELINE[:upto])))


def test_an_embedding_lookup_feeding_math_and_a_sum_is_one_loop_nest_with_no_intermediate() -> None:
    rng = np.random.default_rng(5)
    table = rng.standard_normal((50, 8)).astype(np.float32)
    ids = np.array([3, 49, -1, 0, 7])
    f = fb.jit(lambda t, i: (np.take(t, i, axis=0) * 2.0).sum(axis=1))
    np.testing.assert_allclose(f(table, ids), (table[ids] * 2).sum(axis=1), rtol=1e-6)
    module = parse_module(f.optimized(table, ids))
    (region,) = [op for op in module.walk() if op.name == "fused.region"]
    assert any(op.name == "prim.gather" for op in region.walk())
    ir = _bufferized(region)
    assert not re.search(r"memref\.alloca?\(\)[^\n]*memref<5x8xf32>", ir), ir  # the gathered rows are never stored
    # one loop nest reads the rows, scales and sums them; the other casts the f64 sums to f32
    assert ir.count("linalg.generic") == 2 and "memref.load %arg0[" in ir, ir


TEXT = """func.func @k(%x: tensor<6x5xf32>, %i: tensor<2x3xi32>, %b: tensor<4x6xi1>, %j: tensor<4x1xi64>)
    -> (tensor<2x3x5xf32>, tensor<6x3xf32>, tensor<4x1xi1>, tensor<4x5xf32>, tensor<2x3x5xf32>) {
  %0 = prim.gather %x, %i {axis = 0, in_bounds} : (tensor<6x5xf32>, tensor<2x3xi32>) -> tensor<2x3x5xf32>
  %c = prim.constant dense<[4, -1, 0]> : tensor<3xi64>
  %1 = prim.gather %x, %c {axis = 1} : (tensor<6x5xf32>, tensor<3xi64>) -> tensor<6x3xf32>
  %2 = prim.take_along %b, %j {axis = 1, in_bounds} : (tensor<4x6xi1>, tensor<4x1xi64>) -> tensor<4x1xi1>
  %r = prim.constant dense<[[5, 0, -6, 2, 1]]> : tensor<1x5xi64>
  %t = prim.take_along %x, %r {axis = 0} : (tensor<6x5xf32>, tensor<1x5xi64>) -> tensor<1x5xf32>
  %3 = prim.broadcast_to %t : tensor<1x5xf32> -> tensor<4x5xf32>
  %e = prim.exp %x : tensor<6x5xf32> -> tensor<6x5xf32>
  %4 = prim.gather %e, %i {axis = 0, in_bounds} : (tensor<6x5xf32>, tensor<2x3xi32>) -> tensor<2x3x5xf32>
  func.return %0, %1, %2, %3, %4 : tensor<2x3x5xf32>, tensor<6x3xf32>, tensor<4x1xi1>, tensor<4x5xf32>, tensor<2x3x5xf32>
}"""


def _inputs():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    i = np.array([[5, -6, 0], [-1, 2, 3]], np.int32)
    b = rng.standard_normal((4, 6)) > 0
    j = np.array([[0], [5], [-1], [-6]])
    return x, i, b, j


def test_kernels_match_the_reference(object_cache) -> None:
    x, i, b, j = _inputs()
    want = run_function(parse_module(TEXT), [x, i, b, j], None)
    k = compile_func(TEXT, object_cache)
    assert not getattr(k.emitted, "checks", ())  # constant and in_bounds indices: no check in the kernel (ABI v1)
    for g, w in zip(k(x, i, b, j), want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)
    ks = compile_func(TEXT, object_cache, strided=True)
    xs = np.zeros((12, 5), np.float32)[::2]
    xs[...] = x
    for g, w in zip(ks(xs, i, b, j), want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_dynamic_shapes_and_a_broken_in_bounds_promise_stays_inside_the_operand(object_cache) -> None:
    text = """func.func @k(%x: tensor<?x4xf64>, %i: tensor<?xi64>) -> tensor<?x4xf64> {
  %0 = prim.gather %x, %i {axis = 0, in_bounds} : (tensor<?x4xf64>, tensor<?xi64>) -> tensor<?x4xf64>
  func.return %0 : tensor<?x4xf64>
}"""
    k = compile_func(text, object_cache, dynamic=True)
    x = np.arange(28, dtype=np.float64).reshape(7, 4)
    i = np.array([6, -7, 3])
    (got,) = k(x, i, out_shapes=[(3, 4)])
    np.testing.assert_array_equal(got, x[i])
    (got,) = k(x, np.array([99, -99]), out_shapes=[(2, 4)])  # clamped: the last row and the first
    np.testing.assert_array_equal(got, x[[6, 0]])


def test_a_checked_gather_is_read_once_its_check_is_a_loop_over_the_indices() -> None:
    """Computed indices: a check loop over the indices (side effects, the status) and a pure gather
    that fusion folds into its consumer: x is read by one loop, not twice."""
    text = """func.func @main(%a: tensor<50x8xf32>, %i: tensor<6xi32>) -> tensor<6x8xf32> {
  %r = fused.region @emb (%a, %i) : (tensor<50x8xf32>, tensor<6xi32>) -> tensor<6x8xf32> {
  ^bb0(%x: tensor<50x8xf32>, %j: tensor<6xi32>):
    %c = prim.constant dense<1> : tensor<i32>
    %k = prim.add %j, %c : (tensor<6xi32>, tensor<i32>) -> tensor<6xi32>
    %g = prim.gather %x, %k {axis = 0} : (tensor<50x8xf32>, tensor<6xi32>) -> tensor<6x8xf32>
    %m = prim.mul %g, %g : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
    fused.yield %m : tensor<6x8xf32>
  }
  func.return %r : tensor<6x8xf32>
}"""
    (region,) = [op for op in parse_module(text).walk() if op.name == "fused.region"]
    assert emit_linalg(region).checks == ("axis 0 of prim.gather",)
    ir = _bufferized(region)
    assert ir.count("memref.load %arg0[") == 1, ir  # one read of x
    assert not re.search(r"memref\.alloca?\(\)[^\n]*memref<6x8xf32>", ir), ir  # no gathered buffer
    assert ir.count("scf.if") == 2 and ir.count("linalg.generic") == 2, ir  # (the index add, the fused gather)
