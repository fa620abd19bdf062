"""The kernel error channel (kernel ABI v2, docs/KERNEL-ABI.md), before any gather uses it.

A test-only `take` kernel: its body is built with the real `Emitter.checked_index`, compiled
through the real build path (`build_object`: MLIR passes, LLVM, the object cache), linked by
`Kernel.from_decomposition`, bound in a binding table and called by every runtime call kind
(`Kernel.__call__`, `ThunkStep` whole and split, `KernelCall` whole and split, `FastPath`).
One kernel (dynamic length) serves every case. Also: a C kernel of ABI v2 that reports an
error, and ABI v1 kernels unchanged.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect.errors import FusebindError, IndexOutOfBounds
from fusebind.lowering.build import build_object
from fusebind.lowering.decompose import Decomposition, kernel_signature
from fusebind.lowering.emit import CheckedKernel, TensorSpec, emit_linalg
from fusebind.lowering.emitter import Emitter
from fusebind.lowering.index_checks import STATUS, STATUS_TYPE
from fusebind.lowering.linalg_types import ttype
from fusebind.lowering.scalar_text import TextScalarBuilder
from fusebind.runtime.bindings import BindingKey, global_bindings
from fusebind.runtime.call import KernelCall
from fusebind.runtime.dtypes import DType, KernelSignature, descriptor_for
from fusebind.runtime.kernel import IndexCheck, Kernel, KernelError
from fusebind.runtime.session import default_session
from fusebind.runtime.steps import FastPath, ThunkStep
from fusebind.runtime.testing import isolated_global_state

N = 5  # the axis the indices index
WHAT = "axis 0 of test.take"


def take_kernel_text(n: int, name: str = "fb_test_take") -> tuple[str, Emitter]:
    """func @name(x: memref<? x n x f32>, idx: memref<? x i64>, out: memref<? x f32>, status):
    out[i] = x[i, idx[i]] (take_along_axis on axis 1), the index checked by
    `Emitter.checked_index` as a gather lowering does. Every operand has the leading axis, so
    calls may be split along it."""
    em = Emitter(None)
    em.sources = (1,)  # the index comes from input 1
    b = TextScalarBuilder(em.fresh, None)
    p, acc, row = em.fresh("x"), em.fresh("o"), em.fresh("i")
    b.bind(p, "i64")
    b.lines.append(f"{row} = linalg.index 0 : index")
    idx = em.checked_index(b, p, n, WHAT)
    v = em.fresh("v")
    b.lines.append(f"{v} = tensor.extract %t0[{row}, {idx}] : tensor<?x{n}xf32>")
    out = em.fresh("r")
    maps = "[affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>]"
    em.lines.append(f'{out} = linalg.generic {{indexing_maps = {maps}, iterator_types = ["parallel"]}} '
                    f"ins(%t1 : tensor<?xi64>) outs({em.empty(['%m'], 'f32')} : tensor<?xf32>) {{")
    em.lines.append(f"^bb0({p}: i64, {acc}: f32):")
    em.lines += ["  " + line for line in b.lines]
    em.lines += [f"  linalg.yield {v} : f32", "} -> tensor<?xf32>"]
    body = [f"%t0 = bufferization.to_tensor %in0 restrict : memref<?x{n}xf32> to tensor<?x{n}xf32>",
            "%t1 = bufferization.to_tensor %in1 restrict : memref<?xi64> to tensor<?xi64>",
            "%c0 = arith.constant 0 : index", "%m = tensor.dim %t1, %c0 : tensor<?xi64>", *em.lines,
            f"bufferization.materialize_in_destination {out} in restrict writable %out0 : "
            "(tensor<?xf32>, memref<?xf32>) -> ()", "return"]
    text = (f"module {{\nfunc.func @{name}(%in0: memref<?x{n}xf32>, %in1: memref<?xi64>, %out0: memref<?xf32>, "
            f"{STATUS}: {STATUS_TYPE}) attributes {{llvm.emit_c_interface}} {{\n"
            + "".join(f"  {line}\n" for line in body) + "}\n}\n")
    return text, em


@pytest.fixture(scope="module")
def take() -> Kernel:
    text, em = take_kernel_text(N)
    emitted = CheckedKernel(text, "fb_test_take", (TensorSpec("f32", (None, N)), TensorSpec("i64", (None,))),
                            (TensorSpec("f32", (None,)),), False, tuple(em.checks), tuple(em.check_sources))
    built = build_object(emitted)
    decomposition = Decomposition(None, built.object_code, built.symbol,
                                  kernel_signature(emitted.inputs, emitted.outputs), emitted)
    return Kernel.from_decomposition(decomposition)


def rows(m: int) -> np.ndarray:
    return (np.arange(m * N, dtype=np.float32) + 1).reshape(m, N).copy()  # owns its memory (no base)


def along(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """numpy's answer: np.take_along_axis on axis 1."""
    return np.take_along_axis(x, idx[:, None], 1)[:, 0]


