"""The native thread pool (runtime/pool.py) and the parallel-for thunk (thunk.py `ParallelThunkCall`).

The pool's scheduling at 1, 2, 4 and 8 threads (this host has 2 cores: 4 and 8 oversubscribe,
which is what shakes out ordering bugs): every chunk runs exactly once (odd sizes, fewer tasks
than threads, zero tasks), values bitwise equal to one plain kernel call, concurrent callers from
8 Python threads, a kernel error (ABI v2 status) inside a chunk raised as fb.IndexOutOfBounds
naming the first bad index in chunk order, and a KeyboardInterrupt during a long call leaving
the pool usable. The kernels are hand-written LLVM IR (y = f(x) over a (rows, cols) f32 array),
compiled once for the module."""

from __future__ import annotations

import _thread
import dataclasses
import threading
import time

import numpy as np
import pytest

import fusebind as fb
from fusebind.runtime.pool import NativePool, PoolUnavailable, _api, pool_for, process_pool
from fusebind.runtime.steps import ThunkStep
from fusebind.runtime.thunk import ParallelThunkCall, ThunkCall

try:
    _api()
except PoolUnavailable as exc:  # another platform: split calls use Python threads (pool.py)
    pytest.skip(f"native pool unavailable here: {exc}", allow_module_level=True)

THREADS = (1, 2, 4, 8)


def _kernel_ir(work: int, status: bool) -> str:
    """y[i] = x[i] iterated `work` times through v*0.999 + 0.001 (then *2 + 1); with `status`, a
    negative x[i] sets the status (once per call) to [1, int(-x[i]), 1000, 0]: a value-based
    "index", so which chunk a row falls in does not change what is reported."""
    st_arg = ", ptr %st" if status else ""
    check = "\n  br label %compute"
    if status:
        check = """
  %neg = fcmp olt float %v, 0.0
  br i1 %neg, label %bad, label %compute
bad:
  %sdp = getelementptr i8, ptr %st, i64 8
  %sd = load ptr, ptr %sdp
  %code = load i64, ptr %sd
  %first = icmp eq i64 %code, 0
  br i1 %first, label %set, label %compute
set:
  store i64 1, ptr %sd
  %nv = fneg float %v
  %idx = fptosi float %nv to i64
  %s1 = getelementptr i64, ptr %sd, i64 1
  store i64 %idx, ptr %s1
  %s2 = getelementptr i64, ptr %sd, i64 2
  store i64 1000, ptr %s2
  br label %compute"""
    return f"""
define void @k(ptr %x, ptr %y{st_arg}) {{
entry:
  %xdp = getelementptr i8, ptr %x, i64 8
  %xd = load ptr, ptr %xdp
  %ydp = getelementptr i8, ptr %y, i64 8
  %yd = load ptr, ptr %ydp
  %rp = getelementptr i8, ptr %x, i64 24
  %rows = load i64, ptr %rp
  %cp = getelementptr i8, ptr %x, i64 32
  %cols = load i64, ptr %cp
  %n = mul i64 %rows, %cols
  %none = icmp eq i64 %n, 0
  br i1 %none, label %exit, label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %store]
  %xp = getelementptr float, ptr %xd, i64 %i
  %v = load float, ptr %xp{check}
compute:
  br label %work
work:
  %k = phi i64 [0, %compute], [%k1, %work]
  %a = phi float [%v, %compute], [%a1, %work]
  %am = fmul float %a, 0x3FEFF7CEE0000000
  %a1 = fadd float %am, 0x3F50624DE0000000
  %k1 = add i64 %k, 1
  %kmore = icmp ult i64 %k1, {work}
  br i1 %kmore, label %work, label %store
store:
  %b = fmul float %a1, 2.0
  %r = fadd float %b, 1.0
  %yp = getelementptr float, ptr %yd, i64 %i
  store float %r, ptr %yp
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %loop, label %exit
exit:
  ret void
}}
"""


def _build(work: int, status: bool):
    from fusebind.lowering.abi import DType, KernelSignature
    from fusebind.lowering.codegen import compile_llvm_ir
    from fusebind.runtime.kernel import IndexCheck, Kernel

    text = _kernel_ir(work, status)
    sig = KernelSignature(((DType.F32, 2),), ((DType.F32, 2),), status=status)
    kernel = Kernel.from_object(compile_llvm_ir(text, "k"), "k", signature=sig)
    if status:
        kernel = dataclasses.replace(kernel, checks=(IndexCheck("axis 0 of the test kernel", (0,)),))
    return kernel


@pytest.fixture(scope="module")
def kernels():
    return {"fast": _build(1, False), "slow": _build(600, False), "checked": _build(1, True)}


