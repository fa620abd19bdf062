"""decompose_region (arm 1: cost + object code), inline_region (arm 0), and
the one error type of the pipeline."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from fusebind.dialect import interpret, parse_module, print_module
from fusebind.lowering import Decomposition, LoweringError, ObjectCache, decompose_region, inline_region
from fusebind.lowering.pipeline import run_upstream_pipeline
from fusebind.runtime.kernel import Kernel

from lowering_helpers import REGION_MODULE, _region

def _args(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(64).astype(np.float32) for _ in range(3)]


def test_decompose_region_gives_cost_code_symbol_signature(object_cache: ObjectCache) -> None:
    from fusebind.compiler.cost import CostEstimate
    from fusebind.runtime.dtypes import DType, KernelSignature, descriptor_for

    module = parse_module(REGION_MODULE)
    d = decompose_region(_region(module), ["f32"] * 4, cache=object_cache)
    assert isinstance(d, Decomposition)
    assert isinstance(d.cost, CostEstimate) and d.cost.trust == "composed"
    assert d.cost.bytes == 4 * 64 * 4 and d.cost.flops > 0 and d.cost.ns > 0
    assert d.symbol == "_mlir_ciface_fb_mul_add_relu"
    assert d.signature == KernelSignature(((DType.F32, 1),) * 3, ((DType.F32, 1),))
    assert d.object_code[:4] == b"\x7fELF"
    kernel = Kernel.from_decomposition(d)
    a, b, c = _args()
    out = np.empty(64, np.float32)
    kernel(descriptor_for(a), descriptor_for(b), descriptor_for(c), descriptor_for(out))
    np.testing.assert_array_equal(out, interpret(module, a, b, c))


def test_decompose_rejects_wrong_dtypes(object_cache: ObjectCache) -> None:
    module = parse_module(REGION_MODULE)
    with pytest.raises(LoweringError) as info:
        decompose_region(_region(module), ["f64"] * 4, cache=object_cache)
    assert info.value.stage == "emit" and "do not match" in info.value.message


def test_elementwise_chain_allocates_nothing() -> None:
    """Destination passing: the fused chain writes the caller's out memref; no malloc in the LLVM IR."""
    from fusebind.lowering.emit import emit_linalg
    from fusebind.lowering.pipeline import translate_to_llvm_ir

    emitted = emit_linalg(_region(parse_module(REGION_MODULE)), "k")
    llvm_ir = translate_to_llvm_ir(run_upstream_pipeline(emitted.text))
    assert "@malloc" not in llvm_ir
    assert llvm_ir.count("define ") == 2  # the function and its _mlir_ciface_ wrapper; one stays external


def test_inline_region_replaces_region_by_body() -> None:
    module = parse_module(REGION_MODULE)
    result = inline_region(_region(module))
    assert result.inlined and result.diagnostic is None
    text = print_module(module)
    assert "fused.region" not in text and "prim.relu" in text
    a, b, c = _args(1)
    np.testing.assert_array_equal(interpret(module, a, b, c), np.where(a * b + c < 0, 0, a * b + c))


def test_inline_region_is_total() -> None:
    module = parse_module(REGION_MODULE)
    region = _region(module)
    region.detach()  # type: ignore[attr-defined]
    result = inline_region(region)
    assert not result.inlined and "detached" in (result.diagnostic or "")
    result = inline_region(next(iter(module.ops)))  # type: ignore[arg-type]
    assert not result.inlined and "expected a fused.region" in (result.diagnostic or "")
    assert not inline_region(None).inlined


def test_mlir_parse_error_is_a_lowering_error_with_reproducer() -> None:
    with pytest.raises(LoweringError) as info:
        run_upstream_pipeline("func.func @f() { %x = arith.bogus : i32 }")
    err = info.value
    assert err.stage == "mlir-parse" and "bogus" in err.message and err.ir.startswith("func.func")
    assert "fusebind.lowering.repro" in err.reproducer
    path = err.reproducer.split("--stage mlir-parse ")[1].split()[0]
    assert open(path).read() == err.ir