X = rows(8)
GOOD = np.array([0, 1, -1, 4, 2, 3, -5, 0], np.int64)
MESSAGE = "test.take: index {i} is out of bounds for axis 0 with size 5"


def bad(*pairs: tuple[int, int], n: int = 8) -> np.ndarray:
    idx = np.zeros(n, np.int64)
    for pos, value in pairs:
        idx[pos] = value
    return idx


def test_the_kernel_is_abi_v2_and_its_checks_travel_with_it(take: Kernel) -> None:
    assert take.signature.status and take.signature.abi == 2
    assert take.signature.dtypes == (DType.F32, DType.I64, DType.F32)  # the binding row has no status
    assert take.checks == (IndexCheck(WHAT, (1,)),)
    assert str(take.signature).endswith("+ status memref<4xi64>")
    assert take.signature.flat().outputs == ((DType.F32, 1), (DType.I64, 1)) and not take.signature.flat().status


def test_direct_call_values_and_error(take: Kernel) -> None:
    out = np.empty(8, np.float32)
    take(descriptor_for(X), descriptor_for(GOOD), descriptor_for(out))
    np.testing.assert_array_equal(out, along(X, GOOD))
    with pytest.raises(IndexOutOfBounds) as info:
        take(descriptor_for(X), descriptor_for(bad((3, 7), (5, -9))), descriptor_for(out))
    assert isinstance(info.value, IndexError) and isinstance(info.value, FusebindError)
    assert MESSAGE.format(i=7) in str(info.value) and "kernel input #1" in str(info.value)
    assert (info.value.index, info.value.size) == (7, 5)
    # the first bad index in loop order, negative ones included; then a good call is clean again
    with pytest.raises(IndexOutOfBounds, match=MESSAGE.format(i=-6)):
        take(descriptor_for(X), descriptor_for(bad((1, -6), (2, 5))), descriptor_for(out))
    take(descriptor_for(X), descriptor_for(GOOD[::-1].copy()), descriptor_for(out))
    np.testing.assert_array_equal(out, along(X, GOOD[::-1]))


def test_bound_in_a_table_and_called_through_its_row(take: Kernel) -> None:
    with isolated_global_state():
        from fusebind.runtime.bindings import extend_global_bindings

        extend_global_bindings(lambda t: t.bind(BindingKey.static("test_take"), ["f32", "i64", "f32"], "cpu", take))
        (row,) = global_bindings().lookup(BindingKey.static("test_take"), ["f32", "i64", "f32"], "cpu")
        out = np.empty(8, np.float32)
        with pytest.raises(IndexOutOfBounds, match=MESSAGE.format(i=5)):
            row.kernel(descriptor_for(X), descriptor_for(bad((0, 5))), descriptor_for(out))
        row.kernel(descriptor_for(X), descriptor_for(GOOD), descriptor_for(out))
        np.testing.assert_array_equal(out, along(X, GOOD))


