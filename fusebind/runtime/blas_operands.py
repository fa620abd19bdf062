"""Transposed matmul operands as BLAS transpose flags: `x @ w.T` with no transpose copy.

A traced `w.T` is a `prim.transpose` (a copy kernel) in front of `prim.matmul`. When every
reader of that transpose is a matmul, the executor does not copy: the transpose becomes a
numpy view (`transpose_is_view`), and
- a 2-D matmul on the BLAS kernel reads the untransposed array through the kernel variant
  that passes the gemm its Trans flag (`blas_transposed`: runtime/blas.py's `trans=`, whose
  thunk reads the descriptor's sizes and strides swapped, lowering/blas_ir.py);
- a batched f32/f64 matmul on the batched BLAS kernel (`blas_batched`: runtime/blas.py
  `blas_batched_kernel`, one native call over the batch entries) reads the untransposed array
  through its trans variant the same way; any other batched matmul (numpy's) gets the strided
  view, which numpy's matmul passes to its own gemm with the transpose flag too.
A transpose read by anything else, or a matmul whose kernel is not the BLAS one (a user's
binding, integers), keeps today's path: the view is copied to a contiguous array (`contig`) by
the step that needs it, so the answer never depends on this.

An operand that arrives column-major (`fb.jit(f)(x, w.T)`, or a numpy `W.T` a function
captures, passed as a hidden argument) is refused by the matmul's thunk, which takes
C-contiguous arrays; `ColumnMajorRetry` then runs the variant with that transpose flag on the
C-contiguous `w` instead of copying it each call.

Must not: build steps (builder.py asks these questions and builds them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.dialect.prim import MatmulOp, TransposeOp
from fusebind.dialect.types import element_of_numpy
from fusebind.lowering.blas_ir import BLAS_GEMMS
from fusebind.runtime.blas import blas_batched_kernel, blas_matmul_kernel
from fusebind.runtime.steps import np_dtype, static_shape

_FLOATS = ("f16", "bf16", "f32", "f64")


def _elem(value: Any) -> str | None:
    return element_of_numpy(np_dtype(value))  # (bfloat16 known without importing ml_dtypes)


def _swaps_last_two(op: TransposeOp, rank: int) -> bool:
    return rank >= 2 and tuple(op.perm_list()) == tuple(range(rank - 2)) + (rank - 1, rank - 2)


def transpose_is_view(op: Any) -> bool:
    """`op` is a transpose of the last two axes of a float array whose every reader is a matmul of
    the same rank (2-D: BLAS; batched: numpy's): it runs as a view, never as a copy kernel."""
    if not isinstance(op, TransposeOp) or _elem(op.results[0]) not in _FLOATS:
        return False
    shape = static_shape(op.results[0])
    if shape is None or not _swaps_last_two(op, len(shape)):
        return False
    uses = list(op.results[0].uses)
    if not uses:
        return False
    for use in uses:
        mm = use.operation
        if not isinstance(mm, MatmulOp) or mm.parent_block() is not op.parent_block():
            return False
        out = static_shape(mm.results[0])
        if out is None or len(out) != len(shape) or any(static_shape(v) is None for v in mm.operands):
            return False
    return True


def blas_transposed(op: Any, kernel: Any, views: set[Any], session: Any, backend: Any,
                    threads: int | None = None) -> tuple[Any, list[Any]] | None:
    """For the 2-D matmul `op` run by the plain BLAS `kernel`, reading transposes run as views
    (`views`, their results): the BLAS kernel variant of `session` and `backend` (a
    RuntimeBackend) taking them as its transpose flags, and the values it reads (each such
    transpose's source instead of the transpose). None when no operand is such a view, or the
    kernel is not the plain BLAS one (a user's binding keeps its operands). `threads`: the
    variant's BLAS thread count (runtime/blas.py `blas_matmul_kernel`; None: the count in force)."""
    elem = _elem(op.results[0])
    if not isinstance(op, MatmulOp) or elem not in BLAS_GEMMS or len(static_shape(op.results[0]) or ()) != 2:
        return None
    if getattr(kernel, "source", None) != f"blas:{BLAS_GEMMS[elem].short}":
        return None
    trans = (op.operands[0] in views, op.operands[1] in views)
    if not any(trans):
        return None
    sources = [v.owner.operands[0] if t else v for v, t in zip(op.operands, trans)]
    return blas_matmul_kernel(elem, session, backend=backend, trans=trans, threads=threads), sources


def blas_threaded(op: Any, kernel: Any, session: Any, backend: Any, threads: int) -> Any:
    """`kernel`, or for a 2-D f32/f64 matmul on the plain BLAS kernel its variant whose gemm runs
    at most `threads` BLAS threads (runtime/blas.py `blas_matmul_kernel(threads=)`): the plan's
    threads option holds for BLAS too."""
    elem = _elem(op.results[0])
    if not isinstance(op, MatmulOp) or elem not in ("f32", "f64"):
        return kernel
    if getattr(kernel, "source", None) != f"blas:{BLAS_GEMMS[elem].short}":
        return kernel
    return blas_matmul_kernel(elem, session, backend=backend, threads=threads)


def blas_batched(op: Any, views: set[Any], session: Any, backend: Any, threads: int) -> tuple[Any, list[Any]] | None:
    """For a batched f32/f64 `op` (a matmul whose result has rank >= 3, static shapes): the
    batched BLAS kernel of `session` and `backend` (threads > 1: its entries in parallel on the
    native pool), with the transposes among `views` read as its transpose flags, and the values
    it reads (each such transpose's source instead of the transpose). None otherwise (numpy's
    matmul runs it, as before)."""
    from fusebind.lowering.blas_ir import GEMMS, MAX_BATCH_DIMS

    elem = _elem(op.results[0])
    if not isinstance(op, MatmulOp) or elem not in GEMMS:
        return None
    shapes = [static_shape(v) for v in (*op.operands, *op.results)]
    if any(s is None for s in shapes):
        return None
    ra, rb, rc = (len(s) for s in shapes)  # type: ignore[arg-type]
    if rc < 3 or rc > 2 + MAX_BATCH_DIMS or min(ra, rb) < 2 or max(ra, rb) != rc:
        return None
    if any(_elem(v) != elem for v in op.operands):
        return None
    trans = (op.operands[0] in views, op.operands[1] in views)
    sources = [v.owner.operands[0] if t else v for v, t in zip(op.operands, trans)]
    kernel = blas_batched_kernel(elem, (ra, rb, rc), session, backend=backend, trans=trans, threads=threads)
    return kernel, sources


class ColumnMajorRetry:
    """The second try of a BLAS matmul step whose thunk refused its operands: an operand that is
    column-major (`w.T` passed as an argument, or captured from numpy) is the transpose of a
    C-contiguous array, so the kernel variant with that transpose flag reads it with no copy.
    `__call__(a, b, out)` is the result, or None when no operand is column-major (the caller
    then copies, as before). Variants and their thunks are made on first use."""

    def __init__(self, elem: str, session: Any, backend: Any, out_shape: tuple[int, ...],
                 threads: int | None = None) -> None:
        self.elem, self.session, self.backend, self.out_shape = elem, session, backend, out_shape
        self.threads = threads
        self._thunks: dict[tuple[bool, bool], Any] = {}

    def __call__(self, a: Any, b: Any, out: np.ndarray) -> Any:
        from fusebind.runtime.thunk import ThunkCall, ThunkUnavailable

        arrays = [np.asarray(a), np.asarray(b)]
        trans = tuple(x.ndim == 2 and not x.flags.c_contiguous and x.T.flags.c_contiguous for x in arrays)
        if not any(trans):
            return None
        stored = [x.T if t else x for x, t in zip(arrays, trans)]
        fn = self._thunks.get(trans)  # type: ignore[call-overload]
        if fn is None:
            kernel = blas_matmul_kernel(self.elem, self.session, backend=self.backend, trans=trans,  # type: ignore[arg-type]
                                        threads=self.threads)
            try:
                fn = ThunkCall(kernel, [x.shape for x in stored] + [self.out_shape]).function
            except ThunkUnavailable:
                return None
            self._thunks[trans] = fn  # type: ignore[index]
        return fn(stored[0], stored[1], out)


def column_major_retry(op: Any, kernel: Any, session: Any, backend: Any,
                       threads: int | None = None) -> ColumnMajorRetry | None:
    """A `ColumnMajorRetry` for the 2-D matmul `op` on the plain BLAS `kernel`, else None."""
    elem = _elem(op.results[0])
    out_shape = static_shape(op.results[0])
    if not isinstance(op, MatmulOp) or elem not in BLAS_GEMMS or out_shape is None or len(out_shape) != 2:
        return None
    if getattr(kernel, "source", None) != f"blas:{BLAS_GEMMS[elem].short}":
        return None
    return ColumnMajorRetry(elem, session, backend, tuple(out_shape), threads)


__all__ = ["ColumnMajorRetry", "blas_batched", "blas_threaded", "blas_transposed", "column_major_retry", "transpose_is_view"]
