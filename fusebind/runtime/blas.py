"""BLAS kernels: numpy's bundled OpenBLAS gemm, called from lowering's thunk (lowering/blas_ir.py).

Owns finding `cblas_?gemm` in this process (`blas_gemm_address`: the ILP64
OpenBLAS numpy wheels ship in numpy.libs) and `blas_matmul_kernel`, the f32/f64
matmul kernel, linked by the backend asking for it (`RuntimeBackend.blas_kernel`)
and held per session and backend. The thunk embeds the gemm's address, so its
object code is valid in this process only and is never cached. Also owns
`StaticKernelError` (static_kernels.py re-exports it).

Also owns the BLAS thread count (`blas_get_threads`, `blas_set_threads`,
`blas_threads`): OpenBLAS's pthreads server is process-global, so a request
is arbitrated, not just set. While any `blas_threads(n)` blocks are open in
any thread, OpenBLAS runs at the smallest `n` of them (a pool task asking for
1 is never overridden by a lone step asking for 2 at the same time: the cores
are never oversubscribed); when the last one closes, the count the process
had before the first one opened is restored. Why min and not a stack: the
blocks of different threads close in any order.

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
from fusebind.lowering.blas_ir import BLAS_GEMMS, compile_blas_thunk, trans_suffix
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
_requests: dict[int, int] = {}  # open blas_threads(n) blocks: n -> how many
_saved: list[int] = []  # the count before the first open block (restored when the last closes)


def _ctl() -> _ThreadControl:
    global _control
    if _control is None:
        _control = _ThreadControl()
    return _control


def blas_get_threads() -> int:
    """How many threads OpenBLAS uses now (1 when its library has no thread control)."""
    ctl = _ctl()
    return int(ctl.get()) if ctl.get is not None else 1


def blas_set_threads(n: int) -> int:
    """Set OpenBLAS's thread count for the whole process; returns the previous count. Prefer
    `blas_threads` (arbitrated, restored): this one overrides whatever open blocks asked for."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise FusebindValueError(f"blas threads must be an int >= 1, got {n!r}")
    ctl = _ctl()
    with _thread_lock:
        before = int(ctl.get()) if ctl.get is not None else 1
        if ctl.set is not None and n != before:
            ctl.set(n)
        return before


def _apply() -> None:
    """Under _thread_lock: make OpenBLAS's count the smallest open request, or the saved count."""
    ctl = _ctl()
    if ctl.set is None:
        return
    want = min(_requests) if _requests else _saved.pop()
    if int(ctl.get()) != want:
        ctl.set(want)


@contextmanager
def blas_threads(n: int) -> Iterator[int]:
    """Run the block with OpenBLAS at most `n` threads (fewer when another open block, in any
    thread, asked for fewer); yields the count in force on entry. Thread-safe; the count
    before the first open block is restored when the last one closes."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise FusebindValueError(f"blas_threads needs an int >= 1, got {n!r}")
    ctl = _ctl()
    with _thread_lock:
        if not _requests and ctl.get is not None:
            _saved.append(int(ctl.get()))
        _requests[n] = _requests.get(n, 0) + 1
        _apply()
        now = min(_requests)
    try:
        yield now
    finally:
        with _thread_lock:
            left = _requests[n] - 1
            if left:
                _requests[n] = left
            else:
                del _requests[n]
            if _requests or _saved:
                _apply()


_blas_lock = threading.Lock()


def blas_matmul_kernel(elem: str, session: Session | None = None, *,
                       backend: Any = None, trans: tuple[bool, bool] = (False, False)) -> Kernel:
    """The BLAS matmul kernel for f32/f64 (f16/bf16: widened to f32, sgemm, rounded once), one per session (None: the default one) and
    backend (a RuntimeBackend, which loads it; None: the default one). Its thunk (lowering/blas_ir.py)
    embeds the gemm's address in this process, so it is not cached. `trans` (for A, B): the kernel
    computes op(A) @ op(B), op the transpose where set, from the untransposed arrays: the gemm's
    transpose flag, no copy (the executor passes `w` for a `w.T` operand, builder.py)."""
    if elem not in BLAS_GEMMS:
        raise StaticKernelError(f"no BLAS matmul for {elem}; BLAS covers f32 and f64 (f16 and bf16 through f32)")
    trans = (bool(trans[0]), bool(trans[1]))
    load = backend.load if backend is not None else Kernel.from_object
    blas_kernels: dict[tuple[str, str], Kernel] = (session or default_session()).slot("blas_kernels", dict)
    key = (backend.name if backend is not None else DEFAULT_BACKEND, elem) + ((trans,) if any(trans) else ())
    with _blas_lock:
        if key not in blas_kernels:
            code, entry = compile_blas_thunk(elem, blas_gemm_address(elem), trans)
            sig = KernelSignature(((DType(elem), 2), (DType(elem), 2)), ((DType(elem), 2),))
            k = load(code, entry, signature=sig)
            blas_kernels[key] = Kernel(k.function, k.signature, k.address,
                                       f"blas:{BLAS_GEMMS[elem].short}{trans_suffix(trans)}", k.keepalive)
        return blas_kernels[key]
