"""The native thread pool: one process-wide parallel-for for large kernel calls.

Owns `pool_ir` (the LLVM IR of the pool: its worker loop and `fb_pool_run`,
the parallel-for entry), `NativePool` (a pool of native worker threads) and
`process_pool()` (the one pool of the process, shared by every session,
sized by the CPU affinity mask), `pool_for(threads)` (what a split call
runs on) and `PoolUnavailable`.

Why native: the Python-thread split (call.py `split_pool`) costs ~28-45 us
a hand-off (submit, future, chunk views, GIL hand-over), so it paid only
from ~5e5 elements and was capped at 4 threads. Here a hand-off is a store
and, for a sleeping worker, one futex wake: the workers are pthreads that
never touch the interpreter, the caller releases the GIL once for the whole
call (thunk.py), runs chunks itself and waits on the last one. Measured
numbers: docs/THREADS.md.

The protocol (all state in one 512-byte block, `_OFF`):
- a job is (task fn, env, ntasks, width). The caller takes the pool with a
  try-lock (`busy`); when another caller holds it (concurrent Python
  threads, a call from inside a task) it runs every task itself, in order:
  same values, no waiting, no deadlock.
- tasks are claimed by compare-and-swap on one packed word
  (job id 24 bits | ntasks 20 | next index 20): a worker that woke late for
  an old job sees another job id and claims nothing, so a task never runs
  twice and never against another job's env.
- `remaining` counts unfinished tasks; whoever finishes the last one sets
  `done` and futex-wakes the caller if it went to sleep.
- idle workers spin `spin` rounds on `gen` (the job counter, their futex
  word), then sleep in FUTEX_WAIT; the caller wakes them only when some
  sleep (`sleepers`). Workers with index >= width - 1 skip a job.
Chunking is the caller's (thunk.py): fixed by the call's size, never by the
thread count, so which thread runs a chunk never changes a value.

Platform: Linux on x86-64 or AArch64 (the futex syscall number and the spin
hint are per architecture); elsewhere `PoolUnavailable`, and split calls use
the Python-thread pool (call.py). A forked child gets a fresh pool on first
use (the parent's workers do not exist in it).

Must not: decide what is split or how (steps.py, thunk.py), or import the
compiler or the dialect.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import time
from typing import Any

import numpy as np

from fusebind.dialect.errors import FusebindError, FusebindValueError

#: futex syscall numbers and spin hints of the architectures the pool supports
#: (the spin hint is an intrinsic: llvmlite's object emitter has no inline-asm parser)
_PAUSE_X86 = ("declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()")
_YIELD_ARM = ("declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)")
_ARCH = {"x86_64": (202, _PAUSE_X86), "amd64": (202, _PAUSE_X86), "aarch64": (98, _YIELD_ARM),
         "arm64": (98, _YIELD_ARM)}
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
#: byte offsets in the pool block; the claim word and the counters sit on their own cache lines
_OFF = {"gen": 0, "stop": 4, "sleepers": 8, "width": 12, "fn": 16, "env": 24, "spin": 32,
        "word": 64, "remaining": 128, "done": 136, "busy": 140, "caller_sleeping": 144,
        "exited": 192}
_BLOCK = 512
#: at most this many tasks a job (the claim word's 20-bit fields)
MAX_TASKS = (1 << 20) - 1
#: spin rounds before sleeping (one round: a load and a pause, ~10-40 ns): ~20-50 us,
#: about one hand-off window; longer spins burn a shared core (docs/THREADS.md)
DEFAULT_SPIN = 2000


class PoolUnavailable(FusebindError, RuntimeError):
    """The native pool cannot run on this platform or could not be built."""


def _arch() -> tuple[int, tuple[str, str]]:
    machine = platform.machine().lower()
    if not sys.platform.startswith("linux") or machine not in _ARCH or sys.maxsize != 2 ** 63 - 1:
        raise PoolUnavailable(f"the native pool needs 64-bit Linux on x86-64 or AArch64 (futex); this is "
                              f"{sys.platform}/{machine}: split calls use Python threads")
    return _ARCH[machine]


def pool_ir(futex_nr: int, hint: tuple[str, str]) -> str:
    """LLVM IR of the pool (see the module docstring); `fb_pool_api(out)` writes the
    addresses of the worker entry and of `fb_pool_run` to out[0], out[1]."""
    o = _OFF
    return f"""