@pytest.mark.parametrize("how", ["thunk", "descriptors"])
def test_step_calls_check_the_status(take: Kernel, how: str) -> None:
    shapes = [(8, N), (8,)], [(8,)]
    step = ThunkStep(take, *shapes, False, 1) if how == "thunk" else KernelCall(take, *shapes)
    out = np.empty(8, np.float32)

    def call(idx: np.ndarray) -> None:
        step([X, idx], [out]) if how == "thunk" else step([X, idx, out])  # type: ignore[call-arg]

    call(GOOD)
    np.testing.assert_array_equal(out, along(X, GOOD))
    with pytest.raises(IndexOutOfBounds, match=MESSAGE.format(i=-7)):
        call(bad((6, -7), (7, 9)))
    call(GOOD[::-1].copy())
    np.testing.assert_array_equal(out, along(X, GOOD[::-1]))


@pytest.mark.parametrize("how", ["thunk", "descriptors"])
def test_split_calls_give_each_chunk_its_status_and_report_the_first(take: Kernel, how: str) -> None:
    m = 600_000
    shapes = [(m, N), (m,)], [(m,)]
    step = (ThunkStep(take, *shapes, True, 2) if how == "thunk"
            else KernelCall(take, *shapes, splittable=True, threads=2))
    assert step.chunks == 2
    out = np.empty(m, np.float32)
    x, idx = rows(m), np.arange(m, dtype=np.int64) % N

    def call(i: np.ndarray) -> None:
        step([x, i], [out]) if how == "thunk" else step([x, i, out])  # type: ignore[call-arg]

    call(idx)
    np.testing.assert_array_equal(out, along(x, idx))
    for pairs, first in ([((500_000, 8), (10, 6)), 6], [((500_000, 8),), 8], [((299_999, -6), (300_000, 7)), -6]):
        with pytest.raises(IndexOutOfBounds, match=MESSAGE.format(i=first)):
            call(bad(*pairs, n=m))


def test_fast_path_checks_the_status_and_names_the_argument(take: Kernel) -> None:
    step = ThunkStep(take, [(8, N), (8,)], [(8,)], False, 1)
    session = default_session()
    fast = FastPath(session.table.generation, step.thunk, (8,), np.dtype(np.float32), session=session)
    np.testing.assert_array_equal(fast.call([X, GOOD]), along(X, GOOD))
    fast.name_arguments("f", ["x", "idx"])
    with pytest.raises(IndexOutOfBounds, match=r"fusebind: in 'f': " + MESSAGE.format(i=8) + r" \(from argument 'idx'"):
        fast.call([X, bad((2, 8))])
    assert fast.calls == 1  # the failed call returned nothing and is not counted
    out = np.empty(8, np.float32)
    assert fast.call([X, GOOD], out) is out
    np.testing.assert_array_equal(out, along(X, GOOD))


def test_concurrent_calls_each_get_their_own_status(take: Kernel) -> None:
    thunk = ThunkStep(take, [(8, N), (8,)], [(8,)], False, 1)
    descriptors = KernelCall(take, [(8, N), (8,)], [(8,)])
    wrong: list[str] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for k in range(60):
            idx = rng.integers(-N, N, 8)
            is_bad = k % 2 == 1
            if is_bad:
                idx[rng.integers(0, 8)] = N + seed
            out = np.empty(8, np.float32)
            try:
                thunk([X, idx], [out]) if k % 3 else descriptors([X, idx, out])
                if is_bad:
                    wrong.append(f"no error for {idx}")
                elif not np.array_equal(out, along(X, idx)):
                    wrong.append(f"wrong values for {idx}")
            except IndexOutOfBounds as exc:
                if not is_bad or f"index {N + seed} " not in str(exc):
                    wrong.append(f"{exc} for {idx}")

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_a_python_callback_kernel_of_abi_v2_reports_through_the_guarded_step() -> None:
    from fusebind.runtime.steps import GuardedStep

    sig = KernelSignature(((DType.I64, 1),), ((DType.I64, 1),), status=True)

    def first_negative(idx, out, status) -> None:  # out = idx; a negative index is "bad"
        n = idx.contents.sizes[0]
        for i in range(n):
            v = idx.contents.aligned[i]
            out.contents.aligned[i] = v
            if v < 0 and status.contents.aligned[0] == 0:
                status.contents.aligned[0], status.contents.aligned[1], status.contents.aligned[2] = 1, v, n

    kernel = Kernel.from_python(first_negative, signature=sig, checks=("axis 0 of py.check",))
    step = GuardedStep(kernel, None)
    out = np.empty(4, np.int64)
    step([np.array([3, 2, 1, 0])], [out])
    np.testing.assert_array_equal(out, [3, 2, 1, 0])
    with pytest.raises(IndexOutOfBounds, match=r"py\.check: index -2 is out of bounds for axis 0 with size 4"):
        step([np.array([3, -2, -1, 0])], [out])


