"""prim.concat lowered as an index map (issue 13): each piece is a generic input read through a
`(d - offset) mod size` map, so in a fused region the concat, the producers of its pieces and its
consumer are one loop nest with no buffer, slice pieces stay views of the argument, and the
kernels compute numpy's values for every axis, unequal, zero-length and single pieces, bool and
integer elements, strided inputs, computed pieces, and concats that are results or feed a
reshape or a transpose."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.lowering import emit_concat, emit_linalg, pipeline
from fusebind.lowering.codegen import optimized_ir
from fusebind.lowering.pipeline import UPSTREAM_PIPELINE, pipeline_text, run_upstream_pipeline, translate_to_llvm_ir

from lowering_helpers import compile_func, reference


def _region(text: str):
    (region,) = [op for op in parse_module(text).walk() if op.name == "fused.region"]
    return region


def _fused(text: str) -> str:
    """The region's kernel after elementwise fusion only."""
    return str(run_upstream_pipeline(emit_linalg(_region(text)).text, pipeline=pipeline_text(UPSTREAM_PIPELINE[:1])))


def _lowered(text: str) -> str:
    """The region's kernel through the whole (staged) pipeline, in the LLVM dialect."""
    return str(run_upstream_pipeline(emit_linalg(_region(text)).text))


def _bufferized(text: str) -> str:
    """The region's kernel after fusion and bufferization (before loops), by the explicit pipeline."""
    names = [p for p, _ in UPSTREAM_PIPELINE]
    upto = names.index("buffer-deallocation-pipeline") + 1
    return str(run_upstream_pipeline(emit_linalg(_region(text)).text,
                                     pipeline=pipeline_text(UPSTREAM_PIPELINE[:upto])))


SPLIT = callable(getattr(pipeline, "write_reshapes_in_place", None))


def _llvm(text: str) -> str:
    emitted = emit_linalg(_region(text))
    return optimized_ir(translate_to_llvm_ir(run_upstream_pipeline(emitted.text)), emitted.entry)


def _rope_text(rows: int, width: int) -> str:
    h = width // 2
    return f"""func.func @main(%a: tensor<{rows}x{width}xf32>, %c: tensor<{width}xf32>, %s: tensor<{width}xf32>) -> tensor<{rows}x{width}xf32> {{
  %r = fused.region @rope (%a, %c, %s) : (tensor<{rows}x{width}xf32>, tensor<{width}xf32>, tensor<{width}xf32>) -> tensor<{rows}x{width}xf32> {{
  ^bb0(%x: tensor<{rows}x{width}xf32>, %cc: tensor<{width}xf32>, %ss: tensor<{width}xf32>):
    %lo = prim.slice %x {{starts = [0, 0], limits = [{rows}, {h}], strides = [1, 1]}} : tensor<{rows}x{width}xf32> -> tensor<{rows}x{h}xf32>
    %hi = prim.slice %x {{starts = [0, {h}], limits = [{rows}, {width}], strides = [1, 1]}} : tensor<{rows}x{width}xf32> -> tensor<{rows}x{h}xf32>
    %n = prim.neg %hi : tensor<{rows}x{h}xf32> -> tensor<{rows}x{h}xf32>
    %rot = prim.concat %n, %lo {{axis = 1}} : (tensor<{rows}x{h}xf32>, tensor<{rows}x{h}xf32>) -> tensor<{rows}x{width}xf32>
    %m1 = prim.mul %x, %cc : (tensor<{rows}x{width}xf32>, tensor<{width}xf32>) -> tensor<{rows}x{width}xf32>
    %m2 = prim.mul %rot, %ss : (tensor<{rows}x{width}xf32>, tensor<{width}xf32>) -> tensor<{rows}x{width}xf32>
    %y = prim.add %m1, %m2 : (tensor<{rows}x{width}xf32>, tensor<{rows}x{width}xf32>) -> tensor<{rows}x{width}xf32>
    fused.yield %y : tensor<{rows}x{width}xf32>
  }}
  func.return %r : tensor<{rows}x{width}xf32>
}}"""


ROPE = _rope_text(4, 16)


