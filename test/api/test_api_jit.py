"""End-to-end: @fb.jit and fb.compile against numpy, tiering, verify, re-plan, errors."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import fusebind as fb
from fusebind.compiler.cost import CostEstimate
from fusebind.runtime.bindings import bindings_generation
from fusebind.runtime.executor import ArgumentError, FusedArmMismatch
from fusebind.runtime.arms import FusedArmMismatchWarning

RNG = np.random.default_rng(0)


def rand(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype.startswith("f"):
        return (RNG.standard_normal(shape)).astype(dtype)
    return RNG.integers(-5, 6, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_arithmetic_with_broadcasting(dtype: str, object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(x, b):
        return fb.maximum(x * 2 + b, b - x) - x

    x, b = rand((4, 8), dtype), rand((8,), dtype)
    out = f(x, b)
    ref = np.maximum(x * 2 + b, b - x) - x
    assert out.dtype == ref.dtype
    np.testing.assert_allclose(out, ref, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transcendental_and_reductions(dtype: str, object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(x):
        return fb.softmax(x), fb.tanh(x).sum(axis=1), x.mean(axis=0, keepdims=True)

    x = rand((3, 5), dtype)
    s, t, m = f(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(s, e / e.sum(axis=-1, keepdims=True), rtol=tol, atol=tol)
    np.testing.assert_allclose(t, np.tanh(x).sum(axis=1), rtol=tol, atol=tol)
    np.testing.assert_allclose(m, x.mean(axis=0, keepdims=True), rtol=tol, atol=tol)
    assert s.dtype == t.dtype == m.dtype == np.dtype(dtype)


def test_nep50_scalars_and_numpy_scalars(object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(x):
        return x * 2.0, np.float64(2.0) * x, x / 2, -x

    x = rand((6,), "float32")
    a, b, c, d = f(x)
    assert a.dtype == np.float32 and b.dtype == np.float64 and c.dtype == np.float32
    np.testing.assert_allclose(b, np.float64(2.0) * x)
    np.testing.assert_array_equal(d, -x)

    @fb.jit(cache=object_cache)
    def g(i):
        return i / 2, i * 3

    i = rand((4,), "int32")
    h, k = g(i)
    assert h.dtype == np.float64 and k.dtype == np.int32
    np.testing.assert_allclose(h, i / 2)


def test_shapes_compare_where_matmul(object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(a, w):
        y = a @ w
        return fb.where(y > 0, y, 0.1 * y).T.reshape(-1)

    a, w = rand((3, 4), "float32"), rand((4, 2), "float32")
    y = a @ w
    np.testing.assert_allclose(f(a, w), np.where(y > 0, y, 0.1 * y).T.reshape(-1), rtol=1e-5, atol=1e-6)


def test_layer_norm_gelu(object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(x, w, b):
        return fb.gelu(fb.layer_norm(x, w, b))

    x, w, b = rand((4, 16), "float32"), rand((16,), "float32"), rand((16,), "float32")
    mu = x.mean(-1, keepdims=True)
    ln = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b
    ref = 0.5 * ln * (1 + np.tanh(np.sqrt(2 / np.pi) * (ln + 0.044715 * ln ** 3)))
    np.testing.assert_allclose(f(x, w, b), ref, rtol=1e-4, atol=1e-5)


def test_fresh_outputs_and_cache_hits(object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(x):
        return fb.exp(x) + 1.0

    x = rand((8,), "float32")
    o1 = f(x)
    o2 = f(x)
    assert o1 is not o2 and not np.shares_memory(o1, o2)
    np.testing.assert_allclose(o1, np.exp(x) + 1, rtol=1e-6)
    assert f.stats.calls == 2 and f.stats.cache_hits == 1 and f.stats.traces == 1


def test_non_contiguous_input(object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(x, y):
        return fb.relu(x + y)

    x = rand((8, 6), "float32")
    xt = x.T  # F-ordered view
    y = rand((6, 8), "float32")
    np.testing.assert_allclose(f(xt, y), np.maximum(xt + y, 0), rtol=1e-6)


# --------------------------------------------------------------------------- tiering and re-plan

def test_background_tiering_arm0_then_fused(object_cache) -> None:
    release = threading.Event()

    @fb.jit(cache=object_cache, background=True, before_compile=lambda name: release.wait(30))
    def f(x, b):
        return fb.relu(x + b)

    x, b = rand((4, 8), "float32"), rand((8,), "float32")
    ref = np.maximum(x + b, 0)
    np.testing.assert_allclose(f(x, b), ref)
    np.testing.assert_allclose(f(x, b), ref)
    assert f.stats.fused_calls == 0  # the fused kernel is held back: every op ran as a primitive
    release.set()
    assert f.wait_compiled(60)
    np.testing.assert_allclose(f(x, b), ref, rtol=1e-6)
    assert f.stats.fused_calls == 1 and f.stats.compiles + f.stats.object_cache_hits == 1
    assert "chosen: fused" in f.explain(x, b)


def test_generation_bump_replans(object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(x):
        return fb.exp(x) * 2.0

    x = rand((5,), "float64")
    f(x)
    plans = f.stats.plans
    f(x)
    assert f.stats.plans == plans  # same generation: cached plan
    from fusebind.runtime.testing import noop_kernel, simple_signature
    from fusebind.runtime.fused_kernels import register_runtime_kernel

    before = bindings_generation()
    register_runtime_kernel(1 << 20, ("f32", "f32"), "cpu", noop_kernel(simple_signature()))
    assert bindings_generation() == before + 1
    np.testing.assert_allclose(f(x), np.exp(x) * 2.0)
    assert f.stats.plans == plans + 1


# --------------------------------------------------------------------------- verify

REGION = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = fused.region @addexp(%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<4x8xf32>, %y: tensor<8xf32>):
    %s = prim.add %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %e = prim.exp %s : tensor<4x8xf32> -> tensor<4x8xf32>
    fused.yield %e : tensor<4x8xf32>
  }
  func.return %r : tensor<4x8xf32>
}
"""