def test_checked_index_refuses_a_non_i64_index() -> None:
    em = Emitter(None)
    b = TextScalarBuilder(em.fresh, None)
    with pytest.raises(fb.FusebindError, match="checked_index takes an i64 index, got i32"):
        em.checked_index(b, b.bind("%p", "i32"), 4, WHAT)


def test_a_kernel_without_checks_stays_abi_v1() -> None:
    from fusebind.dialect import parse_module

    module = parse_module("""
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = prim.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}""")
    emitted = emit_linalg(next(iter(module.ops)), "fb_plain")
    assert not isinstance(emitted, CheckedKernel) and "status" not in emitted.text
    assert not kernel_signature(emitted.inputs, emitted.outputs).status


def test_checks_need_the_status_operand() -> None:
    sig = KernelSignature(((DType.F32, 1),), ((DType.F32, 1),))
    with pytest.raises(KernelError, match="ABI v1"):
        Kernel.from_python(lambda *a: None, signature=sig, checks=("axis 0 of x",))
    with pytest.raises(fb.FusebindError, match="status must be a bool"):
        KernelSignature(((DType.F32, 1),), ((DType.F32, 1),), status=1)  # type: ignore[arg-type]


C_TAKE = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } memref1f;
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } memref2f;
typedef struct { int64_t *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } memref1l;
/* ABI v2: the status memref<4xi64> after the outputs: [code, index, size, 0] */
void take_v2(memref2f *x, memref1l *idx, memref1f *out, memref1l *status) {
  int64_t n = x->sizes[1];
  for (int64_t i = 0; i < out->sizes[0]; ++i) {
    int64_t k = idx->aligned[idx->offset + i * idx->strides[0]];
    int64_t j = k < 0 ? k + n : k;
    if (j < 0 || j >= n) {
      if (status->aligned[0] == 0) { status->aligned[0] = 1; status->aligned[1] = k; status->aligned[2] = n; }
      j = 0;
    }
    out->aligned[out->offset + i * out->strides[0]] = x->aligned[x->offset + i * x->strides[0] + j * x->strides[1]];
  }
}
"""


def test_c_kernel_of_abi_v2_binds_and_raises(c_library) -> None:
    lib = c_library("take_v2", C_TAKE)
    sig = KernelSignature(((DType.F32, 2), (DType.I64, 1)), ((DType.F32, 1),), status=True)
    kernel = Kernel.from_library(lib, "take_v2", signature=sig, checks=("axis 0 of my_take",))
    with isolated_global_state():
        from fusebind.runtime.bindings import extend_global_bindings

        extend_global_bindings(lambda t: t.bind(BindingKey.static("take_v2"), ["f32", "i64", "f32"], "cpu", kernel))
        (row,) = global_bindings().lookup(BindingKey.static("take_v2"), ["f32", "i64", "f32"], "cpu")
        out = np.empty(8, np.float32)
        row.kernel(descriptor_for(X), descriptor_for(GOOD), descriptor_for(out))
        np.testing.assert_array_equal(out, along(X, GOOD))
        with pytest.raises(IndexOutOfBounds, match=r"my_take: index -8 is out of bounds for axis 0 with size 5 "
                                                   r"\(checked in the kernel lib:"):
            row.kernel(descriptor_for(X), descriptor_for(bad((4, -8), (6, 11))), descriptor_for(out))
        step = ThunkStep(row.kernel, [(8, N), (8,)], [(8,)], False, 1)  # the thunk passes its status too
        with pytest.raises(IndexOutOfBounds, match="index 11 is out of bounds"):
            step([X, bad((6, 11))], [out])
