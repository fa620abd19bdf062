"""Transposed matmul operands as BLAS transpose flags (runtime/blas_operands.py, runtime/blas.py's
`trans=`, lowering/blas_ir.py): `x @ w.T`, `x.T @ w` and `x.T @ w.T` give numpy's values, run
the gemm on the untransposed arrays with no transpose copy kernel, and a transpose something
else also reads keeps its copy. Batched matmuls (numpy's) read the transpose as a view."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect import parse_module
from fusebind.runtime.blas import blas_matmul_kernel
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.executor import Executor
from fusebind.runtime.session import Session

M, K, N = 5, 7, 3
RNG = np.random.default_rng(12)
ELEMS = {"f32": np.float32, "f64": np.float64}


def _ty(shape, elem):
    return "tensor<" + "x".join(map(str, shape)) + f"x{elem}>"


def _matmul_text(trans_a: bool, trans_b: bool, elem: str, return_transpose: bool = False) -> str:
    """A function computing op(a) @ op(b), op a prim.transpose where asked."""
    a_shape, b_shape = ((K, M) if trans_a else (M, K)), ((N, K) if trans_b else (K, N))
    lines, operands = [], []
    for name, shape, t in (("a", a_shape, trans_a), ("b", b_shape, trans_b)):
        if t:
            lines.append(f"  %{name}t = prim.transpose %{name} {{perm = [1, 0]}} : {_ty(shape, elem)} -> "
                         f"{_ty(shape[::-1], elem)}")
            operands.append(f"%{name}t")
        else:
            operands.append(f"%{name}")
    results = [f"%r"] + (["%bt"] if return_transpose else [])
    rtypes = [_ty((M, N), elem)] + ([_ty((K, N), elem)] if return_transpose else [])
    lines.append(f"  %r = prim.matmul {operands[0]}, {operands[1]} : ({_ty((M, K), elem)}, {_ty((K, N), elem)}) -> "
                 f"{_ty((M, N), elem)}")
    lines.append(f"  func.return {', '.join(results)} : {', '.join(rtypes)}")
    sig = f"%a: {_ty(a_shape, elem)}, %b: {_ty(b_shape, elem)}"
    ret = rtypes[0] if len(rtypes) == 1 else f"({', '.join(rtypes)})"
    return f"func.func @f({sig}) -> {ret} {{\n" + "\n".join(lines) + "\n}\n"


def _operands(trans_a, trans_b, dtype):
    a = RNG.standard_normal((M, K)).astype(dtype)
    b = RNG.standard_normal((K, N)).astype(dtype)
    return a, b, (np.ascontiguousarray(a.T) if trans_a else a), (np.ascontiguousarray(b.T) if trans_b else b)


def _static_ops(session):
    return {k.op for k, _, _, _ in session.table.rows() if not k.is_runtime}


@pytest.mark.parametrize("elem", sorted(ELEMS))
@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False), (True, True)])
def test_transposed_operands_reach_the_gemm_as_flags(elem, trans_a, trans_b):
    session = Session(f"blas-trans-{elem}")
    ex = Executor(parse_module(_matmul_text(trans_a, trans_b, elem)), session=session)
    a, b, a_in, b_in = _operands(trans_a, trans_b, ELEMS[elem])
    got = ex(a_in, b_in)
    want = a @ b
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if elem == "f32" else 1e-12, atol=1e-6)
    np.testing.assert_allclose(ex(a_in, b_in), want, rtol=1e-5 if elem == "f32" else 1e-12, atol=1e-6)
    assert "transpose" not in _static_ops(session)  # no transpose copy kernel was built or run
    variants = set(session.slot("blas_kernels", dict))
    # the trans variant (with or without a BLAS thread count: the plan's threads option)
    assert any(v[:3] == ("cpu", elem, (trans_a, trans_b)) for v in variants), variants


def test_a_transpose_also_returned_keeps_its_copy_and_the_values():
    session = Session("blas-trans-returned")
    ex = Executor(parse_module(_matmul_text(False, True, "f32", return_transpose=True)), session=session)
    a, b, _, b_in = _operands(False, True, np.float32)
    got, bt = ex(a, b_in)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(bt, b)
    assert bt.flags.c_contiguous
    assert "transpose" in _static_ops(session)


@pytest.mark.parametrize("elem", sorted(ELEMS))
def test_the_kernel_variants_multiply_the_untransposed_arrays(elem):
    session = Session("blas-variants")
    a, b, _, _ = _operands(False, False, ELEMS[elem])
    for trans in ((False, True), (True, False), (True, True)):
        kernel = blas_matmul_kernel(elem, session, trans=trans)
        assert kernel.source == f"blas:{'s' if elem == 'f32' else 'd'}gemm_{''.join('t' if t else 'n' for t in trans)}"
        assert blas_matmul_kernel(elem, session, trans=trans) is kernel
        out = np.empty((M, N), a.dtype)
        args = [np.ascontiguousarray(x.T) if t else x for x, t in zip((a, b), trans)]
        kernel(descriptor_for(args[0]), descriptor_for(args[1]), descriptor_for(out))
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-6)


def test_jit_linear_layer_and_gram_matrix():
    x = RNG.standard_normal((M, K)).astype(np.float32)
    w = RNG.standard_normal((N, K)).astype(np.float32)
    bias = RNG.standard_normal(N).astype(np.float32)
    linear = fb.jit(lambda x, w, b: np.maximum(x @ w.T + b, 0))
    np.testing.assert_allclose(linear(x, w, bias), np.maximum(x @ w.T + bias, 0), rtol=1e-5, atol=1e-6)
    assert "read only by matmuls: a view, their gemm's transpose flag" in str(linear.explain(x, w, bias))
    gram = fb.jit(lambda x: x.T @ x)  # both operands of one matmul: one view, read twice
    np.testing.assert_allclose(gram(x), x.T @ x, rtol=1e-5, atol=1e-5)


def test_batched_matmul_reads_the_transpose_as_a_view():
    a = RNG.standard_normal((2, M, K)).astype(np.float32)
    c = RNG.standard_normal((2, N, K)).astype(np.float32)
    f = fb.jit(lambda a, c: a @ np.swapaxes(c, 1, 2))
    np.testing.assert_allclose(f(a, c), a @ np.swapaxes(c, 1, 2), rtol=1e-5, atol=1e-6)
    assert "read only by matmuls" in str(f.explain(a, c))


def test_narrow_float_transposed_operand_is_widened_from_the_untransposed_array():
    # f16 goes through sgemm on f32 copies, rounded once: the transposed read happens in the widening
    x = RNG.standard_normal((M, K)).astype(np.float16)
    w = RNG.standard_normal((N, K)).astype(np.float16)
    got = fb.jit(lambda x, w: x @ w.T)(x, w)
    want = (x.astype(np.float32) @ w.T.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


def test_a_column_major_argument_runs_as_the_transpose_flag_not_a_copy():
    session = Session("blas-column-major")
    ex = Executor(parse_module(_matmul_text(False, False, "f64")), session=session)
    a, b, _, _ = _operands(False, False, np.float64)
    got = ex(np.asfortranarray(a), np.asfortranarray(b))  # (a.T and b.T are C-contiguous)
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    assert any(v[:3] == ("cpu", "f64", (True, True)) for v in session.slot("blas_kernels", dict))
    # neither layout (a strided slice): copied, as before, and still numpy's values
    wide = RNG.standard_normal((K, 2 * N))
    np.testing.assert_allclose(ex(a, wide[:, ::2]), a @ wide[:, ::2], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ex(np.asfortranarray(a), b), a @ b, rtol=1e-12, atol=1e-12)
    assert any(v[:3] == ("cpu", "f64", (True, False)) for v in session.slot("blas_kernels", dict))


def test_blas_threaded_swaps_the_plain_kernel_for_its_threads_variant():
    """What the plan builder asks (blas_operands.blas_threaded): a 2-D f32 matmul on the plain
    BLAS kernel gets the variant whose gemm runs at most `threads` BLAS threads; any other
    kernel (a user's binding) is kept."""
    from fusebind.dialect.prim import MatmulOp
    from fusebind.runtime.blas_operands import blas_threaded

    session = Session("blas-threaded")
    (mm,) = [o for o in parse_module(_matmul_text(False, False, "f32")).walk() if isinstance(o, MatmulOp)]
    plain = blas_matmul_kernel("f32", session)
    one = blas_threaded(mm, plain, session, None, 1)
    assert one is not plain and one is blas_matmul_kernel("f32", session, threads=1)
    assert ("cpu", "f32", ("threads", 1)) in session.slot("blas_kernels", dict)
    other = type("UserKernel", (), {"source": "user:mm"})()
    assert blas_threaded(mm, other, session, None, 1) is other
    a, b = RNG.standard_normal((M, K)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    out = np.empty((M, N), np.float32)
    one(descriptor_for(a), descriptor_for(b), descriptor_for(out))
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-6)
