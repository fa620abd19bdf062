"""The fixed reduction tree (compiler/tree_reduce.py): which reductions get one, its shape (fixed by
the operand's shape), the IR it builds (an inner stage that keeps the chunk axis, a view reshape,
an outer stage and a ragged tail read through a slice), and values against numpy through the
reference interpreter. Threads and accuracy: test/runtime/test_reduce_threads.py,
test/lowering/test_reduction_accuracy.py; the IR form: test/lit/compiler/tree-reduce.mlir."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.compiler.splitting import region_is_splittable
from fusebind.compiler.tree_reduce import (TREE_CHUNK_ELEMS, TREE_COLUMN_ROWS, TREE_MIN_ELEMS, TREE_ROW_ELEMS, TreeShape, tree_reduce,
                                           tree_shape)
from fusebind.dialect import parse_module
from fusebind.dialect.interpreter import run_function


@pytest.mark.parametrize("shape, axes, want", [
    ((1 << 20,), (0,), TreeShape(65536, 16)),
    ((300_007,), (0,), TreeShape(65536, 4)),            # a ragged tail of 37 863
    ((4096, 1024), (0,), TreeShape(512, 8)),            # column sums: at least 512 rows a chunk
    ((1 << 16, 16), (0,), TreeShape(4096, 16)),         # narrow columns: 2^16 elements a chunk
    ((10_000_000,), (0,), TreeShape(78125, 128)),       # grown to a divisor of N: no tail
    ((4096, 1024), (0, 1), TreeShape(64, 64)),
    ((8, 65536), (0, 1), TreeShape(1, 8)),              # a row is a chunk: the rows reduce first
    ((1031, 260, 1), (0, 2), TreeShape(512, 2)),
    ((1031, 260), (0, 1), TreeShape(252, 4)),
])
def test_the_tree_is_fixed_by_the_shape(shape, axes, want) -> None:
    assert tree_shape(shape, axes) == want
    assert want.rows * np.prod(shape[1:]) < 2 * TREE_CHUNK_ELEMS or want.rows in (1, TREE_COLUMN_ROWS)


def test_a_fused_row_kernel_gets_rows_of_the_row_length() -> None:
    """With an elementwise producer and every axis reduced, the inner stage is a fused row kernel:
    its rows are TREE_ROW_ELEMS long; column stages keep TREE_CHUNK_ELEMS."""
    assert tree_shape((300_007,), (0,), fused_rows=True) == TreeShape(TREE_ROW_ELEMS, 292)
    assert tree_shape((4096, 1024), (0, 1), fused_rows=True) == TreeShape(1, 4096)
    assert tree_shape((4096, 1024), (0,), fused_rows=True) == TreeShape(TREE_COLUMN_ROWS, 8)


@pytest.mark.parametrize("shape, axes", [
    ((TREE_MIN_ELEMS - 1,), (0,)),   # small: one pass, exactly the code it had
    ((4096, 1024), (1,)),            # keeps axis 0: already splittable
    ((8, 65536), (0,)),              # a chunk would be one row and reduce nothing
    ((1, 1 << 20), (0, 1)),          # one chunk
    ((), ()),
])
def test_reductions_that_keep_one_pass(shape, axes) -> None:
    assert tree_shape(shape, axes) is None


def _module(body: str, arg: str, result: str) -> str:
    return (f"func.func @main(%x: {arg}) -> {result} {{\n{body}\n"
            f"  func.return %r : {result}\n}}\n")


SQ_SUM = _module("  %s = prim.mul %x, %x : (tensor<300007xf32>, tensor<300007xf32>) -> tensor<300007xf32>\n"
                 "  %r = prim.reduce_sum %s {axes = [0]} : tensor<300007xf32> -> tensor<f32>",
                 "tensor<300007xf32>", "tensor<f32>")


def _ops(module) -> list[str]:
    return [op.name for op in next(iter(module.ops)).body.blocks[0].ops]


def test_the_rewrite_builds_the_inner_stage_the_view_and_the_tail() -> None:
    m = parse_module(SQ_SUM)
    assert tree_reduce(m) == 1
    text = str(m)
    assert _ops(m) == ["prim.slice", "prim.reshape", "prim.mul", "prim.reduce_sum", "prim.reshape", "prim.cast",
                       "prim.reduce_sum", "prim.slice", "prim.reshape", "prim.mul", "prim.reduce_sum", "prim.cast",
                       "prim.add", "prim.cast", "func.return"]
    # a fused row kernel: rows of TREE_ROW_ELEMS = 1024, 292 chunks, a tail of 999
    assert "limits = [299008]" in text and "tensor<299008xf32> -> tensor<292x1024xf32>" in text
    assert "prim.reduce_sum %2 {axes = [1], keepdims} : tensor<292x1024xf32> -> tensor<292x1xf32>" in text
    assert "starts = [299008], limits = [300007]" in text  # the tail: a view of x, no padding
    assert "tensor<300007xf32> -> tensor<300007xf32>" not in text  # the full-size square is gone
    m.verify()
    assert tree_reduce(m) == 0  # the stages it built are below the threshold or keep axis 0


def _interpret_both(src: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    before, after = parse_module(src), parse_module(src)
    assert tree_reduce(after) == 1
    after.verify()
    return np.asarray(run_function(before, [x], None)), np.asarray(run_function(after, [x], None))


@pytest.mark.parametrize("op, elem, np_dtype", [
    ("reduce_sum", "f64", np.float64), ("reduce_mean", "f64", np.float64), ("reduce_max", "f32", np.float32),
    ("reduce_min", "f32", np.float32), ("reduce_prod", "f64", np.float64), ("reduce_sum", "i32", np.int32),
    ("reduce_prod", "i64", np.int64), ("reduce_max", "i16", np.int16),
])
def test_values_keep_numpys_for_every_kind_axes_and_keepdims(op, elem, np_dtype) -> None:
    """(1031, 150, 3) over axes (0, 2) with keepdims (columns kept): 2 chunks of 512 rows, a tail of 7."""
    t = f"tensor<1031x150x3x{elem}>"
    src = _module(f"  %r = prim.{op} %x {{axes = [0, 2], keepdims}} : {t} -> tensor<1x150x1x{elem}>", t,
                  f"tensor<1x150x1x{elem}>")
    rng = np.random.default_rng(1)
    if np_dtype in (np.float32, np.float64):
        x = (1 + rng.standard_normal((1031, 150, 3)) * (1e-3 if op == "reduce_prod" else 1)).astype(np_dtype)
    else:
        x = rng.integers(-50, 50, (1031, 150, 3)).astype(np_dtype)  # products and sums wrap
    before, after = _interpret_both(src, x)
    assert after.dtype == before.dtype == np_dtype and after.shape == before.shape == (1, 150, 1)
    if np_dtype in (np.float32, np.float64):
        np.testing.assert_allclose(after, before, rtol=1e-12 if np_dtype == np.float64 else 0)
    else:
        np.testing.assert_array_equal(after, before)  # wrap-around is associative: exact


def test_max_propagates_a_nan_in_the_tail_and_in_a_chunk() -> None:
    t = "tensor<300007xf32>"
    src = _module(f"  %r = prim.reduce_max %x {{axes = [0]}} : {t} -> tensor<f32>", t, "tensor<f32>")
    for where in (5, 299_999):  # a chunk, the tail
        x = np.zeros(300_007, np.float32)
        x[where] = np.nan
        assert np.isnan(_interpret_both(src, x)[1])


def test_broadcast_operands_of_the_producers_follow_the_chunks() -> None:
    """(x - m) * w over (1031, 512) with m (1, 512) and w (512,): the column sums' producers are
    rebuilt on the chunks; m gets a leading 1 and w broadcasts from the right, unchanged."""
    t = "tensor<1031x512xf32>"
    src = ("func.func @main(%x: tensor<1031x512xf32>, %m: tensor<1x512xf32>, %w: tensor<512xf32>) -> tensor<512xf32> {\n"
           f"  %d = prim.sub %x, %m : ({t}, tensor<1x512xf32>) -> {t}\n"
           f"  %e = prim.mul %d, %w : ({t}, tensor<512xf32>) -> {t}\n"
           f"  %r = prim.reduce_sum %e {{axes = [0]}} : {t} -> tensor<512xf32>\n"
           "  func.return %r : tensor<512xf32>\n}\n")
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((1031, 512), (1, 512), (512,))]
    before, after = parse_module(src), parse_module(src)
    assert tree_reduce(after) == 1
    text = str(after)
    assert "tensor<1x512xf32> -> tensor<1x1x512xf32>" in text and "tensor<2x512x512xf32>" in text and "tensor<1x7x512xf32>" in text
    np.testing.assert_allclose(run_function(after, args, None), run_function(before, args, None), rtol=2e-5,
                               atol=2e-4)


def test_a_shared_producer_stays_and_is_read_as_a_leaf() -> None:
    t = "tensor<300007xf32>"
    src = ("func.func @main(%x: tensor<300007xf32>) -> (tensor<300007xf32>, tensor<f32>) {\n"
           f"  %e = prim.exp %x : {t} -> {t}\n"
           f"  %r = prim.reduce_sum %e {{axes = [0]}} : {t} -> tensor<f32>\n"
           f"  func.return %e, %r : {t}, tensor<f32>\n}}\n")
    m = parse_module(src)
    assert tree_reduce(m) == 1
    assert _ops(m).count("prim.exp") == 1 and "prim.slice %e" in str(m)


@pytest.mark.parametrize("elem", ["f16", "bf16", "i1"])
def test_narrow_floats_and_bool_keep_one_pass(elem) -> None:
    t = f"tensor<300007x{elem}>"
    op = "reduce_max" if elem == "i1" else "reduce_sum"
    m = parse_module(_module(f"  %r = prim.{op} %x {{axes = [0]}} : {t} -> tensor<{elem}>", t, f"tensor<{elem}>"))
    assert tree_reduce(m) == 0


def test_reductions_inside_a_region_are_left_alone() -> None:
    t = "tensor<300007xf32>"
    src = ("func.func @main(%a: tensor<300007xf32>) -> tensor<f32> {\n"
           f"  %r = fused.region @k (%a) : ({t}) -> tensor<f32> {{\n"
           f"  ^bb0(%x: {t}):\n"
           f"    %s = prim.reduce_sum %x {{axes = [0]}} : {t} -> tensor<f32>\n"
           "    fused.yield %s : tensor<f32>\n  }\n  func.return %r : tensor<f32>\n}\n")
    m = parse_module(src)
    assert tree_reduce(m) == 0


def test_the_inner_stage_is_a_splittable_region() -> None:
    """The point of the tree: the inner stage, fused with its producer, keeps the chunk axis, so
    the thread split (region_is_splittable) takes it; the outer stage is a region of its own."""
    from fusebind.compiler.context import OptimizationContext
    from fusebind.compiler.optimize import optimize_graph

    out = optimize_graph(parse_module(SQ_SUM), OptimizationContext.gate_all()).module
    regions = [op for op in out.walk() if op.name == "fused.region"]
    inner = [r for r in regions if str(r.operands[0].type) == "tensor<292x1024xf32>"]
    assert len(inner) == 1 and region_is_splittable(inner[0]), str(out)
    assert len(regions) == 2 and not region_is_splittable(next(r for r in regions if r is not inner[0]))
