"""The batched BLAS matmul kernel (runtime/blas.py `blas_batched_kernel`, its IR:
lowering/blas_ir.py `batched_blas_thunk_ir`): one native call loops over the batch entries,
numpy's broadcasting of batch dims, transposed operands as the gemm's Trans flag, and with
threads > 1 the entries run as tasks of the native pool with OpenBLAS held at 1 thread.
Values are checked against numpy's matmul; the BLAS count each gemm saw is observed through a
stand-in gemm (a ctypes callback) linked into the same thunk."""

from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
import pytest

from fusebind.lowering.blas_ir import compile_batched_blas_thunk
from fusebind.runtime.blas import (StaticKernelError, blas_batched_kernel, blas_gate, blas_get_threads,
                                   blas_set_threads)
from fusebind.runtime.dtypes import DType, KernelSignature, descriptor_for
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.pool import process_pool
from fusebind.runtime.session import Session
from fusebind.runtime.thunk import ThunkCall

RNG = np.random.default_rng(7)
SESSION = Session("batched")
DTYPES = {"f32": np.float32, "f64": np.float64}
# (A shape, B shape): same batch; broadcast batch dims; a missing batch dim on either side
CASES = [((6, 3, 4), (6, 4, 5)), ((2, 1, 3, 4), (1, 3, 4, 5)), ((3, 4), (6, 4, 5)), ((2, 3, 3, 4), (4, 5))]


def _call(kernel, a, b, shape):
    out = np.full(shape, np.nan, a.dtype)
    fn = ThunkCall(kernel, [a.shape, b.shape, shape]).function  # the executor's call path
    assert fn(a, b, out) is out
    return out


@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("threads", [1, 2])
def test_batched_kernel_gives_numpys_matmul(elem: str, threads: int) -> None:
    for ash, bsh in CASES:
        a, b = (RNG.standard_normal(s).astype(DTYPES[elem]) for s in (ash, bsh))
        ref = np.matmul(a, b)
        kernel = blas_batched_kernel(elem, (a.ndim, b.ndim, ref.ndim), SESSION, threads=threads)
        np.testing.assert_allclose(_call(kernel, a, b, ref.shape), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("trans", [(True, False), (False, True), (True, True)])
def test_transposed_operands_read_with_no_copy(trans) -> None:
    """op(A) = A's last two axes swapped: the thunk gets the untransposed C-contiguous array."""
    a, b = RNG.standard_normal((4, 3, 5)), RNG.standard_normal((4, 5, 2))
    sa = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if trans[0] else a
    sb = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans[1] else b
    kernel = blas_batched_kernel("f64", (3, 3, 3), SESSION, trans=trans, threads=2)
    assert kernel.source == "blas:bdgemm" + "_" + "".join("t" if t else "n" for t in trans)
    np.testing.assert_allclose(_call(kernel, sa, sb, (4, 3, 2)), a @ b, rtol=1e-12)


def test_kernels_are_shared_and_refusals_name_the_way_out() -> None:
    k = blas_batched_kernel("f32", (3, 3, 3), SESSION)
    assert blas_batched_kernel("f32", (3, 3, 3), SESSION) is k and k.source == "blas:bsgemm"
    with pytest.raises(StaticKernelError, match="no batched BLAS matmul for i32; it covers f32 and f64"):
        blas_batched_kernel("i32", (3, 3, 3), SESSION)
    with pytest.raises(StaticKernelError, match=r"no batched BLAS matmul for ranks \(2, 2, 2\).*use numpy's matmul"):
        blas_batched_kernel("f32", (2, 2, 2), SESSION)


def _spy_kernel(width: int):
    """A batched f64 thunk whose 'gemm' is a Python callback recording, per entry, the BLAS
    thread count in force and its C pointer, and writing the entry's index (m x n of 1.0s)."""
    seen: list[tuple[int, int, int]] = []
    lock = threading.Lock()

    @ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64,
                      ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                      ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_int64)
    def gemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        with lock:
            seen.append((blas_get_threads(), c, threading.get_ident()))
        ctypes.c_double.from_address(c).value = 1.0

    pool, gate = process_pool(), blas_gate()
    code, entry = compile_batched_blas_thunk("f64", ctypes.cast(gemm, ctypes.c_void_p).value, (3, 3, 3),
                                             pool=(pool.run_address, pool.handle, width),
                                             gate=(gate.enter_address, gate.leave_address))
    sig = KernelSignature(((DType("f64"), 3), (DType("f64"), 3)), ((DType("f64"), 3),))
    return Kernel.from_object(code, entry, signature=sig), seen, gemm


