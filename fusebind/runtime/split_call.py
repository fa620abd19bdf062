"""A prepared-descriptor kernel call split along axis 0 on the native pool (pool.py).

Owns `NativeSplit`: the split form of `KernelCall` (call.py), the call path of kernels the
thunk cannot describe, chiefly static elementwise kernels with broadcast operands (stride-0
dims). It replaces the Python-thread split there: all chunks' memref descriptors live in one
int64 buffer (sizes and strides written once; a call patches every data pointer with one
numpy assignment), and one `fb_pool_run` call (GIL released by ctypes) runs the task of
`descriptor_task` (thunk.py) on each chunk. Chunks are fixed by the call's size (call.py
`split_tasks`), never by the thread count: elementwise values are per element, so the result
is the same at any thread count.

ABI v2 (a status operand): each chunk gets its own status block of one array zeroed per call;
after the call the first set block in chunk order raises (the first bad index in loop order).

Must not: decide whether a call is split (call.py), or validate operands (the executor did:
C-contiguous arrays of the planned shapes).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from fusebind.lowering.abi import STATUS_WORDS
from fusebind.runtime.thunk import descriptor_task

Shape = tuple[int, ...]


class NativeSplit:
    """`kernel` on operands described by `sizes`/`strides` (per operand, in elements, inputs
    then outputs, full call) cut into `chunks` along axis 0 of `lead` rows, run on `pool`
    (a NativePool) by at most `width` threads. `status`: the kernel takes a status operand."""

    def __init__(self, kernel: Any, sizes: Sequence[Sequence[int]], strides: Sequence[Sequence[int]],
                 itemsizes: Sequence[int], lead: int, chunks: int, pool: Any, width: int, status: bool) -> None:
        self.kernel, self.pool, self.status = kernel, pool, status
        self.chunks, self.width = int(chunks), int(width)
        n_data = len(sizes)
        ranks = [len(s) for s in sizes] + [1] * status
        words = [3 + 2 * r for r in ranks]  # {allocated, aligned, offset, sizes[r], strides[r]}
        per_chunk = sum(words)
        self._desc = np.zeros(self.chunks * per_chunk, np.int64)
        base = self._desc.ctypes.data
        env = [kernel.address]
        ptr_words, owners, offsets = [], [], []
        bounds = [lead * c // self.chunks for c in range(self.chunks + 1)]
        for c in range(self.chunks):
            start, stop = bounds[c], bounds[c + 1]
            w = c * per_chunk
            for k in range(n_data + status):
                if k < n_data:
                    dims, st = list(sizes[k]), list(strides[k])
                    if dims:
                        dims[0] = stop - start
                    off = start * (st[0] if st else 0) * itemsizes[k]
                else:
                    dims, st, off = [STATUS_WORDS], [1], c * STATUS_WORDS * 8
                self._desc[w + 3:w + 3 + len(dims)] = dims
                self._desc[w + 3 + len(dims):w + 3 + 2 * len(dims)] = st
                env.append(base + 8 * w)
                ptr_words += [w, w + 1]
                owners += [k, k]
                offsets += [off, off]
                w += words[k]
        self._env = np.array(env, np.int64)
        self._ptr_words = np.array(ptr_words, np.intp)
        self._owners = np.array(owners, np.intp)
        self._offsets = np.array(offsets, np.int64)
        self._task = descriptor_task(n_data + status)
        self._lock = threading.Lock()  # the descriptors are shared state: one call at a time

    def __call__(self, arrays: Sequence[np.ndarray]) -> np.ndarray | None:
        """Run on `arrays` (inputs then outputs); the status blocks (one row per chunk) of an
        ABI v2 kernel, else None."""
        statuses = np.zeros((self.chunks, STATUS_WORDS), np.int64) if self.status else None
        bases = [a.ctypes.data for a in arrays]
        if statuses is not None:
            bases.append(statuses.ctypes.data)
        with self._lock:
            self._desc[self._ptr_words] = np.array(bases, np.int64)[self._owners] + self._offsets
            self.pool.run(self._task, self._env.ctypes.data, self.chunks, self.width)
        return statuses