declare i64 @syscall(i64, ...)
{hint[0]}

define internal void @futex_wait(ptr %w, i32 %v) {{
  %r = call i64 (i64, ...) @syscall(i64 {futex_nr}, ptr %w, i32 {_FUTEX_WAIT_PRIVATE}, i32 %v, ptr null, ptr null, i32 0)
  ret void
}}

define internal void @futex_wake(ptr %w, i32 %n) {{
  %r = call i64 (i64, ...) @syscall(i64 {futex_nr}, ptr %w, i32 {_FUTEX_WAKE_PRIVATE}, i32 %n, ptr null, ptr null, i32 0)
  ret void
}}

; claim and run tasks of job `job` until none is left (the caller and every worker run this)
define internal void @run_tasks(ptr %pool, i32 %job) {{
entry:
  %wp = getelementptr i8, ptr %pool, i64 {o['word']}
  %fnp = getelementptr i8, ptr %pool, i64 {o['fn']}
  %envp = getelementptr i8, ptr %pool, i64 {o['env']}
  %remp = getelementptr i8, ptr %pool, i64 {o['remaining']}
  %donep = getelementptr i8, ptr %pool, i64 {o['done']}
  %csp = getelementptr i8, ptr %pool, i64 {o['caller_sleeping']}
  %job64 = zext i32 %job to i64
  %jobid = and i64 %job64, 16777215
  br label %claim
claim:
  %w = load atomic i64, ptr %wp acquire, align 8
  %wj = lshr i64 %w, 40
  %wn0 = lshr i64 %w, 20
  %wn = and i64 %wn0, 1048575
  %wc = and i64 %w, 1048575
  %samejob = icmp eq i64 %wj, %jobid
  %left = icmp ult i64 %wc, %wn
  %can = and i1 %samejob, %left
  br i1 %can, label %cas, label %out
cas:
  %w1 = add i64 %w, 1
  %pair = cmpxchg ptr %wp, i64 %w, i64 %w1 acq_rel acquire
  %won = extractvalue {{ i64, i1 }} %pair, 1
  br i1 %won, label %run, label %claim
run:
  %fn = load ptr, ptr %fnp
  %env = load ptr, ptr %envp
  call void %fn(ptr %env, i64 %wc)
  %old = atomicrmw sub ptr %remp, i64 1 acq_rel
  %last = icmp eq i64 %old, 1
  br i1 %last, label %finish, label %claim
finish:
  store atomic i32 1, ptr %donep seq_cst, align 4
  %cs = load atomic i32, ptr %csp seq_cst, align 4
  %sleeping = icmp ne i32 %cs, 0
  br i1 %sleeping, label %wake, label %out
wake:
  call void @futex_wake(ptr %donep, i32 1)
  br label %out
out:
  ret void
}}

define internal ptr @fb_pool_worker(ptr %arg) {{
entry:
  %pool = load ptr, ptr %arg
  %idxp = getelementptr i8, ptr %arg, i64 8
  %idx = load i64, ptr %idxp
  %genp = getelementptr i8, ptr %pool, i64 {o['gen']}
  %stopp = getelementptr i8, ptr %pool, i64 {o['stop']}
  %slp = getelementptr i8, ptr %pool, i64 {o['sleepers']}
  %widthp = getelementptr i8, ptr %pool, i64 {o['width']}
  %spinp = getelementptr i8, ptr %pool, i64 {o['spin']}
  %spin = load i64, ptr %spinp
  %seenv = alloca i32
  %iv = alloca i64
  %g0 = load atomic i32, ptr %genp acquire, align 4
  store i32 %g0, ptr %seenv
  br label %idle
idle:
  store i64 0, ptr %iv
  br label %spinloop
spinloop:
  %seen = load i32, ptr %seenv
  %g = load atomic i32, ptr %genp acquire, align 4
  %changed = icmp ne i32 %g, %seen
  br i1 %changed, label %got, label %spinmore
spinmore:
  {hint[1]}
  %i = load i64, ptr %iv
  %i1 = add i64 %i, 1
  store i64 %i1, ptr %iv
  %more = icmp ult i64 %i1, %spin
  br i1 %more, label %spinloop, label %sleep
sleep:
  %s0 = atomicrmw add ptr %slp, i32 1 seq_cst
  %seen2 = load i32, ptr %seenv
  call void @futex_wait(ptr %genp, i32 %seen2)
  %s1 = atomicrmw sub ptr %slp, i32 1 seq_cst
  br label %idle
got:
  store i32 %g, ptr %seenv
  %stop = load atomic i32, ptr %stopp acquire, align 4
  %stopping = icmp ne i32 %stop, 0
  br i1 %stopping, label %exit, label %check
check:
  %width = load atomic i32, ptr %widthp acquire, align 4
  %w64 = sext i32 %width to i64
  %me = add i64 %idx, 1
  %takes = icmp slt i64 %me, %w64
  br i1 %takes, label %work, label %idle
work:
  call void @run_tasks(ptr %pool, i32 %g)
  br label %idle
exit:
  %exp = getelementptr i8, ptr %pool, i64 {o['exited']}
  %ex = atomicrmw add ptr %exp, i32 1 seq_cst
  ret ptr null
}}

