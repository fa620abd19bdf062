"""compile_one: dtype-precise resolution through the table, and the miss it reports."""

from __future__ import annotations

import pytest

from fusebind.dialect import parse_module
from fusebind.runtime.bindings import BindingKey, global_bindings
from fusebind.runtime.executor import KernelMiss, compile_one
from fusebind.runtime.fused_kernels import register_runtime_kernel
from fusebind.runtime.testing import noop_kernel, simple_signature

pytestmark = pytest.mark.usefixtures("isolated_bindings")

TEXT = """
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = prim.exp %a : tensor<4xf32> -> tensor<4xf32>
  %r = fused.region @twice id 65536 (%e) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %y = prim.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fused.yield %y : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
"""


def _nodes():
    ops = list(next(iter(parse_module(TEXT).ops)).body.blocks[0].ops)
    return ops[0], ops[1]


def test_fused_node_resolves_dtype_precisely() -> None:
    _, region = _nodes()
    k64 = noop_kernel(simple_signature(("f64", "f64")))
    register_runtime_kernel(65536, ("f64", "f64"), "cpu", k64)
    with pytest.raises(KernelMiss) as info:
        compile_one(region, global_bindings(), "cpu")
    assert str(info.value) == (
        "fusebind: no kernel for fused.region @twice under RuntimeFused(65536) with dtypes (f32, f32) on backend "
        "'cpu'; bound for RuntimeFused(65536): (f64, f64) on 'cpu'. Fix: adopt a kernel with "
        "adopt_runtime_fused(name, region, kernel, dtypes, backend) (the JIT does this for regions in its work "
        "order), or run the region's arm 0")
    assert info.value.key == BindingKey.runtime_fused(65536)
    k32 = noop_kernel(simple_signature(("f32", "f32")))
    register_runtime_kernel(65536, ("f32", "f32"), "cpu", k32)
    resolved = compile_one(region, global_bindings(), "cpu")
    assert resolved.kernel is k32 and resolved.key == BindingKey.runtime_fused(65536)


def test_primitive_miss_names_key_caps_and_fix() -> None:
    exp, _ = _nodes()
    with pytest.raises(KernelMiss) as info:
        compile_one(exp, global_bindings(), "cpu")
    assert str(info.value) == (
        "fusebind: no kernel for prim.exp under Static(exp) with dtypes (f32, f32) with caps {rank=1} on backend "
        "'cpu'; nothing is bound for Static(exp) on any backend. Fix: build it with "
        "fusebind.runtime.static_kernels.ensure_static_kernel('exp', ('f32', 'f32'), 1)")
