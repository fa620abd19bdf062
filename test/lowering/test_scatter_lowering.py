"""prim.scatter lowered as a loop over the updates (issue 13): the result starts as a copy of x (or
x's own buffer when the region computed it and nothing else reads it), an `scf.for` nest carries it
in `iter_args` and each iteration extracts, combines and inserts; after bufferization the updates
are in place in the kernel's output (no temporary), a scalar update reads its constant (its
broadcast is never written), and a chain of scatters updates one buffer."""

from __future__ import annotations

from fusebind.dialect import parse_module
from fusebind.lowering import emit_linalg
from fusebind.lowering.codegen import optimized_ir
from fusebind.lowering.pipeline import UPSTREAM_PIPELINE, pipeline_text, run_upstream_pipeline, translate_to_llvm_ir


def _region(text: str):
    (region,) = [op for op in parse_module(text).walk() if op.name == "fused.region"]
    return region


def _bufferized(text: str) -> str:
    """The region's kernel after fusion and bufferization (before loops)."""
    names = [p for p, _ in UPSTREAM_PIPELINE]
    upto = names.index("buffer-deallocation-pipeline") + 1
    return str(run_upstream_pipeline(emit_linalg(_region(text)).text,
                                     pipeline=pipeline_text(UPSTREAM_PIPELINE[:upto])))


HISTOGRAM = """func.func @main(%x: tensor<256xi64>, %i: tensor<100000xi32>) -> tensor<256xi64> {
  %r = fused.region @hist (%x, %i) : (tensor<256xi64>, tensor<100000xi32>) -> tensor<256xi64> {
  ^bb0(%xx: tensor<256xi64>, %ii: tensor<100000xi32>):
    %c = prim.constant dense<1> : tensor<i64>
    %b = prim.broadcast_to %c : tensor<i64> -> tensor<100000xi64>
    %y = prim.scatter %xx, %ii, %b {mode = "add", axis = 0, in_bounds} : (tensor<256xi64>, tensor<100000xi32>, tensor<100000xi64>) -> tensor<256xi64>
    fused.yield %y : tensor<256xi64>
  }
  func.return %r : tensor<256xi64>
}"""


def test_emitted_form_copy_then_a_loop_carrying_the_tensor() -> None:
    text = emit_linalg(_region(HISTOGRAM)).text
    assert "scf.for" in text and "iter_args" in text and "tensor.insert" in text, text
    assert "%status" not in text, text  # in_bounds: normalized and clamped, no error channel
    assert "arith.extsi" in text, text  # i32 indices widened to i64
    assert "tensor.extract %t0" in text, text  # x (an input, read-only) is copied into the result


def test_bufferized_in_place_with_no_temporary_and_the_broadcast_gone() -> None:
    ir = _bufferized(HISTOGRAM)
    assert "memref.alloc" not in ir and "memref.copy" not in ir, ir  # copy and updates in the output buffer
    assert "100000xi64" not in ir, ir  # the broadcast of the scalar update is never written
    emitted = emit_linalg(_region(HISTOGRAM))
    assert "@malloc" not in optimized_ir(translate_to_llvm_ir(run_upstream_pipeline(emitted.text)), emitted.entry)


CHAIN = """func.func @main(%x: tensor<6x4xf32>, %i: tensor<5x4xi64>, %v: tensor<5x4xf32>) -> tensor<6x4xf32> {
  %r = fused.region @chain (%x, %i, %v) : (tensor<6x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<6x4xf32> {
  ^bb0(%xx: tensor<6x4xf32>, %ii: tensor<5x4xi64>, %vv: tensor<5x4xf32>):
    %n = prim.neg %xx : tensor<6x4xf32> -> tensor<6x4xf32>
    %a = prim.scatter %n, %ii, %vv {mode = "add", axis = 0, in_bounds} : (tensor<6x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<6x4xf32>
    %b = prim.scatter %a, %ii, %vv {mode = "max", axis = 0, in_bounds} : (tensor<6x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<6x4xf32>
    fused.yield %b : tensor<6x4xf32>
  }
  func.return %r : tensor<6x4xf32>
}"""


def test_a_computed_x_and_a_chain_update_one_buffer() -> None:
    text = emit_linalg(_region(CHAIN)).text
    assert "tensor.extract %t0" not in text, text  # neg's fresh result is updated in place: no copy of it
    assert text.count("scf.for") == 4, text  # two 2-d nests
    ir = _bufferized(CHAIN)
    assert "memref.alloc" not in ir and "memref.copy" not in ir, ir
