"""Bug 9: a BaseException (KeyboardInterrupt, SystemExit) while the JIT compiles
is recorded like any failure, is not swallowed, and never leaves the compiler
unable to finish or take more work."""

from __future__ import annotations

import threading

import pytest

from fusebind.compiler.optimize import optimize_graph
from fusebind.dialect import parse_module
from fusebind.runtime.jit import JitCompiler, table_context

# A BaseException that ends a worker reaches threading.excepthook on purpose; pytest
# reports each as this warning after the test.
pytestmark = [pytest.mark.usefixtures("isolated_bindings"),
              pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")]

WAIT_S = 120.0


def _two_regions(n: int) -> str:
    """Two fusable chains separated by a matmul: two work items."""
    t, w = f"tensor<{n}x8xf32>", "tensor<8x8xf32>"
    return f"""
func.func @f(%a: {t}, %w: {w}) -> {t} {{
  %0 = prim.exp %a : {t} -> {t}
  %1 = prim.tanh %0 : {t} -> {t}
  %2 = prim.matmul %1, %w : ({t}, {w}) -> {t}
  %3 = prim.sigmoid %2 : {t} -> {t}
  %4 = prim.mul %3, %a : ({t}, {t}) -> {t}
  func.return %4 : {t}
}}
"""


@pytest.fixture
def cache(tmp_path):
    from fusebind.lowering import ObjectCache

    return ObjectCache(tmp_path / "cache")


def _work(n: int = 4) -> list:
    items = optimize_graph(parse_module(_two_regions(n)), table_context()).work_order
    assert len(items) == 2, items
    return items


def _dies_once(exc: BaseException) -> tuple[list[str], object]:
    calls: list[str] = []

    def hook(name: str) -> None:
        calls.append(name)
        if len(calls) == 1:
            raise exc
    return calls, hook


def test_sync_compile_records_and_reraises_a_keyboard_interrupt(cache) -> None:
    work = _work()
    calls, hook = _dies_once(KeyboardInterrupt("stop"))
    jit = JitCompiler(cache=cache, before_compile=hook)
    with pytest.raises(KeyboardInterrupt, match="stop"):
        jit.submit(work)
    (record,) = jit.records.values()  # the item not tried yet is forgotten
    assert record.name == work[0].name and record.error == "KeyboardInterrupt: stop" and record.fused_id == 0
    assert [d.message for d in jit.snapshot().diagnostics] == ["KeyboardInterrupt: stop"]
    assert jit.submit(work) == 1  # the second item now; the failed one is not retried
    assert calls == [work[0].name, work[1].name]
    assert jit.compiles == 1 and jit.worker_deaths == []


def test_a_worker_ended_by_system_exit_hands_queued_work_to_a_fresh_worker(cache) -> None:
    work = _work()
    release = threading.Event()
    calls: list[str] = []

    def hook(name: str) -> None:
        calls.append(name)
        if len(calls) == 1:
            release.wait(WAIT_S)  # both items are queued before the first one dies
            raise SystemExit("worker told to exit")

    jit = JitCompiler(cache=cache, background=True, before_compile=hook)
    assert jit.submit(work) == 2
    first = jit._thread
    release.set()
    assert jit.wait(WAIT_S)
    records = [jit.records[k] for k in jit.records]
    assert [r.error for r in records] == ["SystemExit: worker told to exit", None]
    assert records[1].fused_id > 0 and jit.compiles == 1
    assert jit.worker_deaths == ["SystemExit: worker told to exit"]
    assert first is not None and not first.is_alive() and jit._thread is not first
    jit.close()
    assert jit._thread is None or not jit._thread.is_alive()


def test_after_a_worker_died_with_nothing_queued_the_next_submit_starts_one(cache) -> None:
    work = _work()
    calls, hook = _dies_once(KeyboardInterrupt("injected"))
    jit = JitCompiler(cache=cache, background=True, before_compile=hook)
    assert jit.submit(work[:1]) == 1
    assert jit.wait(WAIT_S)
    assert jit.worker_deaths == ["KeyboardInterrupt: injected"]
    assert jit._thread is None  # dead and forgotten: nothing was queued behind it
    assert jit.submit(work[1:]) == 1
    assert jit.wait(WAIT_S)
    assert jit.compiles == 1 and [r.error for r in jit.records.values()] == ["KeyboardInterrupt: injected", None]
    jit.close()
    with pytest.raises(RuntimeError, match="is closed"):
        jit.submit(_work(8))
