"""Issue 14, "Shapes": kernels are LRU-bounded per session with a documented budget
(runtime/budget.py, docs/KERNEL-BUDGET.md). An evicted kernel's rows leave the table in
the same swap that bound the newcomer; its code is freed only when nothing (an old
snapshot, a plan, a call) holds it; ids are never reused.

Every test shares six decompositions of one small region (a*b + a over f32[n], n = 4..9)
made once through a module-scoped object cache; each test links its own fresh kernels
from them (~0.2 ms each), so the module takes well under a second after the compiles."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.dialect.errors import FusebindValueError
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.runtime import budget as budget_mod
from fusebind.runtime.budget import (
    DEFAULT_KERNEL_BUDGET,
    kernel_budget,
    kernel_budget_stats,
    set_kernel_budget,
    was_evicted,
)
from fusebind.runtime.bindings import BindingKey
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.executor import Executor
from fusebind.runtime.fused_kernels import adopt_runtime_fused
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.loader import loaded_code_stats
from fusebind.runtime.session import Session
from fusebind.runtime.testing import noop_kernel, simple_signature

SIZES = (4, 5, 6, 7, 8, 9)


def _module(n: int) -> str:
    t = f"tensor<{n}xf32>"
    return (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %r = fused.region @k (%a, %b) : ({t}, {t}) -> {t} {{\n"
            f"  ^bb0(%x: {t}, %y: {t}):\n"
            f"    %m = prim.mul %x, %y : ({t}, {t}) -> {t}\n"
            f"    %s = prim.add %m, %x : ({t}, {t}) -> {t}\n"
            f"    fused.yield %s : {t}\n  }}\n  func.return %r : {t}\n}}\n")


def _region(n: int):
    return next(op for op in parse_module(_module(n)).walk() if op.name == "fused.region")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> ObjectCache:
    return ObjectCache(tmp_path_factory.mktemp("budget-cache"))


@pytest.fixture(scope="module")
def decomps(cache: ObjectCache) -> dict[int, object]:
    return {n: decompose_region(_region(n), ["f32", "f32", "f32"], cache=cache) for n in SIZES}


def _adopt(session: Session, decomps: dict[int, object], n: int, kernel: Kernel | None = None) -> int:
    kernel = kernel or Kernel.from_decomposition(decomps[n])  # type: ignore[arg-type]
    return int(adopt_runtime_fused("k", _region(n), kernel, ("f32", "f32", "f32"), "cpu", session=session))


def _bound_ids(session: Session) -> set[int]:
    return {k.fused_id for k in session.table.keys() if k.is_runtime}


def _run(kernel: Kernel, n: int) -> None:
    """Call the kernel itself and check numpy's answer (a*b + a)."""
    a = np.linspace(-1, 1, n, dtype=np.float32)
    b = np.linspace(2, 3, n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    kernel(descriptor_for(a), descriptor_for(b), descriptor_for(out))
    np.testing.assert_array_equal(out, a * b + a)


def test_the_table_never_holds_more_than_the_budget_and_evicts_the_oldest(decomps) -> None:
    s = Session("budget", kernel_budget=3)
    ids = []
    for n in SIZES:
        ids.append(_adopt(s, decomps, n))
        assert kernel_budget_stats(s).kernels == len(_bound_ids(s)) <= 3
    assert _bound_ids(s) == set(ids[3:])  # the three newest stayed
    assert all(was_evicted(s, i) for i in ids[:3]) and not any(was_evicted(s, i) for i in ids[3:])
    stats = kernel_budget_stats(s)
    assert (stats.budget, stats.kernels, stats.evictions) == (3, 3, 3)
    s.table.validate()


def test_eviction_joins_the_adopting_swap_one_generation_each(decomps) -> None:
    s = Session("gen", kernel_budget=2)
    gens = []
    for n in SIZES[:4]:
        _adopt(s, decomps, n)
        gens.append(s.generation)
    assert gens == [1, 2, 3, 4]  # adopt + evict is one swap


def test_a_lookup_makes_a_kernel_recent(decomps) -> None:
    s = Session("lru", kernel_budget=3)
    first, second, third = (_adopt(s, decomps, n) for n in SIZES[:3])
    s.table.lookup(BindingKey.runtime_fused(first), ("f32", "f32", "f32"), "cpu")  # a plan build uses it
    fourth = _adopt(s, decomps, SIZES[3])
    assert _bound_ids(s) == {first, third, fourth}  # the least recently used went: the second
    assert was_evicted(s, second)


def test_an_old_snapshot_still_runs_its_kernel_and_the_code_is_freed_after(decomps) -> None:
    s = Session("free", kernel_budget=1)
    first = _adopt(s, decomps, SIZES[0])
    old = s.table
    (row,) = old.lookup(BindingKey.runtime_fused(first), ("f32", "f32", "f32"), "cpu")
    code = weakref.ref(row.kernel.keepalive)
    freed_before = loaded_code_stats().freed
    _adopt(s, decomps, SIZES[1])  # evicts the first
    assert first not in _bound_ids(s) and s.table.lookup(BindingKey.runtime_fused(first),
                                                         ("f32", "f32", "f32"), "cpu") == ()
    gc.collect()
    assert code() is not None  # the old snapshot (and `row`) still hold it
    _run(row.kernel, SIZES[0])  # and it still computes numpy's answer
    del old, row
    gc.collect()
    assert code() is None
    assert loaded_code_stats().freed >= freed_before + 1


def test_ids_are_never_reused_and_a_recompiled_region_gets_its_own_id_back(decomps) -> None:
    s = Session("ids", kernel_budget=2)
    ids = [_adopt(s, decomps, n) for n in SIZES]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)  # every region its own id, counting up
    again = _adopt(s, decomps, SIZES[0])  # re-compiled after its eviction (a fresh load of the object)
    assert again == ids[0] and not was_evicted(s, again)
    (row,) = s.table.lookup(BindingKey.runtime_fused(again), ("f32", "f32", "f32"), "cpu")
    _run(row.kernel, SIZES[0])
    assert len({s.recipes.recipe_of(i).canonical for i in ids}) == len(ids)  # no id names two recipes
    assert _adopt(s, decomps, SIZES[1]) == ids[1] and max(s.recipes.ids()) == ids[-1]  # no new id handed out


