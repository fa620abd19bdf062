"""prim.slice lowered as an index map (issue 13): in a fused region it costs no loop nest and no
buffer of its own, and the kernels compute numpy's values for forward, strided, reversed and mixed
slices, also of a strided (non-contiguous) input and of a value computed in the kernel, and slices
that are results or feed a reshape or a transpose (copied by a loop: a strided `memref.copy` would
need a runtime library the kernels do not link)."""

from __future__ import annotations

import numpy as np
import fusebind as fb
from fusebind.compiler.synthesized_rules import is_fusable_elementwise
from fusebind.dialect import parse_module
from fusebind.dialect.prim import SliceOp
from fusebind.lowering import emit_linalg
from fusebind.lowering.pipeline import UPSTREAM_PIPELINE, pipeline_text, run_upstream_pipeline

from lowering_helpers import compile_func, reference


def _bufferized(region) -> str:
    """The region's kernel after fusion and bufferization (before loops): what it allocates and loops over."""
    names = [p for p, _ in UPSTREAM_PIPELINE]
    upto = names.index("buffer-deallocation-pipeline") + 1
    return str(run_upstream_pipeline(emit_linalg(region).text, pipeline=pipeline_text(UPSTREAM_PIPELINE[:upto])))


def test_a_rope_region_is_one_loop_nest_with_no_intermediate() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    c, s = (rng.standard_normal(8).astype(np.float32) for _ in range(2))

    def rope(x, c, s):  # rotate_half with a reversed half too: both slice forms in one region
        return x[..., :8] * c - x[..., :7:-1] * s

    f = fb.jit(rope)
    np.testing.assert_allclose(f(x, c, s), x[..., :8] * c - x[..., :7:-1] * s, rtol=1e-6, atol=1e-6)
    module = parse_module(f.optimized(x, c, s))
    (region,) = [op for op in module.walk() if op.name == "fused.region"]
    assert sum(isinstance(op, SliceOp) for op in region.walk()) == 2 and all(
        is_fusable_elementwise(op) for op in region.body.blocks[0].ops if op.name.startswith("prim."))
    ir = _bufferized(region)
    assert ir.count("linalg.generic") == 1, ir  # the slices are folded into the one consumer loop nest
    assert "memref.alloc" not in ir and ir.count("memref.subview") == 2, ir  # they read the input in place


TEXT = """func.func @k(%a: tensor<6x8xf32>) -> (tensor<3x8xf32>, tensor<6x3xf32>, tensor<2x4xf32>, tensor<0x8xf32>,
                                       tensor<24xf32>, tensor<7x3xf32>) {
  %0 = prim.slice %a {starts = [1, 0], limits = [6, 8], strides = [2, 1]} : tensor<6x8xf32> -> tensor<3x8xf32>
  %1 = prim.slice %a {starts = [5, 7], limits = [-1, -1], strides = [-1, -3]} : tensor<6x8xf32> -> tensor<6x3xf32>
  %e = prim.exp %a : tensor<6x8xf32> -> tensor<6x8xf32>
  %2 = prim.slice %e {starts = [4, 1], limits = [0, 8], strides = [-3, 2]} : tensor<6x8xf32> -> tensor<2x4xf32>
  %3 = prim.slice %a {starts = [-1, 0], limits = [-1, 8], strides = [-1, 1]} : tensor<6x8xf32> -> tensor<0x8xf32>
  %s = prim.slice %a {starts = [0, 0], limits = [6, 4], strides = [1, 1]} : tensor<6x8xf32> -> tensor<6x4xf32>
  %4 = prim.reshape %s : tensor<6x4xf32> -> tensor<24xf32>
  %u = prim.slice %a {starts = [0, 1], limits = [6, 8], strides = [2, 1]} : tensor<6x8xf32> -> tensor<3x7xf32>
  %5 = prim.transpose %u {perm = [1, 0]} : tensor<3x7xf32> -> tensor<7x3xf32>
  func.return %0, %1, %2, %3, %4, %5 : tensor<3x8xf32>, tensor<6x3xf32>, tensor<2x4xf32>, tensor<0x8xf32>,
                                       tensor<24xf32>, tensor<7x3xf32>
}"""


def test_slice_kernels_match_numpy(object_cache) -> None:
    big = np.random.default_rng(4).standard_normal((12, 8)).astype(np.float32)
    x = np.ascontiguousarray(big[::2])
    want = (x[1::2], x[::-1, ::-3], np.exp(x)[4::-3, 1::2], x[:0], x[:, :4].reshape(-1), x[::2, 1:].T)
    for strided, arg in ((False, x), (True, big[::2])):
        got = compile_func(TEXT, object_cache, strided=strided, name="slices")(arg)
        ref = reference(parse_module(TEXT), x)
        assert len(got) == len(ref) == len(want)
        for g, r, w in zip(got, ref, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=2e-6)
            np.testing.assert_allclose(r, w, rtol=2e-6)
