"""Kernel caps live in the binding row: the JIT sets them, the plan reads them."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.compiler.optimize import optimize_graph
from fusebind.dialect import parse_module
from fusebind.runtime.bindings import BindingError, BindingKey, global_bindings
from fusebind.runtime.call import SPLIT_THRESHOLD
from fusebind.runtime.fused_kernels import (
    CAP_SHAPE_DYNAMIC,
    CAP_SPLIT_AXIS0,
    adopt_runtime_fused,
    register_runtime_kernel,
    shape_cap,
)
from fusebind.runtime.jit import JitCompiler, table_context
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.testing import noop_kernel, simple_signature

pytestmark = pytest.mark.usefixtures("isolated_bindings")

N = SPLIT_THRESHOLD + 7


def _fma_relu(n: int) -> str:
    t = f"tensor<{n}xf32>"
    return f"""
func.func @f(%a: {t}, %b: {t}, %c: {t}) -> {t} {{
  %x = prim.mul %a, %b : ({t}, {t}) -> {t}
  %y = prim.add %x, %c : ({t}, {t}) -> {t}
  %z = prim.relu %y : {t} -> {t}
  func.return %z : {t}
}}
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory):
    from fusebind.lowering import ObjectCache

    return ObjectCache(tmp_path_factory.mktemp("caps-cache"))


def _rows():
    return [(k, row) for k, _, _, row in global_bindings().rows() if k.is_runtime]


def test_adopt_and_register_take_caps() -> None:
    module = parse_module(_fma_relu(4))
    (item,) = optimize_graph(module, table_context()).work_order
    k = noop_kernel(simple_signature(("f32", "f32", "f32", "f32")))
    fid = adopt_runtime_fused("fma", item.region, k, item.dtypes, "cpu", caps=(CAP_SPLIT_AXIS0,))
    (row,) = global_bindings().lookup(BindingKey.runtime_fused(fid), item.dtypes, "cpu")
    assert row.caps == {CAP_SPLIT_AXIS0}
    k2 = noop_kernel(simple_signature(("f32", "f32")))
    register_runtime_kernel(70000, ("f32", "f32"), "cpu", k2, caps=[CAP_SHAPE_DYNAMIC, CAP_SPLIT_AXIS0])
    (row2,) = global_bindings().lookup(BindingKey.runtime_fused(70000), ("f32", "f32"), "cpu")
    assert row2.caps == {CAP_SHAPE_DYNAMIC, CAP_SPLIT_AXIS0}
    with pytest.raises(BindingError, match=r"caps must be an iterable of cap names, got the string 'split:axis0'"):
        register_runtime_kernel(70001, ("f32", "f32"), "cpu", k2, caps="split:axis0")
    with pytest.raises(BindingError, match="caps must be non-empty strings"):
        register_runtime_kernel(70001, ("f32", "f32"), "cpu", k2, caps=("",))


def test_jit_sets_caps_only_on_dynamic_splittable_kernels(cache) -> None:
    """Dynamic splittable kernels get {shape:dynamic, split:axis0}; a kernel
    compiled for static shapes gets only the exact-shapes cap (bug 11)."""
    (item,) = optimize_graph(parse_module(_fma_relu(64)), table_context()).work_order
    JitCompiler(cache=cache, split_threshold=10).submit([item])  # 64 >= 10: compiled for dynamic shapes
    JitCompiler(cache=cache, split_threshold=None).submit(
        optimize_graph(parse_module(_fma_relu(32)), table_context()).work_order)
    caps = {str(row.cost.bytes): sorted(row.caps) for _, row in _rows()}
    assert caps == {str(4.0 * 4 * 64): [CAP_SHAPE_DYNAMIC, CAP_SPLIT_AXIS0],
                    str(4.0 * 4 * 32): [shape_cap([(32,)] * 4)]}
    assert shape_cap([(32,)] * 4) == "shape=32,32,32,32"


@pytest.mark.parametrize("caps, splits", [((), 1), ((CAP_SPLIT_AXIS0,), 2)])
def test_the_plan_splits_only_rows_with_the_split_cap(cache, caps, splits) -> None:
    text = _fma_relu(N)
    (item,) = optimize_graph(parse_module(text), table_context()).work_order
    from fusebind.lowering import decompose_region

    # the same dynamic kernel either way: only the row's caps differ
    decomp = decompose_region(item.region, list(item.dtypes), cache=cache, dynamic=True)
    fid = adopt_runtime_fused("fma", item.region, Kernel.from_decomposition(decomp), item.dtypes, "cpu", cost=decomp.cost, caps=caps)
    f = fb.compile(text, cache=cache, threads=2)
    a, b, c = (np.random.default_rng(i).standard_normal(N).astype(np.float32) for i in range(3))
    (d,) = f.executor.plan_for([a, b, c]).decisions
    assert (d.fused_id, d.arm, d.splits) == (fid, "fused", splits)
    assert f.stats.compiles == 0
    np.testing.assert_allclose(f(a, b, c), np.maximum(a * b + c, 0), rtol=1e-6)


def test_executor_split_comes_from_the_row(cache) -> None:
    f = fb.compile(_fma_relu(N), cache=cache, threads=2)
    a, b, c = (np.random.default_rng(i).standard_normal(N).astype(np.float32) for i in range(3))
    np.testing.assert_allclose(f(a, b, c), np.maximum(a * b + c, 0), rtol=1e-6)
    (d,) = f.executor.plan_for([a, b, c]).decisions
    assert d.splits == 2
    (row,) = global_bindings().lookup(BindingKey.runtime_fused(d.fused_id), ("f32",) * 4, "cpu")
    assert CAP_SPLIT_AXIS0 in row.caps and CAP_SHAPE_DYNAMIC in row.caps
    import fusebind.runtime.jit as jit

    assert not hasattr(jit, "kernel_is_splittable")  # no side state beside the table


@pytest.mark.parametrize("threads", [1, 2])
def test_a_broadcast_operand_of_full_rank_is_not_split_or_generalized(threads) -> None:
    """Regression: relu(y + b) with y (1, 64, 112, 112) and a (1, 64, 1, 1) bias (a conv's bias add,
    802816 elements, above SPLIT_THRESHOLD) got a kernel compiled for dynamic shapes, every dim `?`,
    which read the bias as if it were full-shaped: ~60% of the values were wrong (NaN, 1e30).
    A region with a broadcast operand is not splittable (compiler/splitting.py)."""
    from fusebind.compiler.splitting import region_is_splittable

    rng = np.random.default_rng(7)
    y = rng.standard_normal((1, 64, 112, 112), dtype=np.float32)
    b = rng.standard_normal((1, 64, 1, 1), dtype=np.float32)
    assert y.size >= SPLIT_THRESHOLD
    f = fb.jit(lambda y, b: np.maximum(y + b, 0), threads=threads)
    np.testing.assert_array_equal(f(y, b), np.maximum(y + b, 0))
    t, tb = "tensor<1x64x112x112xf32>", "tensor<1x64x1x1xf32>"
    module = parse_module(f"""
func.func @f(%y: {t}, %b: {tb}) -> {t} {{
  %s = prim.add %y, %b : ({t}, {tb}) -> {t}
  %r = prim.relu %s : {t} -> {t}
  func.return %r : {t}
}}
""")
    (item,) = optimize_graph(module, table_context()).work_order
    assert not region_is_splittable(item.region)
    same = parse_module(_fma_relu(N))
    (item2,) = optimize_graph(same, table_context()).work_order
    assert region_is_splittable(item2.region)