@pytest.mark.skipif(process_pool().threads < 2, reason="needs 2 CPUs in the affinity mask")
@pytest.mark.skipif(os.environ.get("FUSEBIND_LONG") != "1",
                    reason="FUSEBIND_LONG=1 runs it: its stand-in gemm is a Python callback run on pool workers, "
                           "and it deadlocked twice in full-suite runs on a loaded host (session 6; open)")
def test_a_pool_task_calling_blas_runs_it_at_one_thread_and_the_count_comes_back() -> None:
    before = blas_set_threads(2)
    try:
        entries = 48  # 48 x (64 x 64 x 64) multiply-adds: above the parallel threshold
        a, b = np.zeros((entries, 64, 64)), np.zeros((entries, 64, 64))
        out = np.zeros((entries, 64, 64))
        kernel, seen, keep = _spy_kernel(2)
        # through ctypes, which releases the GIL: the stand-in gemm is Python, and a pool worker
        # running it needs the GIL (the real gemm is native and needs nothing)
        kernel(descriptor_for(a), descriptor_for(b), descriptor_for(out))
        assert [s[0] for s in seen] == [1] * entries  # every gemm of the parallel job saw 1 BLAS thread
        assert sorted(s[1] for s in seen) == [out.ctypes.data + i * 64 * 64 * 8 for i in range(entries)]
        assert out[:, 0, 0].tolist() == [1.0] * entries
        assert blas_get_threads() == 2  # restored after the job

        serial, seen1, keep1 = _spy_kernel(1)  # width 1: in order on the caller, at the count in force
        serial(descriptor_for(a), descriptor_for(b), descriptor_for(out))
        assert [s[0] for s in seen1] == [2] * entries and len({s[2] for s in seen1}) == 1
    finally:
        blas_set_threads(before)


def test_blas_batched_picks_the_kernel_and_reads_transpose_sources() -> None:
    """What the plan builder asks (runtime/blas_operands.py): a batched f32 matmul whose B is a
    transpose only matmuls read gets the `_nt` batched kernel and reads the transpose's source;
    a 2-D matmul, or an f16 one, gets None (the 2-D BLAS kernel / numpy's matmul run them)."""
    from fusebind.dialect import parse_module
    from fusebind.dialect.prim import MatmulOp, TransposeOp
    from fusebind.runtime.blas_operands import blas_batched, transpose_is_view

    text = """func.func @f(%a: tensor<4x3x5xf32>, %b: tensor<4x2x5xf32>, %h: tensor<4x3x5xf16>, %g: tensor<4x5x2xf16>)
        -> (tensor<4x3x2xf32>, tensor<4x3x2xf16>) {
  %bt = prim.transpose %b {perm = [0, 2, 1]} : tensor<4x2x5xf32> -> tensor<4x5x2xf32>
  %r = prim.matmul %a, %bt : (tensor<4x3x5xf32>, tensor<4x5x2xf32>) -> tensor<4x3x2xf32>
  %s = prim.matmul %h, %g : (tensor<4x3x5xf16>, tensor<4x5x2xf16>) -> tensor<4x3x2xf16>
  func.return %r, %s : tensor<4x3x2xf32>, tensor<4x3x2xf16>
}
"""
    ops = list(parse_module(text).walk())
    (tr,) = [o for o in ops if isinstance(o, TransposeOp)]
    mm, half = [o for o in ops if isinstance(o, MatmulOp)]
    assert transpose_is_view(tr)
    kernel, sources = blas_batched(mm, {tr.results[0]}, SESSION, None, 2)
    assert kernel.source == "blas:bsgemm_nt" and sources == [mm.operands[0], tr.operands[0]]
    assert blas_batched(half, set(), SESSION, None, 2) is None


def test_empty_batches_and_empty_contractions_give_numpys_answer() -> None:
    """K = 0: every entry is zeros (the gemm's beta = 0); no entries or no rows: nothing to do."""
    for ash, bsh in [((3, 2, 0), (3, 0, 4)), ((0, 2, 3), (0, 3, 4)), ((3, 0, 3), (3, 3, 4))]:
        a, b = np.ones(ash), np.ones(bsh)
        for threads in (1, 2):
            got = _call(blas_batched_kernel("f64", (3, 3, 3), SESSION, threads=threads), a, b, (ash[0], ash[1], bsh[2]))
            np.testing.assert_array_equal(got, np.matmul(a, b))