@pytest.fixture(scope="module")
def pools():
    made = {t: NativePool(t) for t in THREADS}
    yield made
    for p in made.values():
        p.close()


def _plain(kernel, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    assert ThunkCall(kernel, [x.shape, x.shape]).function(x, out) is out
    return out


def _rand(rows: int, cols: int = 37, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32) + np.float32(4)


@pytest.mark.parametrize("threads", THREADS)
def test_every_task_runs_exactly_once(pools, threads: int) -> None:
    api, pool = _api(), pools[threads]
    for n in (0, 1, 2, 3, threads - 1, threads, threads + 1, 7, 64, 1001):
        counts = np.zeros(max(n, 1) + 1, np.int64)  # + 1: a guard slot past the last task
        pool.run(api.count, counts.ctypes.data, n)
        assert counts[:n].tolist() == [1] * n, (threads, n)
        assert counts[max(n, 1):].tolist() == [0] * (len(counts) - max(n, 1)), (threads, n)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("rows,chunks", [(1, 1), (3, 5), (5, 3), (97, 8), (97, 97), (1000, 61)])
def test_chunks_cover_the_call_bitwise_at_any_thread_count(kernels, pools, threads, rows, chunks) -> None:
    """Chunk c gets rows [rows*c//chunks, rows*(c+1)//chunks): empty chunks (chunks > rows) are skipped,
    the union is every row once; values bitwise those of one plain call, at every thread count."""
    k = kernels["fast"]
    x = _rand(rows)
    want = _plain(k, x)
    par = ParallelThunkCall(k, [x.shape, x.shape], pools[threads], chunks, threads, [0, 0])
    out = np.full_like(x, np.nan)
    assert par.function(x, out) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_allclose(out, (x * 0.999 + 0.001) * 2 + 1, rtol=1e-6)


def test_zero_rows_and_refused_operands(kernels, pools) -> None:
    k = kernels["fast"]
    x = np.empty((0, 37), np.float32)
    par = ParallelThunkCall(k, [(-1, 37), (-1, 37)], pools[4], 4, 4, [0, 0])
    assert par.function(x, np.empty_like(x)).shape == (0, 37)
    y = _rand(8)
    assert par.function(y, np.empty((8, 36), np.float32)) is None  # a dim that does not fit: nothing ran
    assert par.function(y[:, ::2], np.empty((8, 19), np.float32)) is None  # not C-contiguous
    with pytest.raises(fb.FusebindError, match="chunks must be in"):
        ParallelThunkCall(k, [(8, 37), (8, 37)], pools[2], 0, 2, [0, 0])


def test_concurrent_callers_from_8_python_threads(kernels, pools) -> None:
    """Callers that find the pool taken run their chunks themselves: same values, no waiting."""
    k = kernels["fast"]
    xs = [_rand(301, seed=s) for s in range(8)]
    wants = [_plain(k, x) for x in xs]
    par = ParallelThunkCall(k, [xs[0].shape, xs[0].shape], pools[2], 16, 2, [0, 0])
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def caller(i: int) -> None:
        try:
            start.wait()
            for _ in range(200):
                out = np.empty_like(xs[i])
                assert par.function(xs[i], out) is out
                np.testing.assert_array_equal(out, wants[i])
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads) and not errors, errors


@pytest.mark.parametrize("threads", (2, 8))
def test_a_kernel_error_in_a_chunk_raises_the_first_in_chunk_order(kernels, pools, threads) -> None:
    k = kernels["checked"]
    x = _rand(200)
    step = ThunkStep(k, [x.shape], [x.shape], True, threads, lambda t: pools[threads])
    if step.par is None:  # below SPLIT_THRESHOLD the step does not split: bind the parallel call itself
        step.par = ParallelThunkCall(step.thunk.kernel,
                                     [x.shape, x.shape, (16 * 4,)], pools[threads], 16, threads, [0, 0, 4])
        step.tasks, step.splits = 16, threads
    out = np.empty_like(x)
    step([x], [out])
    np.testing.assert_array_equal(out, _plain(kernels["fast"], x))
    bad = x.copy()
    bad[150, 3], bad[60, 0], bad[61, 1] = -7.0, -5.0, -9.0  # rows 60, 61 are in an earlier chunk than 150
    with pytest.raises(fb.IndexOutOfBounds, match=r"^fusebind: the test kernel: index 5 is out of bounds for axis 0 "
                                                  r"with size 1000 \(from kernel input #0; checked in the kernel") as info:
        step([bad], [np.empty_like(x)])
    assert isinstance(info.value, IndexError)
    step([x], [out])  # the pool and the step are fine after the error
    np.testing.assert_array_equal(out, _plain(kernels["fast"], x))


