"""BLAS kernels: numpy's bundled OpenBLAS gemm, called from lowering's thunk (lowering/blas_ir.py).

Owns finding `cblas_?gemm` in this process (`blas_gemm_address`: the ILP64
OpenBLAS numpy wheels ship in numpy.libs) and `blas_matmul_kernel`, the f32/f64
matmul kernel, linked by the backend asking for it (`RuntimeBackend.blas_kernel`)
and held per session and backend. The thunk embeds the gemm's address, so its
object code is valid in this process only and is never cached. Also owns
`StaticKernelError` (static_kernels.py re-exports it).

Must not: import runtime/backend.py (the backend reaches this module, not back).
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Any

from fusebind.dialect.errors import FusebindError
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
