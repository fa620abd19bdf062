"""The JIT loop: compile the work order, adopt, re-optimize; failures are diagnostics."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.runtime.bindings import global_recipes
from fusebind.dialect import RegionOp, interpret, parse_module
from fusebind.runtime.fused_kernels import fused_kernel_available
from fusebind.runtime.jit import JitWorker, compile_work_order, optimize_with_jit, table_context

CHAIN = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %x = prim.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = prim.exp %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %z = prim.neg %y : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}
"""


@pytest.fixture
def cache(tmp_path):
    from fusebind.lowering import ObjectCache

    return ObjectCache(tmp_path)


def regions(module):
    return [op for op in module.walk() if isinstance(op, RegionOp)]


def test_sync_jit_adopts_then_fuses(isolated_bindings, cache) -> None:
    module = parse_module(CHAIN)
    from fusebind.compiler.optimize import optimize_graph

    first = optimize_graph(module, table_context())
    assert regions(first.module) == [] and len(first.work_order) == 1
    result, report = optimize_with_jit(module, cache=cache)
    (wid,) = report.adopted
    assert report.diagnostics == [] and wid == first.work_order[0].fused_id
    assert fused_kernel_available(wid, "cpu")
    (region,) = regions(result.module)
    assert region.id == wid
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(interpret(result.module, a, b), interpret(module, a, b), rtol=1e-6)


def _failing_decompose(region, dtypes, **kwargs):
    from fusebind.lowering.errors import LoweringError

    raise LoweringError("codegen", "lowering exploded on purpose")


def test_failing_compile_is_a_diagnostic_and_region_stays_unfused(isolated_bindings) -> None:
    module = parse_module(CHAIN)
    result, report = optimize_with_jit(module, decompose=_failing_decompose)
    (diag,) = report.diagnostics
    assert diag.message == "LoweringError: lowering failed at stage 'codegen': lowering exploded on purpose"
    assert diag.remark().startswith(f"remark: jit failed id {diag.fused_id} @")
    assert report.adopted == [] and regions(result.module) == []
    assert not fused_kernel_available(diag.fused_id, "cpu")


def test_background_worker_adopts_while_caller_continues(isolated_bindings, cache) -> None:
    from fusebind.compiler.optimize import optimize_graph

    module = parse_module(CHAIN)
    first = optimize_graph(module, table_context())
    with JitWorker(cache=cache) as worker:
        assert worker.submit(first.work_order) == 1
        assert worker.submit(first.work_order) == 0  # each id once
        report = worker.wait()
    assert report.adopted == [first.work_order[0].fused_id]
    again = optimize_graph(module, table_context())
    assert [r.id for r in regions(again.module)] == report.adopted
    with pytest.raises(RuntimeError, match="JitWorker is closed"):
        worker.submit(first.work_order)


def test_background_failure_recorded_not_raised(isolated_bindings) -> None:
    from fusebind.compiler.optimize import optimize_graph

    first = optimize_graph(parse_module(CHAIN), table_context())
    with JitWorker(decompose=_failing_decompose) as worker:
        worker.submit(first.work_order)
        report = worker.wait()
    assert report.adopted == [] and len(report.diagnostics) == 1


def test_compile_work_order_empty_is_noop(isolated_bindings) -> None:
    report = compile_work_order([])
    assert report.adopted == [] and report.diagnostics == [] and report.remarks() == []
    assert len(global_recipes()) == 0


def test_one_compiler_sync_hook_once_and_records(isolated_bindings, cache) -> None:
    from fusebind.compiler.optimize import optimize_graph
    from fusebind.runtime.jit import JitCompiler

    seen: list[str] = []
    first = optimize_graph(parse_module(CHAIN), table_context())
    compiler = JitCompiler(cache=cache, before_compile=seen.append)
    assert compiler.submit(first.work_order) == 1
    assert compiler.submit(first.work_order) == 0  # compiled at most once
    (item,) = first.work_order
    assert seen == [item.name] and compiler.compiles == 1 and compiler.wait(0)
    (record,) = compiler.records.values()
    assert record.error is None and record.fused_id == item.fused_id and fused_kernel_available(item.fused_id, "cpu")


def test_background_hook_holds_the_kernel_back(isolated_bindings, cache) -> None:
    import threading

    from fusebind.compiler.optimize import optimize_graph
    from fusebind.runtime.jit import JitCompiler

    release = threading.Event()
    first = optimize_graph(parse_module(CHAIN), table_context())
    with JitCompiler(background=True, cache=cache, before_compile=lambda name: release.wait(30)) as compiler:
        compiler.submit(first.work_order)
        assert compiler.wait(0.05) is False  # held by the hook
        assert not fused_kernel_available(first.work_order[0].fused_id, "cpu")
        release.set()
        assert compiler.wait(60) is True
    assert fused_kernel_available(first.work_order[0].fused_id, "cpu")


def test_executor_uses_the_same_compiler(isolated_bindings, cache) -> None:
    import fusebind as fb
    from fusebind.runtime.jit import JitCompiler

    f = fb.compile(CHAIN, cache=cache, before_compile=lambda name: None)
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(f(a, b), -np.exp(a + b), rtol=1e-6)
    assert isinstance(f.executor.compiler, JitCompiler) and f.stats.compiles + f.stats.object_cache_hits == 1


def test_executor_compile_failure_is_explained(isolated_bindings, cache) -> None:
    import fusebind as fb

    def explode(name: str) -> None:
        raise RuntimeError("lowering exploded on purpose")

    f = fb.compile(CHAIN, cache=cache, before_compile=explode)
    a = np.ones((4, 8), np.float32)
    b = np.ones(8, np.float32)
    np.testing.assert_allclose(f(a, b), -np.exp(a + b), rtol=1e-6)  # arm 0 (primitives) runs
    assert f.stats.arms.fused_calls == 0
    assert "failed: RuntimeError: lowering exploded on purpose" in f.explain(a, b)
