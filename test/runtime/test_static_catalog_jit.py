"""Static catalog kernels: the JIT binds an exact catalog match under
Static(fused.<name>), so the region keeps its built-in id and the gate opens."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.compiler.catalog import recipe_function_text
from fusebind.compiler.optimize import optimize_graph
from fusebind.dialect import RegionOp, interpret, parse_module
from fusebind.runtime.bindings import BindingKey, global_bindings
from fusebind.runtime.fused_kernels import (
    CAP_SHAPE_DYNAMIC,
    CAP_SPLIT_AXIS0,
    InvalidFusedOpId,
    bind_catalog_kernel,
    fused_kernel_available,
    shape_cap,
)
from fusebind.runtime.jit import JitCompiler, optimize_with_jit, table_context
from fusebind.runtime.resolve import KernelMiss, compile_one
from fusebind.runtime.testing import noop_kernel, simple_signature

pytestmark = pytest.mark.usefixtures("isolated_bindings")

SOFTMAX_KEY = BindingKey.static("fused.softmax")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory):
    from fusebind.lowering import ObjectCache

    return ObjectCache(tmp_path_factory.mktemp("catalog-cache"))


def _softmax(shape: tuple[int, ...]) -> str:
    return recipe_function_text("softmax", "f32", shape)


def _regions(module) -> list[RegionOp]:
    return [op for op in module.walk() if isinstance(op, RegionOp)]


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_gated_softmax_is_bound_as_static_and_keeps_id_1(cache) -> None:
    module = parse_module(_softmax((4, 8)))
    first = optimize_graph(module, table_context())
    assert _regions(first.module) == []
    (item,) = first.work_order
    assert item.static_id == 1  # the work order names the catalog op it stands for
    assert [d.fused_id for d in first.decisions if d.verdict == "gated"] == [1]

    compiler = JitCompiler(cache=cache)
    assert compiler.submit(first.work_order) == 1
    (record,) = compiler.records.values()
    assert record.error is None and record.fused_id == 1 and record.dynamic
    assert compiler.snapshot().remarks() == ["remark: bound id 1 as Static(fused.softmax)"]
    (row,) = global_bindings().lookup(SOFTMAX_KEY, ("f32", "f32"), "cpu")
    assert row.caps == {CAP_SHAPE_DYNAMIC, CAP_SPLIT_AXIS0}
    assert row.cost.is_known and row.cost.trust == "composed"
    assert fused_kernel_available(1, "cpu")
    assert not any(k.is_runtime for k in global_bindings().keys())  # no runtime id was adopted for it

    second = optimize_graph(module, table_context())
    (region,) = _regions(second.module)
    assert region.id == 1 and second.work_order == ()
    resolved = compile_one(region, global_bindings(), "cpu")
    assert resolved.key == SOFTMAX_KEY and resolved.row is row

    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(interpret(second.module, x), interpret(module, x), rtol=1e-6)


def test_executor_runs_the_catalog_kernel_at_every_shape_of_its_rank(cache) -> None:
    f = fb.compile(_softmax((None, None)), cache=cache, threads=1)
    rng = np.random.default_rng(1)
    for shape in ((4, 8), (7, 33), (1, 1)):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(f(x), _softmax_ref(x), rtol=1e-5, atol=1e-6)
        assert f.executor.plan_for([x]).decisions[0].fused_id == 1
        assert f.executor.plan_for([x]).decisions[0].arm == "fused"
    assert f.stats.compiles + f.stats.object_cache_hits == 1  # one dynamic kernel serves every shape
    assert len(global_bindings().lookup(SOFTMAX_KEY, ("f32", "f32"), "cpu")) == 1


def test_rank_mismatch_misses_then_binds_a_second_row(cache) -> None:
    optimize_with_jit(parse_module(_softmax((4, 8))), cache=cache)
    region3 = _regions(optimize_graph(parse_module(_softmax((2, 3, 5))), table_context()).module)[0]
    assert region3.id == 1  # the gate is coarse: any softmax kernel opens it
    with pytest.raises(KernelMiss) as info:
        compile_one(region3, global_bindings(), "cpu")
    assert "do not fit the region's ranks or shapes [2x3x5, 2x3x5]" in str(info.value)
    assert "bind_catalog_kernel" in str(info.value)

    f = fb.compile(_softmax((2, 3, 5)), cache=cache, threads=1)
    x = np.random.default_rng(2).standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(f(x), _softmax_ref(x), rtol=1e-5, atol=1e-6)
    assert f.executor.plan_for([x]).decisions[0].arm == "fused"
    rows = global_bindings().lookup(SOFTMAX_KEY, ("f32", "f32"), "cpu")
    assert sorted(r.kernel.signature.inputs[0][1] for r in rows) == [2, 3]


def test_exact_shape_cap_restricts_a_row(cache) -> None:
    sig = simple_signature(("f32", "f32"), rank=2)
    bind_catalog_kernel(1, ("f32", "f32"), "cpu", noop_kernel(sig), caps=(shape_cap([(4, 8), (4, 8)]),))
    fits = _regions(optimize_graph(parse_module(_softmax((4, 8))), table_context()).module)[0]
    other = _regions(optimize_graph(parse_module(_softmax((4, 9))), table_context()).module)[0]
    assert compile_one(fits, global_bindings(), "cpu").key == SOFTMAX_KEY
    with pytest.raises(KernelMiss):
        compile_one(other, global_bindings(), "cpu")


def test_bind_catalog_kernel_refuses_runtime_and_unknown_ids() -> None:
    k = noop_kernel(simple_signature(("f32", "f32"), rank=2))
    with pytest.raises(InvalidFusedOpId, match=r"needs a static catalog FusedOpId in 1 \.\. 65535, got 65536"):
        bind_catalog_kernel(65536, ("f32", "f32"), "cpu", k)
    with pytest.raises(InvalidFusedOpId, match="no built-in fused op has id 999"):
        bind_catalog_kernel(999, ("f32", "f32"), "cpu", k)
    assert bind_catalog_kernel(3, ("f32", "f32"), "cpu", k) == BindingKey.static("fused.gelu")
    assert fused_kernel_available(3, "cpu")