def test_the_pool_survives_a_keyboard_interrupt_during_a_long_call(kernels, pools) -> None:
    """The call runs with the GIL released; Ctrl-C arrives as KeyboardInterrupt once it returns
    (its output complete), and the pool serves the next call."""
    k = kernels["slow"]
    x = _rand(64, 512)
    par = ParallelThunkCall(k, [x.shape, x.shape], pools[2], 8, 2, [0, 0])
    out = np.empty_like(x)
    t0 = time.perf_counter()
    par.function(x, out)
    once = time.perf_counter() - t0
    want = out.copy()
    timer = threading.Timer(min(0.02, once / 4), _thread.interrupt_main)
    with pytest.raises(KeyboardInterrupt):
        timer.start()
        try:
            par.function(x, out)
            time.sleep(5)  # the interrupt lands here at the latest
        finally:
            timer.cancel()
    fresh = np.empty_like(x)
    assert par.function(x, fresh) is fresh
    np.testing.assert_array_equal(fresh, want)
    counts = np.zeros(9, np.int64)
    pools[2].run(_api().count, counts.ctypes.data, 9)
    assert counts.tolist() == [1] * 9


def test_the_process_pool_is_shared_and_sized_by_the_affinity_mask() -> None:
    import os

    p = process_pool()
    assert p is process_pool() is pool_for(2) is pool_for(64)
    assert p.threads == len(os.sched_getaffinity(0))


def test_a_jitted_split_call_runs_on_the_native_pool() -> None:
    """fb.jit with threads=2 above SPLIT_THRESHOLD: one parallel-for call (not the fast path, not
    Python threads), numpy's values, bitwise those of threads=1."""
    from fusebind.runtime.call import SPLIT_THRESHOLD

    rows = SPLIT_THRESHOLD // 64 + 3
    a, b = _rand(rows, 64, 1), _rand(rows, 64, 2)
    one = fb.jit(lambda a, b: np.maximum(a * b - 17.0, 0), threads=1)
    two = fb.jit(lambda a, b: np.maximum(a * b - 17.0, 0), threads=2)
    np.testing.assert_array_equal(two(a, b), one(a, b))
    np.testing.assert_array_equal(two(a, b), np.maximum(a * b - np.float32(17.0), 0))
    assert "split over 2 threads" in two.explain(a, b)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_a_row_reduction_kernel_is_bitwise_equal_at_1_2_4_8_threads(pools) -> None:
    """A jitted softmax (row-wise: max and sum over axis 1) is split by rows; each row is reduced
    by one thread in the kernel's own order, so the values are bitwise the same at any thread
    count and any chunking: the MLIR-compiled kernel itself, run through pools of 1, 2, 4, 8."""
    from fusebind.runtime.call import SPLIT_THRESHOLD, split_tasks

    rows = SPLIT_THRESHOLD // 257 + 3
    x = np.random.default_rng(5).standard_normal((rows, 257), dtype=np.float32) * np.float32(3)
    f = fb.jit(_softmax, threads=2)
    np.testing.assert_allclose(f(x), _softmax(x), rtol=2e-6, atol=1e-7)
    split = [d for d in f.executor(x).plan_for([x]).decisions if d.splits > 1]
    assert len(split) == 1 and "split over 2 threads" in f.explain(x), f.explain(x)
    kernel = split[0].kernel.row.kernel  # the resolved row's kernel (compiled for dynamic shapes)
    want = _plain(kernel, x)
    np.testing.assert_array_equal(f(x), want)
    for threads in THREADS:
        for chunks in (split_tasks(x.size, rows), 7, rows):
            par = ParallelThunkCall(kernel, [x.shape, x.shape], pools[threads], chunks, threads, [0, 0])
            out = np.empty_like(x)
            assert par.function(x, out) is out
            np.testing.assert_array_equal(out, want, err_msg=f"threads={threads} chunks={chunks}")


def test_a_forked_child_runs_split_calls_alone_and_gets_a_pool_of_its_own(kernels, pools) -> None:
    """The parent's workers do not exist in a forked child: a parallel call bound in the parent
    runs every chunk on the calling thread (it claims them all), and process_pool() is new."""
    import os

    k = kernels["fast"]
    x = _rand(97)
    want = _plain(k, x)
    par = ParallelThunkCall(k, [x.shape, x.shape], pools[4], 9, 4, [0, 0])
    parent_pool = process_pool()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        ok = 0
        try:
            out = np.empty_like(x)
            ok = int(par.function(x, out) is out and np.array_equal(out, want)
                     and process_pool() is not parent_pool and process_pool().threads == parent_pool.threads)
        finally:
            os.write(write, bytes([ok]))
            os._exit(0)
    os.close(write)
    got = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert got == b"\x01"
