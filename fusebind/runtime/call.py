"""Calling one kernel on numpy arrays of fixed shapes, cheaply and repeatedly.

Owns `SPLIT_THRESHOLD` (native pool) and `PY_SPLIT_THRESHOLD` (Python
threads), `split_tasks` (how many chunks), the Python split pool (`split_pool`) and
`KernelCall`, the fallback call path (plans use the thunk, thunk.py, when
it is available): the memref descriptors of one kernel call are built once
(per plan) with their sizes and strides; a call only patches the data
pointers and makes the foreign call. Broadcast operands of static
elementwise kernels get stride-0 dims in their descriptors (no views are
made). Large splittable calls (elementwise over a leading axis, with a
kernel compiled for dynamic shapes) are cut into `split_tasks` chunks along
axis 0 and run as one parallel-for on the native pool (pool.py, through
split_call.py's `NativeSplit`), as the thunk path (steps.py) runs its own;
only where there is no native pool do they run on the Python thread pool
(`threads` chunks, from PY_SPLIT_THRESHOLD; ctypes releases the GIL).

An ABI v2 kernel (`signature.status`) gets one more descriptor per chunk, its
status: each call points it at a fresh zeroed array, and a set status raises
`fb.IndexOutOfBounds` after the call (the first chunk that set it).

Also owns `OutputRecycler`, the caching allocator of returned outputs
(`RECYCLE_MIN_BYTES` and up): see its docstring for why reuse is sound.

Must not: decide which kernel runs (plan.py), or validate user input (the
executor has done that: every array here is C-contiguous with the expected
shape and dtype).
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.runtime.dtypes import DType, memref_descriptor
from fusebind.lowering.abi import STATUS_OPERAND, STATUS_WORDS
from fusebind.runtime.kernel import Kernel, new_status, status_error
from fusebind.runtime.session import default_session

#: Below this many output elements a call is not split (on the native pool,
#: pool.py; docs/THREADS.md has the commands and numbers). Measured on this
#: 2-core host: a native hand-off costs ~3-9 us (an empty 2-task job through
#: the thunk: 3.4 us against 0.6 us for one plain call; the pool alone 0.2-3 us
#: over a ctypes call), against 28-130 us for the Python-thread pool;
#: relu(a*b+c) f32 runs at ~0.45 ns/element on one core (5e4 elements: 22 us).
#: The split pays once the half it saves exceeds the hand-off:
#: n > h / (t_e * (1 - 1/s)) = 5 us / (0.45 ns * (1 - 1/1.6)) ~ 3e4 for a
#: memory-bound kernel scaling 1.6x on 2 cores (compute-bound ones, GELU-tanh
#: at ~6 ns/element, from ~2e3). 65536 is ~2x that crossover (the smallest
#: size cut into two CHUNK_ELEMS chunks), 7.6x lower than the Python pool's.
#: Wall-clock speed-ups could not be confirmed here: the host ran at a load
#: of 8-10 on 2 cores (this process got ~0.3 of a core, cpu/wall), where no
#: split (native or Python) pays below ~1e7 elements.
SPLIT_THRESHOLD = 65_536
#: Below this many output elements a call is not split on the Python-thread
#: pool (`split_pool`, used only where the native pool is unavailable): a
#: hand-off there costs ~45 us (PERFORMANCE.md; ~28 us measured here: pool
#: submit, chunk views, future), more than such a kernel runs. Measured on
#: this 2-vCPU host (relu(a*b+c) and GELU-tanh, 5e4..1e7 f32, interleaved):
#: the split costs 2.5-4x at 5e4-1e5 and is within noise of one thread from
#: 5e5 up; PERFORMANCE.md's quiet-host figure (>= 1.7x on compute-bound
#: kernels at 1e7, crossover ~5e5) is kept as this threshold.
PY_SPLIT_THRESHOLD = 500_000
#: A native split call is cut into chunks of about this many elements (at most
#: MAX_SPLIT_TASKS, at most one per row): fixed by the call's size, never by the
#: thread count, so the chunk a value falls in does not depend on the threads.
#: Many chunks a thread balance the load when a core is busy with something else.
CHUNK_ELEMS = 1 << 15
MAX_SPLIT_TASKS = 256


def split_tasks(numel: int, lead: int) -> int:
    """How many chunks a native split call of `numel` elements and `lead` rows is cut into."""
    return max(1, min(lead, MAX_SPLIT_TASKS, -(-numel // CHUNK_ELEMS)))

Shape = tuple[int, ...]

#: Returned outputs of at least this many bytes are recycled (OutputRecycler).
#: Measured here (bench/bench_api.py, f32): below ~64 KiB `np.empty` is a
#: cheap malloc from the heap (~0.2-0.5 us) and reuse saves nothing a caller
#: would notice, while the checks cost ~0.3 us; from 64 KiB up numpy asks the
#: OS for fresh pages (glibc's mmap threshold), which the kernel faults in and
#: zeroes on first touch: at 40 MB that is ~1/3 of a memory-bound call.
RECYCLE_MIN_BYTES = 1 << 16
#: At most this many spare outputs are kept per returned value (concurrent
#: callers each get their own; past this many, extras are left to the GC).
RECYCLE_KEEP = 4


class OutputRecycler:
    """A caching allocator for one returned output (shape, dtype) of a plan.

    `take()` gives an array to write the output into: a spare one from an
    earlier call when nobody else holds it, else `np.empty`. Every array it
    gives is also kept as a spare, so a result the caller drops becomes the
    next call's output instead of fresh pages (mmap, page faults, zeroing).

    Why reuse is sound: a spare is taken out of the pool with `list.pop()`
    (one atomic operation under the GIL: two threads never get the same
    spare), and then reused only when `sys.getrefcount` shows no reference
    but the local one. Every holder of a Python reference counts: the
    caller's variables, lists and dicts holding the result, numpy views
    (their `base` chain ends at it), memoryviews and buffers exported from it
    (they hold the exporter), `arr.ctypes`; an object nobody references can
    acquire no new reference. Weak references do not count, so an array
    with any is not reused either. The spare must also still be the exact,
    unmodified array the pool handed out: `np.ndarray` with this shape,
    dtype, C-contiguous and writeable (a caller may have reshaped it in place
    before dropping it). A taken spare goes straight back into the pool, so
    a concurrent caller that pops it sees this call's reference and
    allocates instead. Memory: the pool keeps up to `RECYCLE_KEEP` dropped
    outputs alive for as long as the plan lives (`clear()` frees them).
    """

    __slots__ = ("shape", "dtype", "_spare", "reused", "allocated", "__weakref__")

    def __init__(self, shape: Shape, dtype: np.dtype) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self._spare: list[np.ndarray] = []
        self.reused = 0  # counters (racy under threads: statistics only)
        self.allocated = 0

    def take(self) -> np.ndarray:
        """An output array nobody else references (spare or fresh)."""
        spare = self._spare
        try:
            out = spare.pop()
        except IndexError:
            out = None
        # 2 = `out` + getrefcount's argument: the pool no longer holds it
        if (out is not None and sys.getrefcount(out) == 2 and type(out) is np.ndarray
                and not weakref.getweakrefcount(out) and out.shape == self.shape and out.dtype == self.dtype
                and out.flags.c_contiguous and out.flags.writeable):
            self.reused += 1
        else:
            out = np.empty(self.shape, self.dtype)
            self.allocated += 1
        if len(spare) < RECYCLE_KEEP:
            spare.append(out)
        return out

    def clear(self) -> None:
        """Drop every spare (their memory is freed once callers drop theirs)."""
        self._spare.clear()


def output_allocator(shape: Shape, dtype: np.dtype) -> tuple[Callable[[], np.ndarray], OutputRecycler | None]:
    """The allocation of one returned output: recycled when it has at least
    RECYCLE_MIN_BYTES, else a plain `np.empty` (cheaper for small arrays)."""
    dtype = np.dtype(dtype)
    if int(np.prod(shape)) * dtype.itemsize >= RECYCLE_MIN_BYTES:
        recycler = OutputRecycler(shape, dtype)
        return recycler.take, recycler
    return functools.partial(np.empty, tuple(shape), dtype), None

_POOL_LOCK = threading.Lock()


def split_pool(threads: int) -> ThreadPoolExecutor:
    """A lazily created worker pool of `threads - 1` threads (the caller runs
    one chunk), one per thread count, held by the default session (pools
    serve any table: every session shares them)."""
    pools: dict[int, ThreadPoolExecutor] = default_session().slot("pools", dict)
    pool = pools.get(threads)
    if pool is not None:
        return pool
    with _POOL_LOCK:
        pool = pools.get(threads)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="fusebind-split")
            pools[threads] = pool
        return pool


def _contiguous_strides(shape: Shape) -> list[int]:
    strides = [0] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc if shape[i] != 1 else 0
        acc *= max(shape[i], 1)
    return strides


def _broadcast_strides(shape: Shape, to: Shape) -> list[int]:
    """Element strides of a C-contiguous `shape` viewed as broadcast to `to`."""
    own = _contiguous_strides(shape)
    off = len(to) - len(shape)
    out = [0] * len(to)
    for i in range(len(shape)):
        out[off + i] = 0 if shape[i] == 1 and to[off + i] != 1 else own[i]
    return out


class _Operand:
    """One descriptor: its struct, the address passed to the kernel, and a
    view of its two pointer fields for patching."""

    __slots__ = ("struct", "address", "ptrs", "itemsize", "stride0")

    def __init__(self, dtype: DType, sizes: Sequence[int], strides: Sequence[int]) -> None:
        self.struct = memref_descriptor(dtype, len(sizes))()
        if sizes:
            self.struct.sizes[:] = list(sizes)
            self.struct.strides[:] = list(strides)
        self.address = ctypes.addressof(self.struct)
        self.ptrs = (ctypes.c_uint64 * 2).from_buffer(self.struct)
        self.itemsize = dtype.itemsize
        self.stride0 = strides[0] if strides else 0


class KernelCall:
    """A prepared call of `kernel` on inputs and outputs of known shapes.

    `broadcast_inputs_to`: for static elementwise kernels, whose inputs have
    the output's rank: each input is described as broadcast to that shape.
    `threads`: split along axis 0 over this many threads when the call is
    large enough and `splittable` (the kernel handles any leading size).
    """

    def __init__(self, kernel: Kernel, in_shapes: Sequence[Shape], out_shapes: Sequence[Shape], *,
                 broadcast_inputs_to: Shape | None = None, splittable: bool = False, threads: int = 1,
                 pool: Callable[[int], ThreadPoolExecutor] | None = None) -> None:
        sig = kernel.signature
        self.kernel = kernel
        self.pool = pool if pool is not None else split_pool  # threads -> workers (the backend's split_pool)
        self.status = bool(sig.status)
        n_args = len(sig.inputs) + len(sig.outputs) + self.status
        self._fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n_args))(kernel.address)
        out_numel = int(np.prod(out_shapes[0])) if out_shapes else 0
        lead = out_shapes[0][0] if out_shapes and out_shapes[0] else 0
        self.chunks = self.splits = 1
        self._native: Any = None
        workers = None
        if splittable and threads > 1 and lead > 1 and out_numel >= SPLIT_THRESHOLD:
            workers = self.pool(threads)
            if not hasattr(workers, "run_address"):  # the Python pool: only from its own threshold
                workers = None
                if out_numel >= PY_SPLIT_THRESHOLD and lead >= threads:
                    self.chunks = self.splits = threads
        if workers is not None:  # the native pool: chunks fixed by the size, one parallel-for call
            tasks = split_tasks(out_numel, lead)
            width = min(threads, workers.threads, tasks)
            if width > 1 and tasks > 1:
                self._native = self._native_split(kernel, in_shapes, out_shapes, broadcast_inputs_to, lead, tasks,
                                                  workers, width)
                if self._native is not None:
                    self.splits = width
        self._sets: list[tuple[list[_Operand], tuple[int, ...], list[int]]] = []
        bounds = [lead * c // self.chunks for c in range(self.chunks + 1)] if self.chunks > 1 else [0, lead]
        for c in range(self.chunks):
            start, stop = bounds[c], bounds[c + 1]
            ops: list[_Operand] = []
            for (dtype, _), shape in zip(sig.inputs, in_shapes):
                if broadcast_inputs_to is not None:
                    sizes, strides = list(broadcast_inputs_to), _broadcast_strides(shape, broadcast_inputs_to)
                else:
                    sizes, strides = list(shape), _contiguous_strides(shape)
                if self.chunks > 1:
                    sizes[0] = stop - start
                ops.append(_Operand(dtype, sizes, strides))
            for (dtype, _), shape in zip(sig.outputs, out_shapes):
                sizes, strides = list(shape), _contiguous_strides(shape)
                if self.chunks > 1:
                    sizes[0] = stop - start
                ops.append(_Operand(dtype, sizes, strides))
            offsets = [start * o.stride0 * o.itemsize for o in ops]
            if self.status:  # not offset per chunk: each chunk's status is its own array
                ops.append(_Operand(STATUS_OPERAND[0], [STATUS_WORDS], [1]))
                offsets.append(0)
            self._sets.append((ops, tuple(o.address for o in ops), offsets))
        self._ops0, self._addrs0, _ = self._sets[0]
        self._lock = threading.Lock()

    def _native_split(self, kernel: Kernel, in_shapes: Sequence[Shape], out_shapes: Sequence[Shape],
                      broadcast_to: Shape | None, lead: int, tasks: int, pool: Any, width: int) -> Any:
        """The call as one parallel-for on the native pool (split_call.py), or None when its
        task cannot be built here (the call then runs whole on this thread)."""
        from fusebind.runtime.split_call import NativeSplit
        from fusebind.runtime.thunk import ThunkUnavailable

        sig = kernel.signature
        sizes, strides = [], []
        for shape in in_shapes:
            if broadcast_to is not None:
                sizes.append(list(broadcast_to))
                strides.append(_broadcast_strides(shape, broadcast_to))
            else:
                sizes.append(list(shape))
                strides.append(_contiguous_strides(shape))
        for shape in out_shapes:
            sizes.append(list(shape))
            strides.append(_contiguous_strides(shape))
        itemsizes = [d.itemsize for d, _ in (*sig.inputs, *sig.outputs)]
        try:
            return NativeSplit(kernel, sizes, strides, itemsizes, lead, tasks, pool, width, self.status)
        except ThunkUnavailable:
            return None

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        """Run on `arrays` (inputs then outputs, already validated)."""
        native = self._native
        if native is not None:
            statuses = native(arrays)
            if statuses is not None:
                self._check(list(statuses), arrays)
            return
        if self.chunks == 1:
            status = new_status() if self.status else None
            with self._lock:  # descriptors are shared state: one call at a time
                for op, arr in zip(self._ops0, arrays if status is None else [*arrays, status]):
                    p = arr.ctypes.data
                    op.ptrs[0] = p
                    op.ptrs[1] = p
                self._fn(*self._addrs0)
            if status is not None:
                self._check([status], arrays)
            return
        self._call_split(arrays)

    def _call_split(self, arrays: Sequence[np.ndarray]) -> None:
        statuses = [new_status() for _ in self._sets] if self.status else []
        with self._lock:
            bases = [a.ctypes.data for a in arrays]
            for c, (ops, _, offsets) in enumerate(self._sets):
                for op, base, off in zip(ops, [*bases, *(s.ctypes.data for s in statuses[c:c + 1])], offsets):
                    op.ptrs[0] = base + off
                    op.ptrs[1] = base + off
            pool = self.pool(self.chunks)  # (the Python pool: a native one runs `_native` instead)
            futures = [pool.submit(self._fn, *addrs) for _, addrs, _ in self._sets[1:]]
            self._fn(*self._addrs0)
            for f in futures:
                f.result()
        self._check(statuses, arrays)

    def _check(self, statuses: list[np.ndarray], arrays: Sequence[np.ndarray]) -> None:
        for status in statuses:  # in chunk order: the first bad index in loop order
            err = status_error(self.kernel, status, None, arrays[:len(self.kernel.signature.inputs)])
            if err is not None:
                raise err
