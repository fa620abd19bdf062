"""The BLAS matmul thunk: its IR is lowering's (lowering/blas_ir.py), the runtime links and binds it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fusebind.lowering.blas_ir import GEMMS, blas_thunk_ir
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.session import Session
from fusebind.runtime.blas import blas_matmul_kernel
from fusebind.runtime.static_kernels import StaticKernelError


def test_the_thunk_ir_calls_the_gemm_at_the_address_given() -> None:
    ir = blas_thunk_ir("f64", 4096, "fb_blas_dgemm")
    assert "define void @_mlir_ciface_fb_blas_dgemm(ptr %a, ptr %b, ptr %c)" in ir
    assert "%fn = inttoptr i64 4096 to ptr" in ir and "double 1.0" in ir and "double 0.0" in ir
    assert GEMMS["f32"].entry == "_mlir_ciface_fb_blas_sgemm" and set(GEMMS) == {"f32", "f64"}


def test_generating_the_thunk_needs_no_runtime() -> None:
    code = ("import sys; from fusebind.lowering.blas_ir import compile_blas_thunk; "
            "obj, entry = compile_blas_thunk('f32', 4096); assert obj and entry == '_mlir_ciface_fb_blas_sgemm'; "
            "assert not [m for m in sys.modules if m.startswith('fusebind.runtime')], sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_the_kernel_multiplies_plain_and_transposed_operands(elem: str) -> None:
    session = Session("blas")
    kernel = blas_matmul_kernel(elem, session)
    assert kernel.source == f"blas:{GEMMS[elem].short}"
    assert blas_matmul_kernel(elem, session) is kernel  # one per session
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 3)).astype(elem.replace("f", "float"))
    b = rng.standard_normal((4, 3)).astype(a.dtype).T  # column-unit-stride: passed as Trans
    out = np.empty((5, 4), a.dtype)
    kernel(descriptor_for(a), descriptor_for(b), descriptor_for(out))
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)


def test_integer_matmul_has_no_blas_kernel() -> None:
    with pytest.raises(StaticKernelError, match="no BLAS matmul for i32; BLAS covers f32 and f64"):
        blas_matmul_kernel("i32", Session())


def test_blas_threads_sets_the_count_in_the_block_and_restores_it() -> None:
    from fusebind.runtime.blas import blas_get_threads, blas_set_threads, blas_threads

    before = blas_set_threads(2)
    try:
        with blas_threads(1) as now:
            assert now == 1 and blas_get_threads() == 1
            a = np.arange(12.0).reshape(3, 4)
            np.testing.assert_array_equal(a @ a.T, np.einsum("ik,jk->ij", a, a))  # numpy's gemm still right
        assert blas_get_threads() == 2
    finally:
        blas_set_threads(before)


def test_concurrent_blocks_run_at_the_smallest_request_and_the_last_restores() -> None:
    """A pool task's block asking for 1 wins over a lone step's 2 while both are open, in any
    closing order; the count before the first block comes back when the last one closes."""
    import threading

    from fusebind.runtime.blas import blas_get_threads, blas_set_threads, blas_threads

    before = blas_set_threads(2)
    opened, release, seen = threading.Event(), threading.Event(), []

    def task() -> None:
        with blas_threads(1):
            opened.set()
            release.wait(10)
            seen.append(blas_get_threads())

    try:
        t = threading.Thread(target=task)
        t.start()
        assert opened.wait(10)
        with blas_threads(2) as now:
            assert now == 1 and blas_get_threads() == 1  # the other thread's 1 holds
            release.set()
            t.join(10)
            assert seen == [1] and blas_get_threads() == 2  # its block closed: this one's 2
        assert blas_get_threads() == 2
        with blas_threads(2):
            blas_set_threads(1)  # a raw set inside a block is overridden when the block closes
        assert blas_get_threads() == 2
    finally:
        release.set()
        blas_set_threads(before)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_blas_threads_refuses_a_count_below_one(bad) -> None:
    from fusebind.dialect.errors import FusebindValueError
    from fusebind.runtime.blas import blas_set_threads, blas_threads

    with pytest.raises(FusebindValueError, match=r"blas_threads needs an int >= 1, got"):
        with blas_threads(bad):
            pass
    with pytest.raises(FusebindValueError, match=r"blas threads must be an int >= 1, got"):
        blas_set_threads(bad)


def test_a_kernel_with_threads_runs_its_gemm_at_that_count_and_restores() -> None:
    """`threads=` (the executor's threads option): the gemm runs inside the BLAS thread gate, so
    a threads=1 plan never runs BLAS on more threads; the count outside the call is unchanged."""
    import ctypes

    from fusebind.lowering.blas_ir import compile_blas_thunk
    from fusebind.runtime.blas import blas_gate, blas_get_threads, blas_set_threads
    from fusebind.runtime.dtypes import DType, KernelSignature
    from fusebind.runtime.kernel import Kernel

    seen: list[int] = []

    @ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64,
                      ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                      ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_int64)
    def gemm(*args):  # a stand-in gemm: records the BLAS count in force when it is called
        seen.append(blas_get_threads())

    gate = blas_gate()
    sig = KernelSignature(((DType("f64"), 2), (DType("f64"), 2)), ((DType("f64"), 2),))
    before = blas_set_threads(2)
    try:
        x = np.zeros((2, 2))
        for n, want in ((1, 1), (2, 2), (64, 2)):
            code, entry = compile_blas_thunk("f64", ctypes.cast(gemm, ctypes.c_void_p).value, (False, False),
                                             (gate.enter_address, gate.leave_address, n))
            Kernel.from_object(code, entry, signature=sig)(descriptor_for(x), descriptor_for(x), descriptor_for(x))
            assert seen[-1] == want and blas_get_threads() == 2
        session = Session("blas-threads")
        k1 = blas_matmul_kernel("f32", session, threads=1)
        assert k1 is not blas_matmul_kernel("f32", session) and k1.source == "blas:sgemm"
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        out = np.empty((2, 2), np.float32)
        k1(descriptor_for(a), descriptor_for(np.ascontiguousarray(a.T)), descriptor_for(out))
        np.testing.assert_array_equal(out, a @ a.T)
        assert blas_get_threads() == 2
    finally:
        blas_set_threads(before)
