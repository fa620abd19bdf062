"""Static kernels: every prim op x dtype, built lazily through the same path,
bound under Static(op); matmul is BLAS; a C kernel built with `cc` binds and
runs through the same ABI."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache
from fusebind.runtime.bindings import BindingKey, global_bindings
from fusebind.runtime.dtypes import DType, KernelSignature, descriptor_for
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.static_kernels import (
    StaticKernelError,
    StaticKernels,
    StaticRequest,
    ensure_static_kernel,
    op_text,
)
from fusebind.runtime.testing import isolated_global_state

from lowering_helpers import BINARY, PREDS, UNARY, check, reference, sample

NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "i1": np.bool_}


def _requests() -> list[StaticRequest]:
    reqs = []
    for elem in ("f32", "f64", "i32", "i64"):
        reqs += [StaticRequest.of(op, [elem, elem], 2) for op in UNARY[elem]]
        reqs += [StaticRequest.of(op, [elem] * 3, 2) for op in BINARY[elem]]
        reqs += [StaticRequest.of("compare", [elem, elem, "i1"], 2, predicate=p) for p in PREDS]
        reqs += [StaticRequest.of("select", ["i1", elem, elem, elem], 2)]
        reqs += [StaticRequest.of("cast", [elem, to], 2) for to in ("f32", "f64", "i32", "i64", "i1") if to != elem]
        reqs += [StaticRequest.of("reduce_sum", [elem, elem], 2, axes=[1]),
                 StaticRequest.of("reduce_max", [elem, elem], 2, axes=[0], keepdims=True),
                 StaticRequest.of("transpose", [elem, elem], 2, perm=[1, 0])]
        if elem.startswith("f"):
            reqs.append(StaticRequest.of("reduce_mean", [elem, elem], 2, axes=[0, 1]))
    return reqs


@pytest.fixture(scope="module")
def static_kernels(object_cache: ObjectCache) -> StaticKernels:
    return StaticKernels(object_cache)


def _inputs(req: StaticRequest, shape: tuple[int, int]) -> list[np.ndarray]:
    ins = []
    for i, elem in enumerate(req.dtypes[:-1]):
        if elem == "i1":
            ins.append(sample("i32", shape, 40 + i) > 0)
        else:
            a = sample(elem, shape, 30 + i)
            if req.op == "cast" and elem.startswith("f"):
                a = np.nan_to_num(a, nan=0.5, posinf=3.0, neginf=-3.0)  # float->int is specified in range only
            ins.append(a)
    return ins


def test_every_op_and_dtype_has_a_static_kernel(static_kernels: StaticKernels) -> None:
    reqs = _requests()
    kernels = static_kernels.prepare(reqs)  # cache misses share one MLIR module
    for req, kernel in zip(reqs, kernels):
        module = parse_module(op_text(req))
        ins = _inputs(req, (5, 3))
        want = reference(module, *ins)[0]
        out = np.empty(want.shape, NP[req.dtypes[-1]])
        kernel(*(descriptor_for(a) for a in ins), descriptor_for(out))
        check(f"{req.op}@{dict(req.attrs)}{req.dtypes}", out, want)


def test_elementwise_static_kernel_takes_broadcast_views(static_kernels: StaticKernels) -> None:
    kernel = static_kernels.kernel_for(StaticRequest.of("sub", ["f32"] * 3, 2))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    row = np.broadcast_to(np.array([1, 2, 3, 4], np.float32), (3, 4))  # stride 0 on dim 0
    col = np.broadcast_to(np.float32(7), (3, 4))
    out = np.empty((3, 4), np.float32)
    kernel(descriptor_for(a[:, ::-1].copy()), descriptor_for(row), descriptor_for(out))
    np.testing.assert_array_equal(out, a[:, ::-1] - row)
    kernel(descriptor_for(col), descriptor_for(a), descriptor_for(out))
    np.testing.assert_array_equal(out, 7 - a)


@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_matmul_is_blas(elem: str, static_kernels: StaticKernels) -> None:
    kernel = static_kernels.kernel_for(StaticRequest.of("matmul", [elem] * 3, 2))
    assert kernel.source == f"blas:{'s' if elem == 'f32' else 'd'}gemm"
    rng = np.random.default_rng(0)
    for m, k, n in [(1, 1, 1), (17, 33, 9), (64, 0, 5), (3, 200, 1)]:
        a = rng.standard_normal((m, k)).astype(NP[elem])
        b = rng.standard_normal((k, n)).astype(NP[elem])
        for aa, bb in [(a, b), (np.asfortranarray(a), np.asfortranarray(b))]:
            out = np.full((m, n), np.nan, NP[elem])
            kernel(descriptor_for(aa), descriptor_for(bb), descriptor_for(out))
            np.testing.assert_allclose(out, a @ b, rtol=1e-5 if elem == "f32" else 1e-12, atol=1e-5)


def test_integer_matmul_is_generated(static_kernels: StaticKernels) -> None:
    kernel = static_kernels.kernel_for(StaticRequest.of("matmul", ["i64"] * 3, 2))
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.arange(12, dtype=np.int64).reshape(3, 4)
    out = np.empty((2, 4), np.int64)
    kernel(descriptor_for(a), descriptor_for(b), descriptor_for(out))
    assert out.tolist() == (a @ b).tolist()


def test_shape_ops_have_no_generated_static_kernel(static_kernels: StaticKernels) -> None:
    with pytest.raises(StaticKernelError, match="needs static shapes"):
        static_kernels.kernel_for(StaticRequest.of("reshape", ["f32", "f32"], 2))


def test_unsupported_dtype_is_refused_clearly(static_kernels: StaticKernels) -> None:
    with pytest.raises(StaticKernelError, match="Static\\(exp\\) has no kernel for dtypes \\('i32', 'i32'\\)"):
        static_kernels.kernel_for(StaticRequest.of("exp", ["i32", "i32"], 1))


def test_ensure_static_kernel_binds_once_under_static_key(static_kernels: StaticKernels) -> None:
    with isolated_global_state():
        row = ensure_static_kernel("add", ["f64"] * 3, 1, kernels=static_kernels)
        again = ensure_static_kernel("add", ["f64"] * 3, 1, kernels=static_kernels)
        assert row is again or row.address == again.address
        rows = global_bindings().lookup(BindingKey.static("add"), [DType.F64] * 3, "cpu")
        assert len(rows) == 1 and rows[0].source.startswith("llvm:") and "rank=1" in rows[0].caps
        mm = ensure_static_kernel("matmul", ["f32"] * 3, 2, kernels=static_kernels)
        assert mm.source == "blas:sgemm"


C_KERNEL = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } memref1f;
/* out = 2*a + b, following the kernel ABI (docs/KERNEL-ABI.md) */
void axpy2(memref1f *a, memref1f *b, memref1f *out) {
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    out->aligned[out->offset + i * out->strides[0]] =
        2.0f * a->aligned[a->offset + i * a->strides[0]] + b->aligned[b->offset + i * b->strides[0]];
}
"""


def test_c_kernel_binds_and_runs_like_an_llvm_kernel(c_library) -> None:
    lib = c_library("axpy2", C_KERNEL)
    sig = KernelSignature(((DType.F32, 1), (DType.F32, 1)), ((DType.F32, 1),))
    kernel = Kernel.from_library(lib, "axpy2", signature=sig)
    a = np.arange(10, dtype=np.float32)
    b = np.ones(10, np.float32)[::-1]
    out = np.empty(10, np.float32)
    kernel(descriptor_for(a[::2]), descriptor_for(b[:5]), descriptor_for(out[:5]))
    np.testing.assert_array_equal(out[:5], 2 * a[::2] + 1)
    with isolated_global_state():
        from fusebind.runtime.bindings import extend_global_bindings

        extend_global_bindings(lambda t: t.bind(BindingKey.static("axpy2"), ["f32"] * 3, "cpu", kernel))
        (row,) = global_bindings().lookup(BindingKey.static("axpy2"), ["f32"] * 3, "cpu")
        row.kernel(descriptor_for(a[:5]), descriptor_for(a[5:]), descriptor_for(out[:5]))
        np.testing.assert_array_equal(out[:5], 2 * a[:5] + a[5:])