def test_rope_is_one_loop_nest_with_no_buffer_and_slices_stay_views() -> None:
    assert _fused(ROPE).count("linalg.generic") == 1  # neg, concat, muls and add: one loop nest
    ir = _lowered(ROPE)
    for buffer in ("malloc", "alloca", "memcpy"):  # no temporary: computed straight into the output
        assert buffer not in ir, (buffer, ir)
    assert "@malloc" not in _llvm(ROPE)


def test_rope_wrapped_map_form_reads_the_halves_in_place(monkeypatch) -> None:
    monkeypatch.setattr(emit_concat, "MIN_BLOCK", 1 << 30)  # no block is long enough: the wrapped-map form
    ir = _bufferized(ROPE)
    assert ir.count("linalg.generic") == 1 and "d1 mod 8" in ir, ir  # the pieces read through the wrapped map
    assert "memref.alloc" not in ir and "memref.copy" not in ir, ir  # written into the output
    assert ir.count("memref.subview") == 2, ir  # the halves are views of the argument


@pytest.mark.skipif(not SPLIT, reason="the split form needs pipeline.write_reshapes_in_place (not built yet)")
def test_an_innermost_concat_of_equal_pieces_vectorizes() -> None:
    ir = _llvm(_rope_text(8, 128))
    assert "x float>" in ir and "@malloc" not in ir, ir


AXIS0 = """func.func @main(%a: tensor<8x128xf32>, %b: tensor<4x128xf32>) -> tensor<12x128xf32> {
  %r = fused.region @cat (%a, %b) : (tensor<8x128xf32>, tensor<4x128xf32>) -> tensor<12x128xf32> {
  ^bb0(%x: tensor<8x128xf32>, %y: tensor<4x128xf32>):
    %e = prim.exp %y : tensor<4x128xf32> -> tensor<4x128xf32>
    %cat = prim.concat %x, %e {axis = 0} : (tensor<8x128xf32>, tensor<4x128xf32>) -> tensor<12x128xf32>
    fused.yield %cat : tensor<12x128xf32>
  }
  func.return %r : tensor<12x128xf32>
}"""


def test_a_concat_along_an_outer_dim_vectorizes() -> None:
    """Along an outer dim the inner loop reads each piece contiguously: LLVM vectorizes it. (Along
    the innermost dim the wrapped index is not consecutive for the loop vectorizer: scalar.)"""
    ir = _llvm(AXIS0)
    assert "x float>" in ir and "@malloc" not in ir, ir


TEXT = """func.func @k(%a: tensor<3x4xf32>, %b: tensor<3x2xf32>, %z: tensor<3x0xf32>, %i: tensor<2x4xi64>,
                 %m: tensor<3x4xi1>) -> (tensor<3x10xf32>, tensor<6x4xf32>, tensor<3x4xf32>, tensor<3x0xf32>,
                                         tensor<5x4xi64>, tensor<3x8xi1>, tensor<30xf32>, tensor<10x3xf32>,
                                         tensor<3x6xf32>) {
  %0 = prim.concat %a, %b, %z, %a {axis = 1} : (tensor<3x4xf32>, tensor<3x2xf32>, tensor<3x0xf32>, tensor<3x4xf32>) -> tensor<3x10xf32>
  %e = prim.exp %a : tensor<3x4xf32> -> tensor<3x4xf32>
  %1 = prim.concat %e, %a {axis = 0} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
  %2 = prim.concat %a {axis = 1} : tensor<3x4xf32> -> tensor<3x4xf32>
  %3 = prim.concat %z, %z {axis = 1} : (tensor<3x0xf32>, tensor<3x0xf32>) -> tensor<3x0xf32>
  %4 = prim.concat %i, %i, %i {axis = 0} : (tensor<2x4xi64>, tensor<2x4xi64>, tensor<2x4xi64>) -> tensor<6x4xi64>
  %s = prim.slice %4 {starts = [5, 0], limits = [0, 4], strides = [-1, 1]} : tensor<6x4xi64> -> tensor<5x4xi64>
  %5 = prim.concat %m, %m {axis = 1} : (tensor<3x4xi1>, tensor<3x4xi1>) -> tensor<3x8xi1>
  %6 = prim.reshape %0 : tensor<3x10xf32> -> tensor<30xf32>
  %7 = prim.transpose %0 {perm = [1, 0]} : tensor<3x10xf32> -> tensor<10x3xf32>
  %r = prim.slice %a {starts = [0, 3], limits = [3, -1], strides = [1, -2]} : tensor<3x4xf32> -> tensor<3x2xf32>
  %8 = prim.concat %r, %b, %r {axis = 1} : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x6xf32>
  func.return %0, %1, %2, %3, %s, %5, %6, %7, %8 : tensor<3x10xf32>, tensor<6x4xf32>, tensor<3x4xf32>, tensor<3x0xf32>,
                                                 tensor<5x4xi64>, tensor<3x8xi1>, tensor<30xf32>, tensor<10x3xf32>,
                                                 tensor<3x6xf32>
}"""


