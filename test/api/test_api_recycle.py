"""Output recycling: a large result the caller dropped is the next call's output,
and a result anyone still references (variable, list, view, weakref, thread) never is."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest

import fusebind as fb
from fusebind.runtime.call import RECYCLE_MIN_BYTES, OutputRecycler

N = 2 * RECYCLE_MIN_BYTES // 4  # float32 elements: above the threshold
RNG = np.random.default_rng(5)


def relu_chain(a, b, c):
    return fb.relu(a * b + c)


def two_results(a, b):
    return a * b + 1.0, fb.exp(a - b)


def addr(x: np.ndarray) -> int:
    return x.__array_interface__["data"][0]


def filled(v: float, n: int = N) -> np.ndarray:
    return np.full(n, v, np.float32)


@pytest.fixture
def f(object_cache):
    fn = fb.jit(relu_chain, cache=object_cache, threads=1)
    fn(filled(0), filled(0), filled(0))
    return fn


def _recycler(fn) -> OutputRecycler:
    ex = next(iter(fn._executors.values()))
    (plan,) = ex._plans.values()
    (rec,) = plan.recyclers
    return rec


def test_dropped_result_is_reused(f) -> None:
    r = f(filled(1), filled(2), filled(3))
    first = addr(r)
    del r
    rec = _recycler(f)
    before = rec.reused
    r = f(filled(1), filled(2), filled(4))
    assert addr(r) == first and rec.reused == before + 1
    np.testing.assert_array_equal(r, filled(6))


def test_kept_result_is_never_overwritten(f) -> None:
    kept = f(filled(1), filled(2), filled(3))
    for v in range(5):
        other = f(filled(1), filled(1), filled(v))
        assert addr(other) != addr(kept)
        np.testing.assert_array_equal(other, filled(1 + v))
        del other
    np.testing.assert_array_equal(kept, filled(5))


def test_a_view_keeps_its_result(f) -> None:
    view = f(filled(1), filled(2), filled(3))[::2]
    later = [f(filled(1), filled(1), filled(v)) for v in range(3)]
    np.testing.assert_array_equal(view, filled(5)[::2])
    assert all(not np.shares_memory(view, x) for x in later)


def test_results_stored_in_a_list_stay_distinct(f) -> None:
    results = []
    for v in range(6):
        results.append(f(filled(1), filled(1), filled(v)))
    for v, r in enumerate(results):
        np.testing.assert_array_equal(r, filled(1 + v))
    assert len({addr(r) for r in results}) == len(results)


def test_weakly_referenced_result_is_not_reused(f) -> None:
    r = f(filled(1), filled(2), filled(3))
    w = weakref.ref(r)
    del r
    r2 = f(filled(0), filled(0), filled(1))
    assert w() is not r2  # not reused: the pool dropped it (a weak referent may die, never change)
    assert w() is None
    np.testing.assert_array_equal(r2, filled(1))


def test_result_reshaped_in_place_then_dropped_is_not_reused(f) -> None:
    r = f(filled(1), filled(2), filled(3))
    r.shape = (2, N // 2)
    del r
    r = f(filled(1), filled(2), filled(3))
    assert r.shape == (N,)
    np.testing.assert_array_equal(r, filled(5))


def test_result_passed_back_as_an_input_is_not_its_own_output(f) -> None:
    x = f(filled(1), filled(2), filled(3))
    y = f(x, filled(1), f(filled(0), filled(0), filled(1)))  # nested call: the temporary is referenced
    np.testing.assert_array_equal(y, filled(6))
    np.testing.assert_array_equal(x, filled(5))


def test_several_results_on_the_plan_path_are_recycled(object_cache) -> None:
    g = fb.jit(two_results, cache=object_cache)
    a, b = filled(2), filled(1)
    r1, r2 = g(a, b)
    firsts = (addr(r1), addr(r2))
    del r1, r2
    r1, r2 = g(a, b)
    assert (addr(r1), addr(r2)) == firsts
    keep = g(a, b)[1]
    r1, r2 = g(a, b)
    assert addr(r2) != addr(keep)
    np.testing.assert_array_equal(r1, filled(3))
    np.testing.assert_allclose(keep, np.exp(filled(1)), rtol=1e-6)


def test_small_outputs_are_not_recycled(object_cache) -> None:
    g = fb.jit(relu_chain, cache=object_cache, threads=1)
    small = filled(1, RECYCLE_MIN_BYTES // 4 - 1)
    g(small, small, small)
    ex = next(iter(g._executors.values()))
    (plan,) = ex._plans.values()
    assert plan.recyclers == [] and not isinstance(getattr(plan.fast.alloc, "__self__", None), OutputRecycler)


def test_threads_never_share_a_buffer(f) -> None:
    """Each thread's inputs give a result only it can produce; results are checked
    right after each call (dropped: recycling is active) and a kept sample at the end."""
    errors: list[str] = []
    kept: dict[int, list[np.ndarray]] = {}
    start = threading.Barrier(4)

    def worker(t: int) -> None:
        a, b, c = filled(1), filled(1), filled(10 * t)
        want = 10 * t + 1
        mine = kept.setdefault(t, [])
        start.wait()
        for i in range(150):
            r = f(a, b, c)
            if not (r[0] == want and r[-1] == want and np.all(r == want)):
                errors.append(f"thread {t} call {i}: got {r[0]}, {r[-1]}")
            if i % 50 == 0:
                mine.append(r)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    for t, rs in kept.items():
        for r in rs:
            np.testing.assert_array_equal(r, filled(10 * t + 1))
    ids = [addr(r) for rs in kept.values() for r in rs]
    assert len(set(ids)) == len(ids)
    assert _recycler(f).reused > 0


def test_recycler_refuses_foreign_and_referenced_spares() -> None:
    rec = OutputRecycler((4,), np.dtype(np.float32))
    a = rec.take()
    b = rec.take()  # `a` is still referenced here
    assert a is not b
    del a, b
    c = rec.take()
    assert c.shape == (4,) and rec.reused == 1
    rec.clear()
    d = rec.take()
    assert d is not c and rec.allocated == 3
