"""The call thunk: one native call that reads the ndarrays itself, and declines what does not fit."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.thunk import ANY_DIM, ThunkCall, thunk_ir

FMA = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = fused.region @fma(%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<4x8xf32>, %y: tensor<8xf32>):
    %m = prim.mul %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %s = prim.add %m, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    fused.yield %s : tensor<4x8xf32>
  }
  func.return %r : tensor<4x8xf32>
}
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    from fusebind.lowering import ObjectCache, decompose_region

    region = next(iter(next(iter(parse_module(FMA).ops)).body.blocks[0].ops))
    dec = decompose_region(region, ["f32", "f32", "f32"], cache=ObjectCache(tmp_path_factory.mktemp("thunk")))
    return Kernel.from_decomposition(dec)


@pytest.fixture(scope="module")
def call(kernel):
    return ThunkCall(kernel, [(4, 8), (8,), (4, 8)])


RNG = np.random.default_rng(3)
A = RNG.standard_normal((4, 8)).astype(np.float32)
B = RNG.standard_normal(8).astype(np.float32)


def test_runs_the_kernel_and_returns_the_output(call) -> None:
    out = np.empty((4, 8), np.float32)
    assert call.function(A, B, out) is out
    np.testing.assert_allclose(out, A * B + B, rtol=1e-6)
    out2 = np.zeros((4, 8), np.float32)
    assert call.released(A, B, out2) is out2  # the GIL-releasing entry computes the same
    np.testing.assert_array_equal(out2, out)


@pytest.mark.parametrize("why, args", [
    ("too few arguments", lambda o: (A, o)),
    ("too many arguments", lambda o: (A, B, o, o)),
    ("wrong dtype", lambda o: (A.astype(np.float64), B, o)),
    ("wrong shape", lambda o: (A[:3], B, o)),
    ("wrong rank", lambda o: (A.reshape(32), B, o)),
    ("not contiguous", lambda o: (np.asfortranarray(A), B, o)),
    ("strided view", lambda o: (np.repeat(A, 2, axis=1)[:, ::2], B, o)),
    ("big-endian", lambda o: (A.astype(">f4"), B, o)),
    ("not an ndarray", lambda o: (A.tolist(), B, o)),
    ("ndarray subclass", lambda o: (np.ma.masked_array(A), B, o)),
    ("read-only output", lambda o: (A, B, np.broadcast_to(o, o.shape))),
    ("unaligned", lambda o: (_unaligned(A), B, o)),
])
def test_declines_what_does_not_fit_without_calling(call, why: str, args) -> None:
    out = np.full((4, 8), 7.0, np.float32)
    assert call.function(*args(out)) is None, why
    assert np.all(out == 7.0), f"{why}: the kernel must not have run"


def _unaligned(a: np.ndarray) -> np.ndarray:
    buf = np.zeros(a.nbytes + 1, np.uint8)
    view = buf[1:].view(np.float32).reshape(a.shape)
    view[...] = a
    assert not view.flags.aligned
    return view


def test_any_dim_accepts_chunks(kernel) -> None:
    # The kernel itself is static (4 rows); a chunk thunk only relaxes the check.
    chunk = ThunkCall(kernel, [(ANY_DIM, 8), (8,), (ANY_DIM, 8)])
    out = np.empty((4, 8), np.float32)
    assert chunk.function(A, B, out) is out
    assert chunk.function(A, B[:4], out) is None  # non-ANY dims are still checked


def test_expected_dims_must_fit_the_signature(kernel) -> None:
    with pytest.raises(ValueError, match=r"ThunkCall: expected dims \[\[4, 8\], \[8\]\] do not fit the kernel"):
        ThunkCall(kernel, [(4, 8), (8,)])


def test_released_entry_lets_threads_run(call) -> None:
    outs = [np.empty((4, 8), np.float32) for _ in range(4)]
    threads = [threading.Thread(target=lambda o=o: [call.released(A, B, o) for _ in range(200)]) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outs:
        np.testing.assert_allclose(o, A * B + B, rtol=1e-6)


def test_ir_has_one_kernel_call_and_both_gil_paths(kernel) -> None:
    text = thunk_ir(kernel.signature)
    assert text.count("call void %kfn(") == 2  # with and without the GIL
    assert "@PyEval_SaveThread" in text and "@Py_IncRef" in text


def test_the_builtin_alone_keeps_its_kernel_alive(tmp_path) -> None:
    """Regression: holding only `ThunkCall.function` once let the kernel's code be
    freed, and the next call jumped into unmapped memory (segfault)."""
    import gc
    import weakref

    from fusebind.lowering import ObjectCache, decompose_region

    region = next(iter(next(iter(parse_module(FMA).ops)).body.blocks[0].ops))
    kernel = Kernel.from_decomposition(decompose_region(region, ["f32", "f32", "f32"], cache=ObjectCache(tmp_path)))
    alive = weakref.ref(kernel)
    fn = ThunkCall(kernel, [(4, 8), (8,), (4, 8)]).function
    del kernel
    gc.collect()
    assert alive() is not None, "the builtin must hold a reference to its kernel"
    out = np.empty((4, 8), np.float32)
    assert fn(A, B, out) is out
    np.testing.assert_allclose(out, A * B + B, rtol=1e-6)
    del fn
    gc.collect()
    assert alive() is None, "dropping the builtin releases the kernel"
