"""Shape specialization (dynamic dims run fused kernels), the one-call fast path, and the threaded split."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.runtime.bindings import bindings_generation
from fusebind.runtime.call import SPLIT_THRESHOLD
from fusebind.runtime.executor import ArgumentError

RNG = np.random.default_rng(7)

FMA_RELU = """
func.func @f(%a: tensor<?xf32>, %b: tensor<?xf32>, %c: tensor<?xf32>) -> tensor<?xf32> {
  %m = prim.mul %a, %b : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %s = prim.add %m, %c : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %q = prim.relu %s : tensor<?xf32> -> tensor<?xf32>
  func.return %q : tensor<?xf32>
}
"""

SOFTMAX = """
func.func @f(%a: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %m = prim.reduce_max %a {axes = array<i64: 1>, keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %s = prim.sub %a, %m : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  %e = prim.exp %s : tensor<?x?xf32> -> tensor<?x?xf32>
  %t = prim.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %r = prim.div %e, %t : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  func.return %r : tensor<?x?xf32>
}
"""

RESHAPE = """
func.func @f(%a: tensor<?x?xf32>) -> tensor<?xf32> {
  %e = prim.exp %a : tensor<?x?xf32> -> tensor<?x?xf32>
  %r = prim.reshape %e : tensor<?x?xf32> -> tensor<?xf32>
  %n = prim.neg %r : tensor<?xf32> -> tensor<?xf32>
  func.return %n : tensor<?xf32>
}
"""


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------- specialization

def test_dynamic_dims_run_a_fused_kernel_per_shape(object_cache) -> None:
    f = fb.compile(FMA_RELU, cache=object_cache)
    for n in (16, 1000, 3):
        a, b, c = rand(n), rand(n), rand(n)
        np.testing.assert_allclose(f(a, b, c), np.maximum(a * b + c, 0), rtol=1e-6)
        text = f.explain(a, b, c)
        assert "chosen: fused" in text and "needs static shapes" not in text
    assert f.stats.arms.arm0_calls == 0 and f.stats.arms.fused_calls == 3
    assert "tensor<1000xf32>" in f.optimized(rand(1000), rand(1000), rand(1000))


def test_dynamic_row_reduction_is_fused(object_cache) -> None:
    f = fb.compile(SOFTMAX, cache=object_cache, verify=True)
    for shape in ((3, 5), (8, 33)):
        x = rand(*shape)
        np.testing.assert_allclose(f(x), softmax(x), rtol=1e-5, atol=1e-6)
    assert f.stats.arms.fused_calls == 2 and f.stats.arms.arm0_calls == 0


def test_shape_only_ops_are_named_in_the_notes(object_cache) -> None:
    f = fb.compile(RESHAPE, cache=object_cache)
    x = rand(3, 4)
    np.testing.assert_allclose(f(x), -np.exp(x).reshape(-1), rtol=1e-6)
    assert "note: prim.reshape: shape-only op, runs its numpy reference (reshape: a view; no kernel)" in f.explain(x)


def test_shapes_that_do_not_fit_an_op_name_the_arguments(object_cache) -> None:
    f = fb.compile(FMA_RELU, cache=object_cache)
    with pytest.raises(ArgumentError) as info:
        f(rand(4), rand(5), rand(4))
    assert str(info.value) == ("fusebind: the shapes of the arguments of 'f' (a: [4], b: [5], c: [4]) do not fit "
                               "its ops: prim.mul: operand shapes (4,), (5,) do not broadcast")


# --------------------------------------------------------------------------- fast path

def test_fast_path_serves_repeat_calls_with_fresh_outputs(object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(a, b, c):
        return fb.relu(a * b + c)

    a, b, c = rand(16), rand(16), rand(16)
    first = f(a, b, c)
    assert f._fast is not None  # the plan is one fused kernel on the arguments
    outs = [f(a, b, c) for _ in range(5)]
    for o in outs:
        np.testing.assert_allclose(o, np.maximum(a * b + c, 0), rtol=1e-6)
    assert len({id(o) for o in [first, *outs]}) == 6 and not np.shares_memory(outs[0], outs[1])
    s = f.stats
    assert s.calls == 6 and s.fused_calls == 6 and s.traces == 1


def test_fast_path_declines_and_the_slow_path_handles_it(object_cache) -> None:
    @fb.jit(cache=object_cache)
    def f(a, b):
        return fb.exp(a) * b

    a, b = rand(4, 6), rand(4, 6)
    f(a, b)
    at = np.asfortranarray(a)  # same shape and dtype, not C-contiguous: converted on the slow path
    np.testing.assert_allclose(f(at, b), np.exp(a) * b, rtol=1e-6)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)  # another signature: traced anew
    np.testing.assert_allclose(f(a64, b64), np.exp(a64) * b64, rtol=1e-12)
    assert f.stats.traces == 2

    g = fb.compile(FMA_RELU, cache=object_cache)
    x = rand(8)
    g(x, x, x)
    with pytest.raises(ArgumentError, match=r"^fusebind: argument 'b' \(#1\) of 'f': expected float32\[\?\], "
                                            r"got float64\[8\]$"):
        g(x, x.astype(np.float64), x)
    with pytest.raises(ArgumentError, match=r"^fusebind: 'f' takes 3 arguments \(a, b, c\), got 2$"):
        g(x, x)


def test_generation_bump_disables_the_fast_path_until_replanned(object_cache) -> None:
    from fusebind.runtime.fused_kernels import register_runtime_kernel
    from fusebind.runtime.testing import noop_kernel, simple_signature

    f = fb.compile(FMA_RELU, cache=object_cache)
    x = rand(8)
    f(x, x, x)
    plans = f.stats.plans
    f(x, x, x)
    assert f.stats.plans == plans
    register_runtime_kernel(1 << 20, ("f32", "f32"), "cpu", noop_kernel(simple_signature()))
    np.testing.assert_allclose(f(x, x, x), np.maximum(x * x + x, 0), rtol=1e-6)
    assert f.stats.plans == plans + 1
    assert f.executor.fast is not None and f.executor.fast.generation == bindings_generation()


def test_verify_mode_takes_no_fast_path(object_cache) -> None:
    f = fb.compile(FMA_RELU, cache=object_cache, verify=True)
    x = rand(8)
    f(x, x, x)
    assert f.executor.fast is None


# --------------------------------------------------------------------------- threads

@pytest.mark.parametrize("n", [SPLIT_THRESHOLD + 1, 2 * SPLIT_THRESHOLD + 3])
def test_threaded_elementwise_split_is_identical(object_cache, n: int) -> None:
    one = fb.compile(FMA_RELU, cache=object_cache, threads=1)
    two = fb.compile(FMA_RELU, cache=object_cache, threads=2)
    a, b, c = rand(n), rand(n), rand(n)
    np.testing.assert_array_equal(two(a, b, c), one(a, b, c))
    np.testing.assert_allclose(two(a, b, c), np.maximum(a * b + c, 0), rtol=1e-6)
    assert "split over 2 threads" in two.explain(a, b, c)
    assert "split over" not in one.explain(a, b, c)  # threads=1 disables it


def test_threaded_row_reduction_splits_by_rows(object_cache) -> None:
    rows = SPLIT_THRESHOLD // 257 + 2  # odd: not divisible by the thread count
    rows += 1 - rows % 2
    x = rand(rows, 257)
    one = fb.compile(SOFTMAX, cache=object_cache, threads=1)
    two = fb.compile(SOFTMAX, cache=object_cache, threads=2)
    assert "split over 2 threads" in two.explain(x)
    np.testing.assert_array_equal(two(x), one(x))
    np.testing.assert_allclose(two(x), softmax(x), rtol=1e-5, atol=1e-6)


def test_small_calls_are_not_split(object_cache) -> None:
    two = fb.compile(FMA_RELU, cache=object_cache, threads=2)
    x = rand(SPLIT_THRESHOLD - 1)
    two(x, x, x)
    assert "split over" not in two.explain(x, x, x)
