"""Issue 19, concurrency with the new parts: the split pool (whichever is current: the Python
pool of runtime/call.py or the native one of the performance issue), the background JIT and
8 caller threads at once, over a mix of shapes, most of them large enough to take the split
path (>= SPLIT_THRESHOLD elements). No deadlock (every join has a watchdog) and every value
is numpy's. A KeyboardInterrupt during a parallel call leaves the pool usable: the next call
is correct. Written against the public path (fb.jit of a big elementwise function) so it
runs on whichever pool is current.
"""

from __future__ import annotations

import _thread
import sys
import threading
import time
from typing import Any, Callable

import numpy as np
import pytest

from conftest import run_threads, scaled

WATCHDOG_S = 240.0
#: (rows, cols): three take the split path (>= 500,000 elements, rows >= threads), one does not
SHAPES = [(512, 1024), (640, 800), (1000, 520), (8, 64)]
CALLER_THREADS = 8


def _functions() -> list[tuple[str, Callable[..., Any], Any]]:
    import fusebind as fb

    def muladd(x: Any, y: Any) -> Any:
        return np.maximum(x * y + x, 0.0)

    def tanhsub(x: Any, y: Any) -> Any:
        return fb.tanh(x) * 0.5 - y

    return [
        ("muladd", lambda x, y: np.maximum(x * y + x, np.float32(0)), fb.jit(muladd, background=True, threads=2)),
        ("tanhsub", lambda x, y: np.tanh(x) * np.float32(0.5) - y,
         fb.jit(tanhsub, background=True, threads=2, dynamic=True)),
    ]


@pytest.fixture(scope="module")
def functions() -> list[tuple[str, Callable[..., Any], Any]]:
    return _functions()


def _operands(shape: tuple[int, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape, np.float32), rng.standard_normal(shape, np.float32)


def _shown(errors: list[BaseException]) -> str:
    """The first errors with their tracebacks (a thread's failure must say where)."""
    import traceback

    return "\n".join("".join(traceback.format_exception(e)) for e in errors[:2])


def _check(name: str, got: np.ndarray, want: np.ndarray, shape: Any) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (name, shape, got.dtype, got.shape)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=f"{name} at {shape}")


def test_eight_callers_and_the_background_jit_over_split_and_small_shapes(functions: list[Any]) -> None:
    rounds = scaled(3, 20)
    inputs = {(s, k): _operands(s, k) for s in SHAPES for k in range(2)}
    wants = {(name, s, k): ref(*inputs[s, k]) for name, ref, _ in functions for s in SHAPES for k in range(2)}

    def caller(me: int) -> Callable[[], None]:
        def run() -> None:
            for r in range(rounds):
                for j, (name, _ref, fn) in enumerate(functions):
                    shape = SHAPES[(me + r + j) % len(SHAPES)]
                    k = (me + r) % 2
                    _check(name, fn(*inputs[shape, k]), wants[name, shape, k], shape)
        return run

    errors = run_threads([caller(i) for i in range(CALLER_THREADS)], WATCHDOG_S)
    assert errors == [], _shown(errors)
    for _name, _ref, fn in functions:
        assert fn.wait_compiled(WATCHDOG_S), "the background JIT did not finish (deadlock?)"
    # after adoption every shape runs fused, still numpy's answer, split calls included
    errors = run_threads([caller(i) for i in range(CALLER_THREADS)], WATCHDOG_S)
    assert errors == [], _shown(errors)
    assert sum(fn.stats.fused_calls for _n, _r, fn in functions) > 0


def test_a_keyboard_interrupt_during_a_split_call_leaves_the_pool_usable(functions: list[Any]) -> None:
    """Interrupt the main thread (as Ctrl-C does) while it is inside big split calls; the
    interrupt must surface as KeyboardInterrupt, and the calls after it (this thread's and
    eight others') must be numpy's answer."""
    name, ref, fn = functions[0]
    shape = SHAPES[0]
    x, y = _operands(shape, 7)
    want = ref(x, y)
    x2, y2 = _operands(shape, 8)  # after an interrupt, other operands: a stale chunk's write would show
    want2 = ref(x2, y2)
    _check(name, fn(x, y), want, shape)
    assert fn.wait_compiled(WATCHDOG_S)
    _check(name, fn(x, y), want, shape)  # the fused, split kernel from here on
    interrupted = 0
    for delay in (0.0005, 0.001, 0.002, 0.004)[:scaled(2, 4)]:
        timer = threading.Timer(delay, _thread.interrupt_main)
        try:  # started inside: under load the interrupt can land while start() waits for the thread
            timer.start()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                fn(x, y)
        except KeyboardInterrupt:
            interrupted += 1
        finally:
            timer.cancel()
        timer.join(5)  # it fired (the interrupt was caught above) or was cancelled
        _check(name, fn(x2, y2), want2, shape)  # the very next call is correct
    assert interrupted == len((0.0005, 0.001, 0.002, 0.004)[:scaled(2, 4)])

    def caller() -> None:
        for _ in range(3):
            _check(name, fn(x, y), want, shape)

    errors = run_threads([caller for _ in range(CALLER_THREADS)], WATCHDOG_S)
    assert errors == [], _shown(errors)


def test_a_new_trace_in_another_thread_while_a_dynamic_trace_takes_over() -> None:
    """Deterministic form of a race the 8-caller test hit: thread B's first call at a new shape
    lands while thread A, whose call made the dynamic trace, moves the earlier static traces to it."""
    import fusebind as fb
    from fusebind.runtime import specialize

    def scaled_add(x: Any, y: Any) -> Any:
        return x * 3.0 + y

    f = fb.jit(scaled_add)  # automatic: the second distinct shape makes a dynamic trace
    a, b, c = (np.ones((s, 4), np.float32) for s in (2, 3, 5))
    np.testing.assert_array_equal(f(a, a), a * 3 + a)
    real = specialize.fingerprint
    other: list[Any] = []

    def fingerprint(*args: Any, **kwargs: Any) -> Any:  # thread A, inside the move: thread B calls
        if not other and sys._getframe(1).f_code.co_name == "_redirect":
            t = threading.Thread(target=lambda: other.append(f(c.reshape(1, 20), c.reshape(1, 20))))
            t.start()
            t.join(WATCHDOG_S)
            assert not t.is_alive(), "the other caller hung"
        return real(*args, **kwargs)

    specialize.fingerprint, saved = fingerprint, specialize.fingerprint
    try:
        got = f(b, b)
    finally:
        specialize.fingerprint = saved
    np.testing.assert_array_equal(got, b * 3 + b)
    np.testing.assert_array_equal(other[0], c.reshape(1, 20) * 3 + c.reshape(1, 20))
