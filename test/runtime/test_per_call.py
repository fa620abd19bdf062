"""The one-call entry of the fast path (thunk.py `ThunkCall.entry`, steps.py `FastPath.native`):
one native call checks the arguments and the table generation, allocates the output and runs."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import fusebind as fb
from fusebind.runtime.session import default_session

N = 16
RNG = np.random.default_rng(7)
A, B, C = (RNG.uniform(-3, 3, N).astype(np.float32) for _ in range(3))
WANT = np.maximum(A * B + C, 0)


def _relu_fma(a, b, c):
    return np.maximum(a * b + c, 0)


@pytest.fixture(scope="module")
def f():
    fn = fb.jit(_relu_fma, threads=1)
    fn(A, B, C)
    fn(A, B, C)
    return fn


def test_a_call_is_one_native_call_into_a_fresh_output(f) -> None:
    assert f._native is not None and f._native is f._fast.native
    before = f.stats.calls
    r1, r2 = f(A, B, C), f(A, B, C)
    for r in (r1, r2):
        assert type(r) is np.ndarray and r.dtype == np.float32 and r.shape == (N,) and r.flags.c_contiguous
        assert r.flags.writeable and r.flags.owndata and r.base is None
        np.testing.assert_array_equal(r, WANT)
    assert not np.shares_memory(r1, r2) and sys.getrefcount(r1) == 2  # ours alone: no leaked reference
    assert f.stats.calls == before + 2 and f.stats.fused_calls == before + 2


def test_the_entry_leaks_no_reference_to_its_dtype_or_arguments(f) -> None:
    descr = np.dtype(np.float32)
    refs = [sys.getrefcount(o) for o in (descr, A, B, C)]
    for _ in range(200):
        f(A, B, C)
    assert [sys.getrefcount(o) for o in (descr, A, B, C)] == refs


def test_what_does_not_fit_declines_to_the_slow_path_which_answers_as_numpy(f) -> None:
    native = f._native
    assert native(A, B) is None and native(A, B, C, C, C) is None  # wrong count
    a64, b64, c64 = (x.astype(np.float64) for x in (A, B, C))
    assert native(a64, b64, c64) is None
    r = f(a64, b64, c64)  # dtype-precise: its own trace, float64 as numpy
    assert r.dtype == np.float64
    np.testing.assert_allclose(r, _relu_fma(a64, b64, c64))
    assert native(A[::-1], B, C) is None  # not contiguous
    np.testing.assert_array_equal(f(A[::-1].copy(), B, C), _relu_fma(A[::-1], B, C))
    np.testing.assert_array_equal(f(A[::-1], B, C), _relu_fma(A[::-1], B, C))
    assert native(A.astype(">f4"), B, C) is None  # big-endian: the slow path's error names it
    with pytest.raises(fb.ArgumentError, match=r"argument 'a' \(#0\) of '_relu_fma': dtype >f4 is not supported"):
        f(A.astype(">f4"), B, C)
    sub = A.view(type("Sub", (np.ndarray,), {}))
    assert native(sub, B, C) is None  # a subclass is not exactly an ndarray
    np.testing.assert_array_equal(f(sub, B, C), WANT)


def test_out_and_an_older_table_take_the_checked_paths(f) -> None:
    f(A, B, C)
    out = np.empty(N, np.float32)
    assert f(A, B, C, out=out) is out
    np.testing.assert_array_equal(out, WANT)
    thunk = f._fast.thunk
    session = default_session()
    stale, ctx = thunk.entry(session, session.table.generation - 1, np.float32)
    assert stale(A, B, C) is None and ctx[7] == 0  # a plan of an older table never runs
    fresh, ctx = thunk.entry(session, session.table.generation, np.float32)
    assert fresh(A, B, C, out) is out and ctx[7] == 1  # given the output, it writes it
    assert thunk.entry(session, session.table.generation, np.float64) is None  # not the kernel's dtype
    assert thunk.function(A, B, C) is None  # the plain entries never allocate


def test_no_entry_where_python_must_run_after_the_kernel() -> None:
    g = fb.jit(_relu_fma, threads=1, profile=True)  # profiling times the call in Python
    g(A, B, C), g(A, B, C)
    assert g._native is None and g._fast is not None and g.stats.calls == 2
    big = [np.ones(1 << 15, np.float32)] * 3  # 128 KiB: recycled outputs (call.py)
    h = fb.jit(_relu_fma, threads=1)
    h(*big), h(*big)
    assert h._fast is not None and h._native is None
    np.testing.assert_array_equal(h(*big), np.full(1 << 15, 2, np.float32))


def test_a_function_called_inside_a_trace_inlines_instead_of_running_its_entry(f) -> None:
    f(A, B, C)
    assert f._native is not None
    g = fb.jit(lambda a, b, c: f(a, b, c) * 2, threads=1)
    np.testing.assert_array_equal(g(A, B, C), WANT * 2)
    assert f._native is None  # cleared by g's trace
    np.testing.assert_array_equal(f(A, B, C), WANT)