def test_user_and_static_kernels_are_exempt(decomps) -> None:
    s = Session("exempt", kernel_budget=1)
    sig = simple_signature(("f32", "f32", "f32"))
    user = noop_kernel(sig)
    user_id = _adopt(s, decomps, SIZES[0], user)  # a ctypes kernel: fusebind could not make it again
    s.extend_bindings(lambda b: b.bind(BindingKey.static("add"), ("f32", "f32", "f32"), "cpu", noop_kernel(sig)))
    a, b = (_adopt(s, decomps, n) for n in SIZES[1:3])
    assert _bound_ids(s) == {user_id, b} and was_evicted(s, a)  # only generated code counts
    assert s.table.has_key_on(BindingKey.static("add"), "cpu")
    assert kernel_budget_stats(s).kernels == 1


def test_values_stay_numpys_through_an_executor_across_evictions(decomps, cache) -> None:
    s = Session("exec", kernel_budget=1)
    runs = _executors(s, SIZES[:3], cache)
    rng = np.random.default_rng(0)
    for _ in range(2):  # the second round meets kernels evicted by the first
        for n, ex in runs.items():
            a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
            np.testing.assert_array_equal(ex(a, b), a * b + a)
    assert kernel_budget_stats(s).kernels <= 1 and s.budget_state.evictions >= 2
    for ex in runs.values():
        ex.close()


def test_concurrent_adopt_lookup_and_evict_leave_a_consistent_table(decomps) -> None:
    s = Session("threads", kernel_budget=3)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(7):
                n = SIZES[(t + i) % len(SIZES)]
                fid = _adopt(s, decomps, n)
                s.table.lookup(BindingKey.runtime_fused(fid), ("f32", "f32", "f32"), "cpu")
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    table = s.table
    table.validate()
    assert kernel_budget_stats(s).kernels == len(_bound_ids(s)) <= 3
    assert not (_bound_ids(s) & s.budget_state.evicted_ids)
    by_id = {s.recipes.id_of(_region(n)): n for n in SIZES}
    for key, dtypes, backend, row in table.rows():
        _run(row.kernel, by_id[key.fused_id])


def test_on_evict_listeners_are_called_after_the_lock_and_held_weakly(decomps) -> None:
    s = Session("listen", kernel_budget=1)
    seen: list[int] = []

    class Holder:
        def dropped(self) -> None:
            assert not s.writer_lock.locked()
            seen.append(s.generation)

    holder = Holder()
    s.on_evict(holder.dropped)
    _adopt(s, decomps, SIZES[0])
    assert seen == []  # nothing evicted yet
    _adopt(s, decomps, SIZES[1])
    assert seen == [2]
    del holder
    gc.collect()
    _adopt(s, decomps, SIZES[2])
    assert seen == [2]


