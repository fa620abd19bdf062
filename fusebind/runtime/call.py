"""Calling one kernel on numpy arrays of fixed shapes, cheaply and repeatedly.

Owns `SPLIT_THRESHOLD`, the split thread pool (`split_pool`) and
`KernelCall`, the fallback call path (plans use the thunk, thunk.py, when
it is available): the memref descriptors of one kernel call are built once
(per plan) with their sizes and strides; a call only patches the data
pointers and makes the foreign call. Broadcast operands of static
elementwise kernels get stride-0 dims in their descriptors (no views are
made). Large splittable calls (elementwise over a leading axis, with a
kernel compiled for dynamic shapes) are cut into chunks along axis 0 and run
on a small thread pool: ctypes releases the GIL during the call.

Must not: decide which kernel runs (plan.py), or validate user input (the
executor has done that: every array here is C-contiguous with the expected
shape and dtype).
"""

from __future__ import annotations

import ctypes
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from fusebind.runtime.dtypes import DType, memref_descriptor
from fusebind.runtime.kernel import Kernel

#: Below this many output elements a call is not split: a thread hand-off
#: costs ~45 us (PERFORMANCE.md; ~28 us measured here: pool submit, chunk
#: views, future), more than such a kernel runs. Measured on this 2-vCPU
#: host with the thunk's GIL-releasing entry (relu(a*b+c) and GELU-tanh,
#: 5e4..1e7 f32, interleaved): the split costs 2.5-4x at 5e4-1e5 and is
#: within noise of one thread from 5e5 up while the second core was busy
#: with other processes; PERFORMANCE.md's quiet-host figure (>= 1.7x on
#: compute-bound kernels at 1e7, crossover ~5e5) is kept as the threshold.
SPLIT_THRESHOLD = 500_000

Shape = tuple[int, ...]

_POOL_LOCK = threading.Lock()
_POOLS: dict[int, ThreadPoolExecutor] = {}


def split_pool(threads: int) -> ThreadPoolExecutor:
    """A lazily created worker pool of `threads - 1` threads (the caller runs one chunk)."""
    with _POOL_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="fusebind-split")
            _POOLS[threads] = pool
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
                 broadcast_inputs_to: Shape | None = None, splittable: bool = False, threads: int = 1) -> None:
        sig = kernel.signature
        self.kernel = kernel
        n_args = len(sig.inputs) + len(sig.outputs)
        self._fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n_args))(kernel.address)
        out_numel = int(np.prod(out_shapes[0])) if out_shapes else 0
        lead = out_shapes[0][0] if out_shapes and out_shapes[0] else 0
        self.chunks = 1
        if splittable and threads > 1 and out_numel >= SPLIT_THRESHOLD and lead >= threads:
            self.chunks = threads
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
            self._sets.append((ops, tuple(o.address for o in ops), offsets))
        self._ops0, self._addrs0, _ = self._sets[0]
        self._lock = threading.Lock()

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        """Run on `arrays` (inputs then outputs, already validated)."""
        if self.chunks == 1:
            with self._lock:  # descriptors are shared state: one call at a time
                for op, arr in zip(self._ops0, arrays):
                    p = arr.ctypes.data
                    op.ptrs[0] = p
                    op.ptrs[1] = p
                self._fn(*self._addrs0)
            return
        self._call_split(arrays)

    def _call_split(self, arrays: Sequence[np.ndarray]) -> None:
        with self._lock:
            bases = [a.ctypes.data for a in arrays]
            for ops, _, offsets in self._sets:
                for op, base, off in zip(ops, bases, offsets):
                    op.ptrs[0] = base + off
                    op.ptrs[1] = base + off
            pool = split_pool(self.chunks)
            futures = [pool.submit(self._fn, *addrs) for _, addrs, _ in self._sets[1:]]
            self._fn(*self._addrs0)
            for f in futures:
                f.result()
