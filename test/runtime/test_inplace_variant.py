"""The in-place kernel variant (runtime/builder_inplace.py, `emit_linalg(inplace=)`):
the kernel a region marked `fused.inplace` runs as when its result is written
over its matmul operand, reading and writing one memref so LLVM's loop
vectorizer needs no runtime overlap check (which the exact alias fails)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect import interpret, parse_module
from fusebind.lowering import ObjectCache, emit_linalg
from fusebind.lowering.cache import recording_default
from fusebind.lowering.errors import LoweringError

pytestmark = pytest.mark.usefixtures("isolated_bindings")

M, K, N = 48, 32, 40
MN, MK, KN, VN = f"tensor<{M}x{N}xf32>", f"tensor<{M}x{K}xf32>", f"tensor<{K}x{N}xf32>", f"tensor<{N}xf32>"

BIAS_RELU = f"""
func.func @f(%a: {MK}, %b: {KN}, %bias: {VN}) -> {MN} {{
  %m = prim.matmul %a, %b : ({MK}, {KN}) -> {MN}
  %s = prim.add %m, %bias : ({MN}, {VN}) -> {MN}
  %r = prim.relu %s : {MN} -> {MN}
  func.return %r : {MN}
}}
"""

# a one-operand epilogue: its in-place variant touches one pointer only
ONE_OPERAND = """
func.func @k(%y: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %r = prim.relu %y : tensor<64x256xf32> -> tensor<64x256xf32>
  func.return %r : tensor<64x256xf32>
}
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> ObjectCache:
    return ObjectCache(tmp_path_factory.mktemp("inplace-variant-cache"))


def _optimized_ir(inplace: tuple[int, int] | None) -> str:
    from fusebind.lowering.codegen import optimized_ir
    from fusebind.lowering.pipeline import lower_to_llvm_ir

    emitted = emit_linalg(next(iter(parse_module(ONE_OPERAND).ops)), "k", inplace=inplace)
    return optimized_ir(lower_to_llvm_ir(emitted.text), emitted.entry)


def test_variant_reads_its_operand_from_the_output_memref() -> None:
    func = next(iter(parse_module(ONE_OPERAND).ops))
    plain = emit_linalg(func, "k").text
    variant = emit_linalg(func, "k", inplace=(0, 0)).text
    assert "bufferization.to_tensor %in0 restrict" in plain
    assert "to_tensor %in0" not in variant and "bufferization.to_tensor %out0 restrict writable" in variant
    # the same C ABI: operand 0's descriptor is still a parameter
    assert "func.func @k(%in0: memref<64x256xf32>, %out0: memref<64x256xf32>)" in variant


def test_variant_is_vectorized_with_no_runtime_overlap_check() -> None:
    # out of place, LLVM vectorizes behind an overlap check, which the exact alias (one array
    # as input and output) fails: the scalar loop runs. The variant has one pointer: no check.
    plain, variant = _optimized_ir(None), _optimized_ir((0, 0))
    checks = ("diff.check", "vector.memcheck", "found.conflict")  # LoopVectorize's names for the check
    assert any(c in plain for c in checks) and "scalar.ph" in plain  # the control: the check exists
    assert not any(c in variant for c in checks) and "scalar.ph" not in variant
    assert "x float>" in variant and "store <" in variant  # a vector loop, not scalar code


def test_variant_with_mismatched_types_is_refused() -> None:
    text = """
func.func @k(%y: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = prim.add %y, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
"""
    with pytest.raises(LoweringError, match=r"in-place variant \(1, 0\): input 1 and result 0 must exist"):
        emit_linalg(next(iter(parse_module(text).ops)), "k", inplace=(1, 0))


def test_region_runs_as_its_variant_and_matches_the_out_of_place_kernel_bitwise(cache) -> None:
    f = fb.compile(BIAS_RELU, cache=cache, threads=1)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) for s in ((M, K), (K, N), (N,))]
    assert "in place: result 0 written into operand 0's buffer (its in-place kernel variant)" in f.explain(*args)
    # verify mode runs the same fused arm out of place (into its own buffer)
    g = fb.compile(BIAS_RELU, cache=cache, threads=1, verify=True)
    for seed in (1, 2):
        args = [np.random.default_rng(seed).standard_normal(s, dtype=np.float32) for s in ((M, K), (K, N), (N,))]
        got = f(*args)
        np.testing.assert_array_equal(got, g(*args))
        np.testing.assert_allclose(got, interpret(parse_module(BIAS_RELU), *args), rtol=2e-5, atol=2e-5)