def test_a_failing_listener_is_an_internal_error_after_the_swap(decomps) -> None:
    from fusebind.dialect.errors import FusebindInternalError

    s = Session("bad-listener", kernel_budget=1)

    def broken() -> None:
        raise RuntimeError("listener bug")

    s.on_evict(broken)
    _adopt(s, decomps, SIZES[0])
    with pytest.raises(FusebindInternalError, match="calling an on_evict listener: RuntimeError: listener bug"):
        _adopt(s, decomps, SIZES[1])  # FUSEBIND_STRICT=1 in the suite: raised, not warned
    assert _bound_ids(s) == {s.recipes.id_of(_region(SIZES[1]))}  # the swap itself happened


def test_a_swap_that_fails_validation_evicts_nothing(decomps, monkeypatch: pytest.MonkeyPatch) -> None:
    from fusebind.runtime.table import BindingError, BindingTable

    s = Session("no-swap", kernel_budget=1)
    first = _adopt(s, decomps, SIZES[0])
    table = s.table

    def refuse(self: BindingTable) -> None:
        raise BindingError("refused by the test")

    monkeypatch.setattr(BindingTable, "validate", refuse)
    with pytest.raises(BindingError, match="refused by the test"):
        _adopt(s, decomps, SIZES[1])
    assert s.table is table and _bound_ids(s) == {first}
    assert s.budget_state.evictions == 0 and not was_evicted(s, first)


def test_the_budget_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget_mod, "_process_budget", None)
    monkeypatch.delenv("FUSEBIND_KERNEL_BUDGET", raising=False)
    assert kernel_budget() == DEFAULT_KERNEL_BUDGET == 512
    monkeypatch.setattr(budget_mod, "_process_budget", None)
    monkeypatch.setenv("FUSEBIND_KERNEL_BUDGET", "64")
    assert kernel_budget() == 64
    assert set_kernel_budget("unlimited") == 64 and kernel_budget() is None
    assert set_kernel_budget(8) is None and kernel_budget() == 8
    monkeypatch.setattr(budget_mod, "_process_budget", None)
    monkeypatch.setenv("FUSEBIND_KERNEL_BUDGET", "lots")
    with pytest.raises(FusebindValueError, match=r"FUSEBIND_KERNEL_BUDGET \(the kernel budget\) must be a "
                                                 r"positive number of kernels, or None / 'unlimited'.*'lots'"):
        kernel_budget()
    with pytest.raises(FusebindValueError, match=r"Session\(kernel_budget=...\) must be a positive number.*got 0"):
        Session(kernel_budget=0)
    with pytest.raises(ValueError, match="got True"):
        set_kernel_budget(True)
    s = Session(kernel_budget="unlimited")
    assert s.kernel_budget == 0 and budget_mod.session_budget(s) is None
    s.kernel_budget = None
    monkeypatch.setattr(budget_mod, "_process_budget", 5)
    assert budget_mod.session_budget(s) == 5



def _executors(s: Session, sizes, cache: ObjectCache) -> dict[int, Executor]:
    return {n: Executor(parse_module(_module(n)), session=s, cache=cache) for n in sizes}


def _call(ex: Executor, n: int) -> None:
    a, b = np.linspace(-1, 1, n, dtype=np.float32), np.linspace(2, 3, n, dtype=np.float32)
    np.testing.assert_array_equal(ex(a, b), a * b + a)


def test_an_executor_compiles_an_evicted_region_again_from_the_object_cache(decomps, cache) -> None:
    s = Session("recompile", kernel_budget=1)
    runs = _executors(s, SIZES[:2], cache)
    _call(runs[4], 4)
    _call(runs[5], 5)  # evicts the kernel of size 4
    _call(runs[4], 4)
    stats = runs[4].stats
    assert (stats.arms.fused_calls, stats.arms.arm0_calls) == (2, 0)


def test_an_idle_executor_does_not_keep_evicted_code_mapped(decomps, cache) -> None:
    s = Session("idle", kernel_budget=1)
    runs = _executors(s, SIZES[:2], cache)
    _call(runs[4], 4)
    (row,) = [r for key, _d, _b, r in s.table.rows() if key.is_runtime]
    code = weakref.ref(row.kernel.keepalive)
    del row
    _call(runs[5], 5)  # evicts it; runs[4] stays alive and idle
    gc.collect()
    assert code() is None