; stop the workers: set `stop`, move `gen` on, wake every sleeper (close calls it until all exited)
define internal void @fb_pool_stop(ptr %pool) {{
  %genp = getelementptr i8, ptr %pool, i64 {o['gen']}
  %stopp = getelementptr i8, ptr %pool, i64 {o['stop']}
  store atomic i32 1, ptr %stopp seq_cst, align 4
  %g = atomicrmw add ptr %genp, i32 1 seq_cst
  call void @futex_wake(ptr %genp, i32 2147483647)
  ret void
}}

; run fn(env, c) for c in [0, ntasks) on the pool's workers and the calling thread, at most `width` at once
define internal void @fb_pool_run(ptr %pool, ptr %fn, ptr %env, i64 %ntasks, i32 %width) {{
entry:
  %genp = getelementptr i8, ptr %pool, i64 {o['gen']}
  %slp = getelementptr i8, ptr %pool, i64 {o['sleepers']}
  %widthp = getelementptr i8, ptr %pool, i64 {o['width']}
  %fnp = getelementptr i8, ptr %pool, i64 {o['fn']}
  %envp = getelementptr i8, ptr %pool, i64 {o['env']}
  %spinp = getelementptr i8, ptr %pool, i64 {o['spin']}
  %wp = getelementptr i8, ptr %pool, i64 {o['word']}
  %remp = getelementptr i8, ptr %pool, i64 {o['remaining']}
  %donep = getelementptr i8, ptr %pool, i64 {o['done']}
  %busyp = getelementptr i8, ptr %pool, i64 {o['busy']}
  %csp = getelementptr i8, ptr %pool, i64 {o['caller_sleeping']}
  %cv = alloca i64
  store i64 0, ptr %cv
  %none = icmp sle i64 %ntasks, 0
  br i1 %none, label %ret, label %chk
chk:
  %narrow = icmp sle i32 %width, 1
  %one = icmp eq i64 %ntasks, 1
  %big = icmp sgt i64 %ntasks, {MAX_TASKS}
  %s1 = or i1 %narrow, %one
  %s2 = or i1 %s1, %big
  br i1 %s2, label %serial, label %lock
lock:
  %lk = cmpxchg ptr %busyp, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %lk, 1
  br i1 %got, label %post, label %serial
serial:
  %c = load i64, ptr %cv
  %cdone = icmp sge i64 %c, %ntasks
  br i1 %cdone, label %ret, label %serial.body
serial.body:
  call void %fn(ptr %env, i64 %c)
  %c1 = add i64 %c, 1
  store i64 %c1, ptr %cv
  br label %serial
post:
  store ptr %fn, ptr %fnp
  store ptr %env, ptr %envp
  store i64 %ntasks, ptr %remp
  store i32 0, ptr %donep
  store atomic i32 %width, ptr %widthp release, align 4
  %g = load i32, ptr %genp
  %g1 = add i32 %g, 1
  %j64 = zext i32 %g1 to i64
  %jid = and i64 %j64, 16777215
  %jhi = shl i64 %jid, 40
  %nhi = shl i64 %ntasks, 20
  %word = or i64 %jhi, %nhi
  store atomic i64 %word, ptr %wp release, align 8
  store atomic i32 %g1, ptr %genp seq_cst, align 4
  %sl = load atomic i32, ptr %slp seq_cst, align 4
  %anyasleep = icmp sgt i32 %sl, 0
  br i1 %anyasleep, label %wakeall, label %mine
wakeall:
  call void @futex_wake(ptr %genp, i32 2147483647)
  br label %mine
mine:
  call void @run_tasks(ptr %pool, i32 %g1)
  %spin = load i64, ptr %spinp
  br label %wait
wait:
  %d = load atomic i32, ptr %donep acquire, align 4
  %isdone = icmp ne i32 %d, 0
  br i1 %isdone, label %unlock, label %wait.spin
wait.spin:
  {hint[1]}
  %k = load i64, ptr %cv
  %k1 = add i64 %k, 1
  store i64 %k1, ptr %cv
  %morespin = icmp ult i64 %k1, %spin
  br i1 %morespin, label %wait, label %wait.sleep
wait.sleep:
  store atomic i32 1, ptr %csp seq_cst, align 4
  %d2 = load atomic i32, ptr %donep seq_cst, align 4
  %isdone2 = icmp ne i32 %d2, 0
  br i1 %isdone2, label %woke, label %wait.futex
wait.futex:
  call void @futex_wait(ptr %donep, i32 0)
  br label %wait.sleep
woke:
  store atomic i32 0, ptr %csp seq_cst, align 4
  br label %unlock
unlock:
  store atomic i32 0, ptr %busyp release, align 4
  br label %ret
ret:
  ret void
}}

