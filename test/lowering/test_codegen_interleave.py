"""Loops calling erf or tanh are compiled with four interleaved vectors (lowering/codegen.py,
`INTERLEAVED_CALLS`): the optimized IR holds several vectors in flight, the values are bit for
bit those of the cost model's code, other kernels keep the cost model's choice, and the object
cache keys the forced code apart."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusebind.lowering.codegen as codegen
from fusebind.dialect import parse_module
from fusebind.lowering.backend import backend_named
from fusebind.lowering.emit import emit_linalg
from fusebind.lowering.pipeline import run_upstream_pipeline, translate_to_llvm_ir
from fusebind.runtime.dtypes import KernelSignature, descriptor_for, parse_dtypes
from fusebind.runtime.kernel import Kernel

N = 4099  # not a multiple of any vector width: the remainder loop runs too


def _llvm_ir(op: str) -> tuple[str, str]:
    text = f'''builtin.module {{
  func.func @f(%p0: tensor<{N}xf32>) -> tensor<{N}xf32> {{
    %r = "fused.region"(%p0) <{{fused_id = 70000 : i64, name = "k"}}> ({{
    ^bb0(%arg0 : tensor<{N}xf32>):
      %e = prim.{op} %arg0 : tensor<{N}xf32> -> tensor<{N}xf32>
      "fused.yield"(%e) : (tensor<{N}xf32>) -> ()
    }}) : (tensor<{N}xf32>) -> tensor<{N}xf32>
    func.return %r : tensor<{N}xf32>
  }}
}}'''
    region = next(o for o in parse_module(text).walk() if o.name == "fused.region")
    fm = backend_named("cpu").fastmath()
    emitted = emit_linalg(region, f"k_{op}", fastmath=fm[0] if fm else None, fastmath_defs=fm[1] if fm else None)
    return translate_to_llvm_ir(run_upstream_pipeline(emitted.text)), emitted.entry


def _vector_fmas(ir: str) -> int:
    return len(re.findall(r"call <\d+ x float> @llvm\.fma\.v\d+f32", ir))


@pytest.mark.parametrize("op", ["erf", "tanh"])
def test_erf_and_tanh_loops_are_interleaved_with_the_same_values(op) -> None:
    ir, entry = _llvm_ir(op)
    assert codegen.interleave_count(ir, None) == codegen.interleave_count(ir, 1 << 20) == 4
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32) * 3
    sig = KernelSignature(tuple((d, 1) for d in parse_dtypes(["f32"])), tuple((d, 1) for d in parse_dtypes(["f32"])))
    results, fmas = [], []
    for count in (4, 0):
        fmas.append(_vector_fmas(codegen.optimized_ir(ir, entry, count)))
        kernel = Kernel.from_object(codegen.compile_llvm_ir(ir, entry, interleave=count), entry, signature=sig)
        out = np.empty_like(x)
        kernel(descriptor_for(x), descriptor_for(out))
        results.append(out)
    assert fmas[0] >= 2 * fmas[1] > 0, fmas
    np.testing.assert_array_equal(results[0], results[1])


def test_other_and_small_kernels_keep_the_cost_models_choice() -> None:
    ir, _ = _llvm_ir("exp")
    assert codegen.interleave_count(ir, None) == 0
    erf, _ = _llvm_ir("erf")
    assert codegen.interleave_count(erf, codegen.INTERLEAVE_MIN_ELEMENTS - 1) == 0  # compile time first


def test_build_decides_by_the_kernels_size(monkeypatch) -> None:
    from types import SimpleNamespace

    from fusebind.lowering.build import interleave_of

    def emitted(shape):
        spec = SimpleNamespace(shape=shape)
        return SimpleNamespace(text="func.call @__fb_tanh_f32(%v)", inputs=(spec,), outputs=(spec,))

    assert interleave_of(emitted((None, 64))) == 4
    assert interleave_of(emitted((256, 256))) == 4
    assert interleave_of(emitted((8, 16))) == 0
