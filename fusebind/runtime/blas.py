"""BLAS kernels: numpy's bundled OpenBLAS gemm, called from lowering's thunk (lowering/blas_ir.py).

Owns finding `cblas_?gemm` in this process (`blas_gemm_address`: the ILP64
OpenBLAS numpy wheels ship in numpy.libs) and `blas_matmul_kernel`, the f32/f64
matmul kernel, linked by the backend asking for it (`RuntimeBackend.blas_kernel`)
and held per session and backend. The thunk embeds the gemm's address, so its
object code is valid in this process only and is never cached. Also owns
`StaticKernelError` (static_kernels.py re-exports it).

Also owns the BLAS thread count (`blas_get_threads`, `blas_set_threads`,
`blas_threads`, `blas_gate`): OpenBLAS's pthreads server is process-global,
so a request is arbitrated, not just set. While any request is open in any
thread (a `blas_threads(n)` block, a batched matmul's parallel job asking
for 1, a 2-D kernel made with `threads=n` during its gemm), OpenBLAS runs at
the smallest n of them, never above the count in force when the first
opened; when the last one closes, that count is restored. So a pool task's 1
is never overridden by a lone step's 2 at the same time: the cores are never
oversubscribed. Why min and not a stack: requests of different threads close
in any order. Why native (lowering/blas_ir.py `blas_gate_ir`): the thunks
open and close requests without the GIL; Python's blocks use the same gate.

`blas_batched_kernel`: the batched (rank >= 3) f32/f64 matmul, one native
call looping over numpy-broadcast batch entries, in parallel on the native
pool (runtime/pool.py) when threads > 1 and the batch is big enough.

Must not: import runtime/backend.py (the backend reaches this module, not back).
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fusebind.dialect.errors import FusebindError, FusebindValueError
from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.lowering.blas_ir import BLAS_GEMMS, GEMMS, compile_blas_thunk, trans_suffix
from fusebind.runtime.dtypes import DType, KernelSignature
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.session import Session, default_session


class StaticKernelError(FusebindError, ValueError):
    """A static kernel was requested for a signature that has none."""


def _openblas_path() -> str:
    import numpy

    libs = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "numpy.libs")
    found = sorted(glob.glob(os.path.join(libs, "libscipy_openblas*.so*")))
    if not found:
        raise StaticKernelError(f"no OpenBLAS found in {libs}; numpy wheels ship libscipy_openblas there. "
                                "Install numpy from a wheel, or bind a matmul kernel yourself.")
    return found[0]


def blas_gemm_address(elem: str) -> int:
    """Address of numpy's bundled OpenBLAS cblas_?gemm (ILP64)."""
    symbol = BLAS_GEMMS[elem].symbol
    lib = ctypes.CDLL(_openblas_path())
    try:
        return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value or 0
    except AttributeError:
        raise StaticKernelError(f"{_openblas_path()} lacks {symbol}") from None


class _ThreadControl:
    """OpenBLAS's `scipy_openblas_{get,set}_num_threads64_` (None when the library lacks them)."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(_openblas_path())
        try:
            self.get = lib.scipy_openblas_get_num_threads64_
            self.set = lib.scipy_openblas_set_num_threads64_
        except AttributeError:
            self.get = self.set = None
            return
        self.get.restype, self.get.argtypes = ctypes.c_int, []
        self.set.restype, self.set.argtypes = None, [ctypes.c_int]


_control: _ThreadControl | None = None
_thread_lock = threading.Lock()


class _Gate:
    """The process's native BLAS thread gate (lowering/blas_ir.py `blas_gate_ir`): `enter(n)` /
    `leave(n)`, callable from Python (ctypes) and from native code (`enter_address`, the
    batched thunk's parallel path), so both arbitrate through one lock and one set of counts."""

    def __init__(self, ctl: _ThreadControl) -> None:
        from fusebind.lowering.blas_ir import compile_blas_gate
        from fusebind.runtime.loader import load_object

        get = ctypes.cast(ctl.get, ctypes.c_void_p).value or 0
        put = ctypes.cast(ctl.set, ctypes.c_void_p).value or 0
        code, entry = compile_blas_gate(get, put)
        self.loaded = load_object(code, entry, lasting=True)  # one gate per process, never unlinked
        table = (ctypes.c_void_p * 2)()
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.loaded.address)(ctypes.addressof(table))
        self.enter_address, self.leave_address = int(table[0]), int(table[1])
        self.enter = ctypes.CFUNCTYPE(None, ctypes.c_int32)(self.enter_address)
        self.leave = ctypes.CFUNCTYPE(None, ctypes.c_int32)(self.leave_address)