; a task that does nothing (hand-off measurements and tests)
define internal void @fb_pool_nop(ptr %env, i64 %c) {{
  ret void
}}

; a test task: env is an i64 array; adds 1 to env[c] (atomically: a chunk run twice shows as 2)
define internal void @fb_pool_count(ptr %env, i64 %c) {{
  %p = getelementptr i64, ptr %env, i64 %c
  %o = atomicrmw add ptr %p, i64 1 seq_cst
  ret void
}}

define void @fb_pool_api(ptr %out) {{
  store ptr @fb_pool_worker, ptr %out
  %o1 = getelementptr ptr, ptr %out, i64 1
  store ptr @fb_pool_run, ptr %o1
  %o2 = getelementptr ptr, ptr %out, i64 2
  store ptr @fb_pool_nop, ptr %o2
  %o3 = getelementptr ptr, ptr %out, i64 3
  store ptr @fb_pool_count, ptr %o3
  %o4 = getelementptr ptr, ptr %out, i64 4
  store ptr @fb_pool_stop, ptr %o4
  ret void
}}
"""


class _Api:
    """The linked pool code: its entry addresses (kept for the life of the process)."""

    def __init__(self) -> None:
        from fusebind.lowering.codegen import compile_llvm_ir
        from fusebind.runtime.loader import load_object

        futex_nr, hint = _arch()
        try:
            self.loaded = load_object(compile_llvm_ir(pool_ir(futex_nr, hint), "fb_pool_api"), "fb_pool_api",
                                      lasting=True)  # (one pool per process)
        except FusebindError as exc:  # LoweringError, ObjectLoadError
            raise PoolUnavailable(f"could not build the native pool: {type(exc).__name__}: {exc}") from exc
        table = (ctypes.c_void_p * 5)()
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.loaded.address)(ctypes.addressof(table))
        self.worker, self.run, self.nop, self.count, stop = (int(a) for a in table)
        self.stop = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(stop)
        #: `fb_pool_run` through ctypes (tests, measurements; the thunk calls it natively)
        self.run_c = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int32)(self.run)
        libc = ctypes.CDLL(None, use_errno=True)
        self.pthread_create = libc.pthread_create
        self.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_void_p]
        self.pthread_join = libc.pthread_join
        self.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]


_API: _Api | None = None
_API_LOCK = threading.Lock()


def _api() -> _Api:
    global _API
    if _API is None:
        with _API_LOCK:
            if _API is None:
                _API = _Api()
    return _API


class NativePool:
    """A pool of `threads - 1` native workers; the calling thread is the other one.

    `handle` is the address of its state block and `run_address` that of
    `fb_pool_run(pool, fn, env, ntasks, width)`, which the call thunk calls
    with the GIL released. `run(fn, env, ntasks, width)` calls it through
    ctypes (tests, measurements). `close()` stops and joins the workers (the
    process pool is never closed: its workers sleep in the kernel when idle).
    """

    def __init__(self, threads: int, *, spin: int = DEFAULT_SPIN) -> None:
        if not isinstance(threads, int) or threads < 1:
            raise FusebindValueError(f"NativePool needs threads >= 1 (the caller counts as one), got {threads!r}")
        api = _api()
        self.threads = threads
        self._block = np.zeros(_BLOCK // 8 + 8, dtype=np.int64)  # + 64 bytes: aligned to a cache line
        base = self._block.ctypes.data
        self.handle = (base + 63) & ~63
        ctypes.c_int64.from_address(self.handle + _OFF["spin"]).value = int(spin)
        self.run_address = api.run
        self._args = np.zeros((max(threads - 1, 1), 2), dtype=np.int64)
        self._tids: list[int] = []
        self._pid = os.getpid()
        self._closed = False
        for i in range(threads - 1):
            self._args[i] = (self.handle, i)
            tid = ctypes.c_ulong()
            rc = api.pthread_create(ctypes.byref(tid), None, api.worker, self._args[i].ctypes.data)
            if rc != 0:
                self.close()
                raise PoolUnavailable(f"pthread_create failed (error {rc}) starting worker {i + 1} of "
                                      f"{threads - 1}: split calls use Python threads")
            self._tids.append(tid.value)

    def run(self, fn: int, env: int, ntasks: int, width: int | None = None) -> None:
        """Run task `fn(env, c)` for c in [0, ntasks) (GIL released by ctypes)."""
        if self._closed:
            raise FusebindValueError("this NativePool is closed")
        _api().run_c(self.handle, fn, env, int(ntasks), int(self.threads if width is None else width))

    def close(self) -> None:
        """Stop and join the workers (their thread block stays valid: late callers run serially)."""
        if self._closed or os.getpid() != self._pid:
            self._closed = True
            return
        self._closed = True
        api = _api()
        exited = ctypes.c_int32.from_address(self.handle + _OFF["exited"])
        ctypes.c_int32.from_address(self.handle + _OFF["busy"]).value = 1  # no new job takes the pool
        # each round: stop, gen moved on, every sleeper woken; until all left. One round is not
        # enough: a worker that starts late (a loaded host) takes the gen it first reads as seen
        # and would wait for the next change forever.
        for _ in range(10_000):
            api.stop(self.handle)
            if exited.value >= len(self._tids):
                break
            time.sleep(0.0005)
        for tid in self._tids:
            api.pthread_join(tid, None)
        self._tids.clear()


def affinity_threads() -> int:
    """How many CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_PROCESS_POOL: NativePool | None = None