SPLIT_TEXT = """func.func @k(%a: tensor<3x16xf32>, %b: tensor<3x8xf32>, %m: tensor<2x8xi1>) -> (tensor<3x40xf32>,
                                                                               tensor<2x16xi1>, tensor<3x24xf32>) {
  %n = prim.neg %b : tensor<3x8xf32> -> tensor<3x8xf32>
  %0 = prim.concat %a, %n, %a {axis = 1} : (tensor<3x16xf32>, tensor<3x8xf32>, tensor<3x16xf32>) -> tensor<3x40xf32>
  %1 = prim.concat %m, %m {axis = 1} : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x16xi1>
  %c = prim.concat %b, %a {axis = 1} : (tensor<3x8xf32>, tensor<3x16xf32>) -> tensor<3x24xf32>
  %2 = prim.mul %c, %c : (tensor<3x24xf32>, tensor<3x24xf32>) -> tensor<3x24xf32>
  func.return %0, %1, %2 : tensor<3x40xf32>, tensor<2x16xi1>, tensor<3x24xf32>
}"""


def test_split_form_kernels_match_numpy(object_cache) -> None:
    """The `(..., N / 8, 8)` form (unequal pieces of whole blocks, i1)."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((3, 16)).astype(np.float32), rng.standard_normal((3, 8)).astype(np.float32)
    m = rng.random((2, 8)) > 0.5
    f = compile_func(SPLIT_TEXT, object_cache, name="split_concats")
    assert f.emitted.text.count("tensor.collapse_shape") == 3 and "mod 2) * 8 + d2" in f.emitted.text
    c = np.concatenate([b, a], axis=1)
    want = (np.concatenate([a, -b, a], axis=1), np.concatenate([m, m], axis=1), c * c)
    for g, w in zip(f(a, b, m), want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_concat_kernels_match_numpy(object_cache) -> None:
    rng = np.random.default_rng(7)
    big = rng.standard_normal((6, 8)).astype(np.float32)
    a, b = np.ascontiguousarray(big[::2, ::2]), rng.standard_normal((3, 2)).astype(np.float32)
    z, i, m = np.zeros((3, 0), np.float32), rng.integers(-9, 9, (2, 4)), rng.random((3, 4)) > 0.5
    c0 = np.concatenate([a, b, z, a], axis=1)
    r = a[:, 3::-2]
    want = (c0, np.concatenate([np.exp(a), a]), a, np.zeros((3, 0), np.float32), np.concatenate([i, i, i])[5:0:-1],
            np.concatenate([m, m], axis=1), c0.reshape(-1), c0.T, np.concatenate([r, b, r], axis=1))
    ref = reference(parse_module(TEXT), a, b, z, i, m)
    for strided, args in ((False, (a, b, z, i, m)), (True, (big[::2, ::2], b, z, i, m))):
        got = compile_func(TEXT, object_cache, strided=strided, name="concats")(*args)
        assert len(got) == len(ref) == len(want)
        for k, (g, rr, w) in enumerate(zip(got, ref, want)):
            assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, g.dtype, w.shape, w.dtype)
            np.testing.assert_allclose(g, w, rtol=2e-6, err_msg=f"result {k}")
            np.testing.assert_array_equal(rr, w, err_msg=f"reference {k}")