def test_variant_has_its_own_object_cache_entry(tmp_path) -> None:
    from fusebind.lowering import decompose_region
    from fusebind.runtime.builder_inplace import _build

    text = f"""
func.func @f(%m: {MN}, %bias: {VN}) -> {MN} {{
  %r = fused.region @bias_relu id 4 (%m, %bias) : ({MN}, {VN}) -> {MN} {{
  ^bb0(%x: {MN}, %y: {VN}):
    %s = prim.add %x, %y : ({MN}, {VN}) -> {MN}
    %t = prim.relu %s : {MN} -> {MN}
    fused.yield %t : {MN}
  }}
  func.return %r : {MN}
}}
"""
    region = next(op for op in parse_module(text).walk() if op.name == "fused.region")
    own = ObjectCache(tmp_path)
    decompose_region(region, cache=own)
    assert len(list(tmp_path.glob("*.o"))) == 1
    with recording_default(own):
        kernel = _build(region, 0, 0, "bias_relu-recipe", "cpu", [])
    entries = list(tmp_path.glob("*.o"))
    assert len(entries) == 2  # a key of its own, never the out-of-place kernel's
    y = np.random.default_rng(3).standard_normal((M, N), dtype=np.float32)
    bias = np.random.default_rng(4).standard_normal(N, dtype=np.float32)
    want = np.maximum(y + bias, 0)
    from fusebind.runtime.dtypes import descriptor_for
    import ctypes

    descs = [descriptor_for(a) for a in (np.full((M, N), np.nan, np.float32), bias, y)]  # operand 0: never read
    kernel.function(*[ctypes.byref(d) for d in descs])
    np.testing.assert_array_equal(y, want)


# gelu_tanh(y + bias): `x` is read by four ops, so per-op generics materialize it whole
GELU = """
func.func @k(%y: tensor<64x256xf32>, %bias: tensor<256xf32>) -> tensor<64x256xf32> {
  %x = prim.add %y, %bias : (tensor<64x256xf32>, tensor<256xf32>) -> tensor<64x256xf32>
  %c1 = prim.constant dense<0.7978845608028654> : tensor<f32>
  %c2 = prim.constant dense<0.044715> : tensor<f32>
  %half = prim.constant dense<0.5> : tensor<f32>
  %one = prim.constant dense<1.0> : tensor<f32>
  %x2 = prim.mul %x, %x : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %x3 = prim.mul %x2, %x : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %t1 = prim.mul %c2, %x3 : (tensor<f32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %in = prim.add %x, %t1 : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %sc = prim.mul %c1, %in : (tensor<f32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %th = prim.tanh %sc : tensor<64x256xf32> -> tensor<64x256xf32>
  %hx = prim.mul %half, %x : (tensor<f32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %op = prim.add %one, %th : (tensor<f32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %r = prim.mul %hx, %op : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  func.return %r : tensor<64x256xf32>
}
"""


def test_variant_of_a_value_read_many_times_is_one_loop_with_no_temporary_and_same_bits() -> None:
    import ctypes
    import re

    from fusebind.lowering import build_object, kernel_signature
    from fusebind.lowering.build import default_fastmath
    from fusebind.lowering.pipeline import lower_to_llvm_ir
    from fusebind.runtime.dtypes import descriptor_for
    from fusebind.runtime.kernel import Kernel

    fm = default_fastmath()
    func = next(iter(parse_module(GELU).ops))
    plain, variant = (emit_linalg(func, "k", fastmath=fm[0], fastmath_defs=fm[1], inplace=ip) for ip in (None, (0, 0)))
    assert variant.text.count("linalg.generic") == 1
    temporary = re.compile(r"@malloc|alloca float, i64 16384")  # `x`: 64x256 floats (small: on the stack)
    assert temporary.search(lower_to_llvm_ir(plain.text))  # the control: out of place, `x` is materialized
    assert not temporary.search(lower_to_llvm_ir(variant.text))

    def kernel(emitted):
        built = build_object(emitted, key_parts={"test": "one-loop"})
        return Kernel.from_object(built.object_code, built.symbol,
                                  signature=kernel_signature(emitted.inputs, emitted.outputs))

    rng = np.random.default_rng(5)
    y = (rng.standard_normal((64, 256)) * 4).astype(np.float32)
    bias = rng.standard_normal(256).astype(np.float32)
    want, got = np.empty_like(y), y.copy()
    for k, arrays in ((kernel(plain), (y, bias, want)), (kernel(variant), (y, bias, got))):
        descs = [descriptor_for(a) for a in arrays]
        k.function(*[ctypes.byref(d) for d in descs])
    np.testing.assert_array_equal(got, want)  # the same scalar ops on the same values
    x = (y + bias).astype(np.float64)
    np.testing.assert_allclose(got, 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))),
                               rtol=1e-5, atol=1e-6)



def test_the_variant_memo_is_bounded(monkeypatch) -> None:
    from fusebind.runtime import builder_inplace

    region = next(op for op in parse_module(f"""
func.func @f(%m: {MN}) -> {MN} {{
  %r = fused.region @relu id 9 (%m) : ({MN}) -> {MN} {{
  ^bb0(%x: {MN}):
    %t = prim.relu %x : {MN} -> {MN}
    fused.yield %t : {MN}
  }}
  func.return %r : {MN}
}}
""").walk() if op.name == "fused.region")
    built: list[str] = []
    monkeypatch.setattr(builder_inplace, "_build", lambda region, k, r, canonical, *rest: built.append(canonical))
    monkeypatch.setattr(builder_inplace, "_VARIANTS", builder_inplace.OrderedDict())
    monkeypatch.setattr(builder_inplace, "MAX_VARIANTS", 2)
    for canonical in ("a", "b", "a", "c", "a", "b"):
        builder_inplace.inplace_variant(region, 0, 0, canonical, "cpu", [])
    assert built == ["a", "b", "c", "b"]  # "a" kept (recently used), "b" evicted by "c", built again
    assert len(builder_inplace._VARIANTS) == 2