_gate_obj: _Gate | None = None


def _ctl() -> _ThreadControl:
    global _control
    if _control is None:
        with _thread_lock:
            if _control is None:
                _control = _ThreadControl()
    return _control


def blas_gate() -> _Gate | None:
    """The process's BLAS thread gate (built on first use); None when OpenBLAS has no thread control."""
    global _gate_obj
    ctl = _ctl()
    if ctl.set is None:
        return None
    if _gate_obj is None:
        with _thread_lock:
            if _gate_obj is None:
                _gate_obj = _Gate(ctl)
    return _gate_obj


def blas_get_threads() -> int:
    """How many threads OpenBLAS uses now (1 when its library has no thread control)."""
    ctl = _ctl()
    return int(ctl.get()) if ctl.get is not None else 1


def blas_set_threads(n: int) -> int:
    """Set OpenBLAS's thread count for the whole process; returns the previous count. Prefer
    `blas_threads` (arbitrated, restored): this one is overridden when an open block closes."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise FusebindValueError(f"blas threads must be an int >= 1, got {n!r}")
    ctl = _ctl()
    with _thread_lock:
        before = int(ctl.get()) if ctl.get is not None else 1
        if ctl.set is not None and n != before:
            ctl.set(n)
        return before


@contextmanager
def blas_threads(n: int) -> Iterator[int]:
    """Run the block with OpenBLAS at most `n` threads (fewer when another open block, in any
    thread or in a batched matmul's parallel job, asked for fewer; never more than the count
    in force when the first block opened: OpenBLAS's own, the CPUs it may use);
    yields the count in force on entry. Thread-safe; the count before the first open block is
    restored when the last one closes."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise FusebindValueError(f"blas_threads needs an int >= 1, got {n!r}")
    gate = blas_gate()
    if gate is None:
        yield 1
        return
    gate.enter(n)
    try:
        yield blas_get_threads()
    finally:
        gate.leave(n)


_blas_lock = threading.Lock()


def blas_matmul_kernel(elem: str, session: Session | None = None, *, backend: Any = None,
                       trans: tuple[bool, bool] = (False, False), threads: int | None = None) -> Kernel:
    """The BLAS matmul kernel for f32/f64 (f16/bf16: widened to f32, sgemm, rounded once), one per session (None: the default one) and
    backend (a RuntimeBackend, which loads it; None: the default one). Its thunk (lowering/blas_ir.py)
    embeds the gemm's address in this process, so it is not cached. `trans` (for A, B): the kernel
    computes op(A) @ op(B), op the transpose where set, from the untransposed arrays: the gemm's
    transpose flag, no copy (the executor passes `w` for a `w.T` operand, builder.py).
    `threads` (f32/f64): each call runs its gemm inside the BLAS thread gate at that count
    (`blas_threads`: at most `threads`, fewer while another request is open); None: at whatever
    count is in force (OpenBLAS's default: the CPUs of the affinity mask at its start)."""
    if elem not in BLAS_GEMMS:
        raise StaticKernelError(f"no BLAS matmul for {elem}; BLAS covers f32 and f64 (f16 and bf16 through f32)")
    trans = (bool(trans[0]), bool(trans[1]))
    load = backend.load if backend is not None else Kernel.from_object
    blas_kernels: dict[tuple[str, str], Kernel] = (session or default_session()).slot("blas_kernels", dict)
    key = (backend.name if backend is not None else DEFAULT_BACKEND, elem) + ((trans,) if any(trans) else ())
    gate = None
    if threads is not None and elem in GEMMS:
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise FusebindValueError(f"blas_matmul_kernel: threads must be an int >= 1 or None, got {threads!r}")
        g = blas_gate()
        if g is not None:
            gate = (g.enter_address, g.leave_address, min(int(threads), 64))
            key = key + (("threads", gate[2]),)
    with _blas_lock:
        if key not in blas_kernels:
            code, entry = compile_blas_thunk(elem, blas_gemm_address(elem), trans, gate)
            sig = KernelSignature(((DType(elem), 2), (DType(elem), 2)), ((DType(elem), 2),))
            k = load(code, entry, signature=sig)
            blas_kernels[key] = Kernel(k.function, k.signature, k.address,
                                       f"blas:{BLAS_GEMMS[elem].short}{trans_suffix(trans)}", k.keepalive)
        return blas_kernels[key]


def blas_batched_kernel(elem: str, ranks: tuple[int, int, int], session: Session | None = None, *,
                        backend: Any = None, trans: tuple[bool, bool] = (False, False), threads: int = 1) -> Kernel:
    """The batched BLAS matmul kernel (f32/f64) for operand ranks `ranks` (A, B, C; C's the
    largest, >= 3): C[i] = op(A[i]) @ op(B[i]) over C's batch dims with numpy's broadcasting,
    in one native call that loops over the entries (lowering/blas_ir.py
    `batched_blas_thunk_ir`). `threads` > 1: big enough batches run their entries in parallel
    on the process's native pool, OpenBLAS held at 1 thread meanwhile (the gate), so the cores
    are never oversubscribed. One per session, backend, ranks, trans and threads."""
    from fusebind.lowering.blas_ir import MAX_BATCH_DIMS, GEMMS, compile_batched_blas_thunk

    if elem not in GEMMS:
        raise StaticKernelError(f"no batched BLAS matmul for {elem}; it covers f32 and f64")
    ra, rb, rc = (int(r) for r in ranks)
    if not (max(ra, rb) == rc and min(ra, rb) >= 2 and 3 <= rc <= 2 + MAX_BATCH_DIMS):
        raise StaticKernelError(f"no batched BLAS matmul for ranks {tuple(ranks)}: the result has the largest "
                                f"rank, 3 to {2 + MAX_BATCH_DIMS}; use numpy's matmul")
    trans = (bool(trans[0]), bool(trans[1]))
    pool = gate = None
    width = 1
    if threads > 1:
        from fusebind.runtime.pool import PoolUnavailable, process_pool

        g = blas_gate()
        try:
            p = process_pool()
        except PoolUnavailable:
            p = None
        if p is not None and g is not None and min(threads, p.threads) > 1:
            width = min(int(threads), p.threads)
            pool, gate = (p.run_address, p.handle, width), (g.enter_address, g.leave_address)
    load = backend.load if backend is not None else Kernel.from_object
    kernels: dict[tuple[Any, ...], Kernel] = (session or default_session()).slot("blas_kernels", dict)
    key = (backend.name if backend is not None else DEFAULT_BACKEND, elem, "batched", (ra, rb, rc), trans, width)
    with _blas_lock:
        if key not in kernels:
            code, entry = compile_batched_blas_thunk(elem, blas_gemm_address(elem), (ra, rb, rc), trans,
                                                     pool=pool, gate=gate)
            d = DType(elem)
            sig = KernelSignature(((d, ra), (d, rb)), ((d, rc),))
            k = load(code, entry, signature=sig)
            kernels[key] = Kernel(k.function, k.signature, k.address,
                                  f"blas:b{GEMMS[elem].short}{trans_suffix(trans)}", k.keepalive)
        return kernels[key]
