"""How each step kind calls its kernel, and the values steps pass around.

Owns the environment types (`Env`, `Step`, `Alloc`), the alignment rule
(`contig`: kernels get C-contiguous, aligned arrays; anything else runs
through an aligned copy, as numpy's own loops do), and the fused-arm call
kinds: `ThunkStep` (one native call through the thunk; large splittable
calls one parallel-for call on the native pool, pool.py, or in chunks on
the Python split pool where there is none), `GuardedStep` (a Python
callback kernel, called so that what it raised is re-raised) and
`DescriptorStep` (prepared ctypes descriptors, when no thunk can be made),
and `FastPath` (the whole plan as one thunk call the executor makes itself; for
a small output, `FastPath.native`, the thunk's one-call entry, also checks
the table generation and allocates the output natively).

These are on the hot path: they do what the call needs and nothing more
(no clock unless profiling, no validation: the executor validated).

Kernel ABI v2 (a kernel with a status operand, docs/KERNEL-ABI.md): every
call kind gives each call (each chunk of a split call) its own zeroed status
array and raises `fb.IndexOutOfBounds` when the kernel set it (the first
chunk in order that did, so the first bad index in loop order), before any
output is returned. The thunk is built for the kernel's v1 view
(`FlatKernel`: the status is one more output), so it checks the status
array like any operand and the call stays one native call.

Must not: choose arms or verify (arms.py), decide buffers (builder.py), or
validate user input (executor.py).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from fusebind.dialect.errors import FusebindInternalError
from fusebind.runtime.arguments import fast_out_ok
from fusebind.runtime.call import (PY_SPLIT_THRESHOLD, RECYCLE_MIN_BYTES, SPLIT_THRESHOLD, KernelCall, output_allocator,
                                   split_pool, split_tasks)
from fusebind.lowering.abi import STATUS_WORDS
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.kernel import FlatKernel, new_status, status_error
from fusebind.runtime.session import default_session
from fusebind.runtime.pool import NativePool
from fusebind.runtime.thunk import ANY_DIM, ParallelThunkCall, ThunkCall

Env = list[Any]
Step = Callable[[Env], None]
Alloc = Callable[[Env], np.ndarray]


def static_shape(value: Any) -> tuple[int, ...] | None:
    from fusebind.dialect.types import is_static, shape_of

    s = shape_of(value.type)
    return tuple(int(d) for d in s) if is_static(s) else None  # type: ignore[arg-type]


def np_dtype(value: Any) -> np.dtype:
    from fusebind.dialect.types import elem_of, numpy_dtype

    return numpy_dtype(elem_of(value.type))


def contig(a: Any) -> np.ndarray:
    """`a` as a C-contiguous, aligned array: a copy when it is not both (an
    unaligned view, e.g. `np.frombuffer(buf, offset=1)`, runs through an
    aligned copy, as numpy's own loops do; kernels assume aligned elements)."""
    flags = a.flags
    if flags.c_contiguous and flags.aligned:
        return a
    return np.array(a, order="C", copy=True)


class FastPath:
    """The whole plan as one native call. `call(args, out)` is the one fast
    call path (the executor and the API callables all use it): the result,
    or None when the fast path does not apply (take the slow path). It runs
    `args` (a sequence of arrays, the plan's inputs) into a fresh output, or
    into `out` when `fast_out_ok` shows it cannot overlap an input; None when
    nothing ran (the table moved, an argument does not fit the thunk, or
    `out` needs the slow path's exact checks). `call` is a plain function
    (a closure over the thunk, allocator and session, made once), not a
    method: a caller may keep it, and each call pays no attribute lookups.

    Valid while the table generation of `session` equals `generation` (both
    fixed at construction: `call` closes over them).
    `function(*args, out)` is the raw thunk: `out` when the kernel ran, None
    when an argument did not fit. `alloc()` gives the output of one call
    (recycled when large: call.py); large calls use the thunk's GIL-releasing
    entry, so other Python threads run meanwhile. `calls` counts the calls
    that ran; with `profile`, `function` also adds the kernel call's time to
    `seconds` (without it, `function` is the bare thunk: nothing is timed)."""

    __slots__ = ("generation", "session", "function", "shape", "dtype", "alloc", "_count", "seconds", "thunk", "call",
                 "names", "native", "_native_ctx")

    def __init__(self, generation: int, thunk: ThunkCall, shape: tuple[int, ...], dtype: np.dtype,
                 alloc: Callable[[], np.ndarray] | None = None, profile: bool = False,
                 session: Any = None) -> None:
        self.generation = generation
        #: whose table `generation` is of (None: the default session)
        self.session = session if session is not None else default_session()
        self.thunk = thunk  # keeps the kernel alive
        large = int(np.prod(shape)) * np.dtype(dtype).itemsize >= RECYCLE_MIN_BYTES
        raw = thunk.released if large else thunk.function
        self.function = self._timed(raw) if profile else raw
        self.shape = shape
        self.dtype = dtype
        self.alloc = alloc if alloc is not None else output_allocator(shape, dtype)[0]
        self._count = [0]  # a cell the closure bumps (no reference back to self: no cycle)
        self.seconds = 0.0
        #: a cell: None, or (function name, argument names) when kernel input k is that function's
        #: argument k (set by whoever runs the plan), for the words of an ABI v2 kernel's error
        self.names: list[Any] = [None]
        kernel = thunk.kernel
        #: the one-call entry (thunk.py `ThunkCall.entry`): `native(*args)` checks the generation,
        #: allocates the output and runs, in one native call; None where it does not apply (large
        #: outputs are recycled, profiling times in Python, ABI v2 checks a status after the call)
        self.native = None
        self._native_ctx: Any = None
        if not large and not profile and not isinstance(kernel, FlatKernel):
            entry = thunk.entry(self.session, generation, dtype)
            if entry is not None:
                self.native, self._native_ctx = entry
        if isinstance(kernel, FlatKernel):  # ABI v2: a status per call, checked before returning
            self.call = _fast_status_call(self.function, self.alloc, self.session, generation, self._count,
                                          kernel.kernel, self.names)
        else:
            self.call = _fast_call(self.function, self.alloc, self.session, generation, self._count, self.native)

    def name_arguments(self, function: str, arguments: Any) -> None:
        """Kernel input k is argument k of `function`: errors of an ABI v2 kernel name them."""
        self.names[0] = (function, list(arguments))

    @property
    def calls(self) -> int:
        """The calls that ran on this fast path (the one-call entry counts its own)."""
        ctx = self._native_ctx
        return self._count[0] + (0 if ctx is None else int(ctx[7]))

    def _timed(self, raw: Callable[..., Any]) -> Callable[..., Any]:
        clock = time.perf_counter

        def timed(*args: Any) -> Any:
            t = clock()
            result = raw(*args)
            if result is not None:  # a declined call ran nothing: the slow path times it
                self.seconds += clock() - t
            return result
        return timed



def _fast_call(function: Callable[..., Any], alloc: Callable[[], np.ndarray], session: Any, generation: int,
               count: list[int], native: Callable[..., Any] | None = None) -> Callable[[Any, Any], Any]:
    """`FastPath.call` (see there): everything it reads is a local of the closure. `native`: the
    one-call entry, which checks the generation, allocates and counts itself."""
    def call(args: Any, out: Any = None) -> Any:
        if out is None and native is not None:
            return native(*args)
        if session.table.generation != generation:
            return None
        if out is None:
            o = alloc()
            if function(*args, o) is not None:
                count[0] += 1
                return o
            return None
        if fast_out_ok(args, out) and function(*args, out) is not None:
            count[0] += 1
            return out
        return None
    return call


def _fast_status_call(function: Callable[..., Any], alloc: Callable[[], np.ndarray], session: Any, generation: int,
                      count: list[int], kernel: Any, names: list[Any]) -> Callable[[Any, Any], Any]:
    """`FastPath.call` of an ABI v2 kernel: the thunk takes this call's status as its last
    operand (and returns it); a set status raises, so the output is never returned."""
    def call(args: Any, out: Any = None) -> Any:
        if session.table.generation != generation:
            return None
        if out is None:
            o = alloc()
        elif fast_out_ok(args, out):
            o = out
        else:
            return None
        status = new_status()
        if function(*args, o, status) is None:
            return None
        if status[0]:
            raise status_error(kernel, status, names[0], args)  # type: ignore[misc]
        count[0] += 1
        return o
    return call


def raise_for_status(kernel: Any, status: np.ndarray, inputs: Any = None) -> None:
    """Raise the `fb.IndexOutOfBounds` a set status of `kernel` (an ABI v2 kernel) reports;
    `inputs`: the call's input arrays (the executor names the argument among them)."""
    err = status_error(kernel, status, None, inputs)
    if err is not None:
        raise err


class ThunkStep:
    """A fused-arm call through the thunk; large splittable calls in chunks.
    An ABI v2 kernel: each call (each chunk) passes its own status, checked after the call.

    A splittable call of at least SPLIT_THRESHOLD elements, when `pool(threads)` is the
    native pool (pool.py), is one parallel-for thunk call (`ParallelThunkCall`): `tasks`
    chunks fixed by the call's size (`split_tasks`), run by at most `splits` threads
    (min(threads, the pool's)). Without the native pool (Python threads), calls of at least
    PY_SPLIT_THRESHOLD elements are cut into `threads` chunks submitted to that pool."""

    def __init__(self, kernel: Any, in_shapes: list[tuple[int, ...]], out_shapes: list[tuple[int, ...]],
                 splittable: bool, threads: int, pool: Callable[[int], Any] = split_pool) -> None:
        self.kernel = kernel
        self.status = bool(kernel.signature.status)
        target = FlatKernel(kernel) if self.status else kernel
        extra = [(STATUS_WORDS,)] if self.status else []
        self.thunk = ThunkCall(target, [*in_shapes, *out_shapes, *extra])
        self.pool = pool  # threads -> the worker pool (the backend's `split_pool`)
        # the work, not the output: a tree reduction's inner stage reads chunks x rows, writes chunks
        out_numel = max((int(np.prod(s)) for s in (*in_shapes, *out_shapes)), default=0)
        lead = out_shapes[0][0] if out_shapes and out_shapes[0] else 0
        self.chunks = self.splits = self.tasks = 1
        self.par: ParallelThunkCall | None = None
        if splittable and threads > 1 and lead > 1 and out_numel >= SPLIT_THRESHOLD:
            workers = pool(threads)
            if isinstance(workers, NativePool):
                tasks = split_tasks(out_numel, lead)
                width = min(threads, workers.threads, tasks)  # no more threads than chunks
                if width > 1 and tasks > 1:
                    n_ops = len(in_shapes) + len(out_shapes)
                    blocks = [0] * n_ops + [STATUS_WORDS] * self.status
                    self.par = ParallelThunkCall(target, [*in_shapes, *out_shapes, *([(tasks * STATUS_WORDS,)] * self.status)],
                                                 workers, tasks, width, blocks)
                    self.splits, self.tasks = width, tasks
            elif out_numel >= PY_SPLIT_THRESHOLD and lead >= threads:
                self.chunks = self.splits = self.tasks = threads
        #: the raw thunk when a call is just it (whole, no status): `plain(*ins, *outs)` runs the
        #: kernel, or returns None for operands it refuses (then call the step, which converts)
        self.plain = self.thunk.function if self.par is None and not self.status and self.chunks == 1 else None
        self.bounds = [lead * c // self.chunks for c in range(self.chunks + 1)]
        if self.chunks > 1:  # chunks: any leading size
            self.chunk_thunk = ThunkCall(target, [(ANY_DIM, *s[1:]) for s in (*in_shapes, *out_shapes)] + extra)

    def __call__(self, ins: list[Any], outs: list[np.ndarray]) -> None:
        plain = self.plain
        if plain is not None:
            if plain(*ins, *outs) is None:  # e.g. a non-contiguous input
                if plain(*(contig(np.asarray(a)) for a in ins), *outs) is None:
                    raise FusebindInternalError(f"fusebind internal error: the call thunk refused validated operands "
                                                f"{[(np.asarray(a).dtype, np.shape(a)) for a in ins]}")
            return
        if self.par is not None:
            self._call_parallel(ins, outs)
            return
        if self.status:
            self._call_checked(ins, outs)
            return
        self._call_split(ins, outs, [])

    def _call_parallel(self, ins: list[Any], outs: list[np.ndarray]) -> None:
        """One native parallel-for call; ABI v2: one status block per chunk, the first set one (in
        chunk order: the first bad index in loop order) raises."""
        fn = self.par.function  # type: ignore[union-attr]
        status = [np.zeros(self.tasks * STATUS_WORDS, np.int64)] if self.status else []
        if fn(*ins, *outs, *status) is None:
            if fn(*(contig(np.asarray(a)) for a in ins), *outs, *status) is None:
                raise FusebindInternalError(f"fusebind internal error: the parallel call thunk refused validated "
                                            f"operands {[(np.asarray(a).dtype, np.shape(a)) for a in ins]}")
        if status and status[0].any():
            for row in status[0].reshape(self.tasks, STATUS_WORDS):
                if row[0]:
                    raise_for_status(self.kernel, row, ins)

    def _call_split(self, ins: list[Any], outs: list[np.ndarray], statuses: list[np.ndarray]) -> None:
        arrays = [*(contig(np.asarray(a)) for a in ins), *outs]
        fn = self.chunk_thunk.released
        b = self.bounds
        chunks = [[a[b[c]:b[c + 1]] for a in arrays] + statuses[c:c + 1] for c in range(self.chunks)]
        pool = self.pool(self.chunks)
        futures = [pool.submit(fn, *chunk) for chunk in chunks[1:]]
        ok = fn(*chunks[0]) is not None
        ok = all([f.result() is not None for f in futures]) and ok
        if not ok:
            raise FusebindInternalError("fusebind internal error: the call thunk refused a chunk of a split call")

    def _call_checked(self, ins: list[Any], outs: list[np.ndarray]) -> None:
        """ABI v2: each call (each chunk) passes its own status; the first set one raises."""
        statuses = [new_status() for _ in range(self.chunks)]
        if self.chunks == 1:
            if self.thunk.function(*ins, *outs, statuses[0]) is None:
                if self.thunk.function(*(contig(np.asarray(a)) for a in ins), *outs, statuses[0]) is None:
                    raise FusebindInternalError(f"fusebind internal error: the call thunk refused validated operands "
                                       f"{[(np.asarray(a).dtype, np.shape(a)) for a in ins]}")
        else:
            self._call_split(ins, outs, statuses)
        for status in statuses:  # in chunk order: the first bad index in loop order
            if status[0]:
                raise_for_status(self.kernel, status, ins)


class GuardedStep:
    """A Python-callback kernel (`Kernel.python_callback`), or a static kernel of ABI v2 (a status
    operand): called through `Kernel.__call__`, which re-raises what the callback raised and
    passes and reads the status. The thunk and prepared descriptors call the address directly
    and would lose both."""

    chunks = splits = 1

    def __init__(self, kernel: Any, broadcast_inputs_to: tuple[int, ...] | None) -> None:
        self.kernel = kernel
        self.broadcast_inputs_to = broadcast_inputs_to

    def __call__(self, ins: list[Any], outs: list[np.ndarray]) -> None:
        arrays = [contig(np.asarray(a)) for a in ins]
        if self.broadcast_inputs_to is not None:
            arrays = [np.broadcast_to(a, self.broadcast_inputs_to) for a in arrays]
        self.kernel(*(descriptor_for(a) for a in (*arrays, *outs)))


class DescriptorStep:
    """A fused-arm call through prepared ctypes descriptors (no thunk here)."""

    def __init__(self, call: KernelCall) -> None:
        self.call = call
        self.chunks, self.splits = call.chunks, call.splits

    def __call__(self, ins: list[Any], outs: list[np.ndarray]) -> None:
        self.call([*(contig(np.asarray(a)) for a in ins), *outs])