_PROCESS_LOCK = threading.Lock()


def process_pool() -> NativePool:
    """The process's pool, sized by the affinity mask at its creation (created on first use).
    `PoolUnavailable` on an unsupported platform."""
    global _PROCESS_POOL
    pool = _PROCESS_POOL
    if pool is not None and pool._pid == os.getpid():
        return pool
    with _PROCESS_LOCK:
        pool = _PROCESS_POOL
        if pool is None or pool._pid != os.getpid():  # a forked child: the parent's workers are not here
            pool = NativePool(affinity_threads())
            _PROCESS_POOL = pool
        return pool


def native_pool_available() -> bool:
    """Whether the native pool can run here (builds it on first call)."""
    try:
        process_pool()
    except PoolUnavailable:
        return False
    return True


def pool_for(threads: int) -> Any:
    """What a call split over `threads` runs on: the process pool (the call uses at most
    `min(threads, pool.threads)` of it), else the Python-thread pool (call.split_pool)."""
    try:
        return process_pool()
    except PoolUnavailable:
        from fusebind.runtime.call import split_pool

        return split_pool(threads)


__all__ = ["DEFAULT_SPIN", "MAX_TASKS", "NativePool", "PoolUnavailable", "affinity_threads", "native_pool_available",
           "pool_for", "pool_ir", "process_pool"]