def _adopt_zero_kernel() -> None:
    from fusebind.dialect import parse_module
    from fusebind.runtime.dtypes import KernelSignature
    from fusebind.runtime.fused_kernels import adopt_runtime_fused
    from fusebind.runtime.testing import noop_kernel

    sig = KernelSignature((("f32", 2), ("f32", 1)), (("f32", 2),))

    def zero(*descs) -> None:
        out = descs[-1].contents
        ctypes.memset(ctypes.cast(out.aligned, ctypes.c_void_p), 0, out.sizes[0] * out.sizes[1] * 4)

    region = next(iter(next(iter(parse_module(REGION).ops)).body.blocks[0].ops))
    adopt_runtime_fused("addexp", region, noop_kernel(sig, body=zero), ("f32", "f32", "f32"), "cpu",
                        cost=CostEstimate(1.0, 1.0, 1.0))


def test_verify_catches_a_wrong_kernel(object_cache) -> None:
    _adopt_zero_kernel()
    a, b = rand((4, 8), "float32"), rand((8,), "float32")
    plain = fb.compile(REGION, cache=object_cache)
    assert np.all(plain(a, b) == 0)  # without verify the (wrong) fused arm runs unchecked
    checked = fb.compile(REGION, cache=object_cache, verify=True)
    with pytest.raises(FusedArmMismatch, match=r"region @addexp \(FusedOpId 65536\) result #0: the fused arm "
                                               r"differs from arm 0 in 32 of 32 elements") as info:
        checked(a, b)
    assert info.value.region == "addexp" and info.value.fused_id == 65536
    warned = fb.compile(REGION, cache=object_cache, verify=True, verify_action="warn")
    with pytest.warns(FusedArmMismatchWarning, match="region @addexp"):
        warned(a, b)


def test_compile_runs_regions_fused(object_cache) -> None:
    f = fb.compile(REGION, cache=object_cache, verify=True)
    a, b = rand((4, 8), "float32"), rand((8,), "float32")
    np.testing.assert_allclose(f(a, b), np.exp(a + b), rtol=1e-6)
    assert f.stats.arms.fused_calls == 1


# --------------------------------------------------------------------------- bad input

def test_compile_wrong_dtype(object_cache) -> None:
    f = fb.compile(REGION, cache=object_cache)
    with pytest.raises(ArgumentError) as info:
        f(np.zeros((4, 8)), np.zeros(8, np.float32))
    assert str(info.value) == "fusebind: argument 'a' (#0) of 'f': expected float32[4,8], got float64[4,8]"


def test_compile_wrong_rank_and_shape(object_cache) -> None:
    f = fb.compile(REGION, cache=object_cache)
    with pytest.raises(ArgumentError) as info:
        f(np.zeros((4, 8), np.float32), np.zeros((1, 8), np.float32))
    assert str(info.value) == "fusebind: argument 'b' (#1) of 'f': expected float32[8], got float32[1,8]"
    with pytest.raises(ArgumentError) as info:
        f(np.zeros((4, 7), np.float32), np.zeros(8, np.float32))
    assert str(info.value) == "fusebind: argument 'a' (#0) of 'f': expected float32[4,8], got float32[4,7]"
    with pytest.raises(ArgumentError, match=r"^fusebind: 'f' takes 2 arguments \(a, b\), got 1$"):
        f(np.zeros((4, 8), np.float32))


def test_jit_shape_mismatch_names_arguments() -> None:
    @fb.jit
    def g(x, y):
        return x + y

    with pytest.raises(fb.TraceError) as info:
        g(np.zeros((3, 4), np.float32), np.zeros(5, np.float32))
    assert str(info.value) == ("fusebind: in 'g' (arguments 'x' (#0) float32[3,4], 'y' (#1) float32[5]): "
                               "operands of '+' have shapes [3,4] and [5], which do not broadcast")


def test_jit_unsupported_dtype_and_op() -> None:
    @fb.jit
    def g(x):
        return np.sort(x)

    from fusebind.api.capture import SUPPORTED_NAMES

    with pytest.raises(fb.ArgumentError) as info:
        g(np.zeros(3, np.complex64))
    assert str(info.value) == (f"fusebind: argument 'x' (#0) of 'g': dtype complex64 is not supported; use "
                               f"{SUPPORTED_NAMES} (native byte order)")
    assert SUPPORTED_NAMES.startswith("float32, float64, int32, int64, bool")  # the element table's order
    with pytest.raises(fb.UnsupportedOperation, match=r"^fusebind: in 'g': numpy.sort is not supported on traced "
                                                      r"arrays; fusebind has no sort op"):
        g(np.zeros(3, np.float32))