def test_mlir_pass_failure_carries_diagnostics_and_replays() -> None:
    text = "func.func @f(%a: i32) -> i32 {\n  %x = \"test.unknown\"(%a) : (i32) -> i32\n  return %x : i32\n}"
    with pytest.raises(LoweringError) as info:
        run_upstream_pipeline(text, pipeline="builtin.module(convert-func-to-llvm,reconcile-unrealized-casts)")
    err = info.value
    assert err.stage in ("mlir-parse", "mlir-passes")
    proc = subprocess.run([sys.executable, "-m", *err.reproducer.split(" -m ")[1].replace("'", "").split()],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and err.stage in proc.stderr


def test_llvm_parse_error_stage() -> None:
    from fusebind.lowering.codegen import compile_llvm_ir

    with pytest.raises(LoweringError) as info:
        compile_llvm_ir("define void @f( {", "f")
    assert info.value.stage == "llvm-parse"


def test_missing_entry_is_reported() -> None:
    from fusebind.lowering.codegen import compile_llvm_ir

    with pytest.raises(LoweringError) as info:
        compile_llvm_ir("define void @g() {\n  ret void\n}\n", "f")
    assert info.value.stage == "llvm-opt" and "'f' is not defined" in info.value.message


def test_unsupported_op_is_an_emit_error() -> None:
    from fusebind.lowering.emit import emit_linalg

    text = """func.func @f(%a: tensor<?x4xf32>) -> tensor<?xf32> {
  %s = prim.reshape %a : tensor<?x4xf32> -> tensor<?xf32>
  func.return %s : tensor<?xf32>
}"""
    with pytest.raises(LoweringError) as info:
        emit_linalg(next(iter(parse_module(text).ops)))
    assert info.value.stage == "emit" and "reshape needs static shapes" in info.value.message
    assert "prim.reshape" in info.value.ir


def test_translating_a_half_lowered_module_names_what_is_left_and_replays() -> None:
    from fusebind.lowering.emit import emit_linalg
    from fusebind.lowering.pipeline import translate_to_llvm_ir

    emitted = emit_linalg(_region(parse_module(REGION_MODULE)), "k")
    module = run_upstream_pipeline(emitted.text,
                                   pipeline="builtin.module(convert-func-to-llvm,reconcile-unrealized-casts)")
    with pytest.raises(LoweringError) as info:
        translate_to_llvm_ir(module)
    err = info.value
    assert err.stage == "translate" and "not fully in the LLVM dialect" in err.message
    assert "linalg.generic" in err.message and "builtin.module" not in err.message.split("remain")[0]
    assert "linalg.generic" in err.ir
    # The reproducer replays the same refusal (in a subprocess: a regression would crash it, not us).
    proc = subprocess.run([sys.executable, "-m", *err.reproducer.split(" -m ")[1].split()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "translate: the module is not fully in the LLVM dialect" in proc.stderr


def _exp_func(ty: str, out: str | None = None) -> str:
    """func of one prim.exp over `ty` (then a sum into `out` when given)."""
    body = f"  %e = prim.exp %a : {ty} -> {ty}\n"
    ret, rty = "%e", ty
    if out is not None:
        body += f"  %s = prim.reduce_sum %e {{axes = array<i64: 0>}} : {ty} -> {out}\n"
        ret, rty = "%s", out
    return f"func.func @f(%a: {ty}) -> {rty} {{\n{body}  func.return {ret} : {rty}\n}}"


@pytest.mark.parametrize("ty, count", [
    ("tensor<" + "2x" * 64 + "f32>", 2**64),                 # the element count overflows int64
    ("tensor<" + "2x" * 62 + "f32>", 2**62),                 # fits int64, but not in bytes
    ("tensor<1073741824x1073741824x8xi8>", 2**63),           # 1-byte elements: the count itself
])
def test_a_static_shape_beyond_the_byte_cap_is_an_emit_error(ty: str, count: int) -> None:
    from fusebind.lowering.emit import MAX_TENSOR_BYTES, emit_linalg

    if "i8" in ty:
        text = f"func.func @f(%a: {ty}) -> {ty} {{\n  func.return %a : {ty}\n}}"
    else:
        text = _exp_func(ty)
    with pytest.raises(LoweringError) as info:
        emit_linalg(next(iter(parse_module(text).ops)))
    err = info.value
    assert err.stage == "emit" and MAX_TENSOR_BYTES == 2**62
    assert err.message.startswith(f"{ty} has {count} elements, more than the ")
    assert "(2^62) cap on a static tensor" in err.message and ty in err.ir


def test_an_overflowing_stride_is_refused_even_when_a_zero_dim_empties_the_tensor() -> None:
    from fusebind.lowering.emit import emit_linalg

    ty = "tensor<0x" + "2x" * 63 + "f32>"
    with pytest.raises(LoweringError) as info:
        emit_linalg(next(iter(parse_module(_exp_func(ty)).ops)))
    assert info.value.stage == "emit" and info.value.message.startswith(f"{ty} has a stride of {2**61} elements")


def test_an_overflowing_intermediate_is_refused() -> None:
    from fusebind.lowering.emit import emit_linalg

    big, small = "tensor<4611686018427387904x4xf32>", "tensor<4xf32>"
    text = (f"func.func @f(%a: {small}) -> {small} {{\n"
            f"  %b = prim.broadcast_to %a : {small} -> {big}\n"
            f"  %s = prim.reduce_sum %b {{axes = array<i64: 0>}} : {big} -> {small}\n"
            f"  func.return %s : {small}\n}}")
    with pytest.raises(LoweringError) as info:
        emit_linalg(next(iter(parse_module(text).ops)))
    assert info.value.stage == "emit" and info.value.message.startswith(f"{big} has {2**64} elements")


def test_shapes_at_the_cap_still_emit() -> None:
    from fusebind.lowering.emit import emit_linalg

    ty = "tensor<" + "2x" * 60 + "f32>"  # 2^60 elements x 4 bytes = exactly 2^62
    emitted = emit_linalg(next(iter(parse_module(_exp_func(ty)).ops)))
    assert emitted.inputs[0].shape == (2,) * 60
