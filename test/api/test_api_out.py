"""`out=`: results written into the caller's arrays, and the checks that refuse what does not fit."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.runtime.executor import ArgumentError

RNG = np.random.default_rng(11)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def relu_chain(a, b, c):
    return fb.relu(a * b + c)


def two_results(a, b):
    return a * b + 1.0, fb.exp(a - b)


def ref_two(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return a * b + np.float32(1.0), np.exp(a - b)


INPLACE = """
func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %r = fused.region @addexp(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> attributes {fused.inplace = array<i64: 0, 0>} {
  ^bb0(%x: tensor<64xf32>, %y: tensor<64xf32>):
    %s = prim.add %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
    %e = prim.exp %s : tensor<64xf32> -> tensor<64xf32>
    fused.yield %e : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
"""


@pytest.mark.parametrize("n", [100, 1 << 15])
def test_out_is_written_and_returned_on_the_fast_path(object_cache, n: int) -> None:
    f = fb.jit(relu_chain, cache=object_cache, threads=1)
    a, b, c = rand(n), rand(n), rand(n)
    first = f(a, b, c)  # plans; later calls take the fast path
    buf = np.full(n, np.nan, np.float32)
    calls = f.stats.fused_calls
    assert f(a, b, c, out=buf) is buf
    np.testing.assert_allclose(buf, np.maximum(a * b + c, 0), rtol=1e-6)
    np.testing.assert_array_equal(buf, first)
    assert f.stats.fused_calls == calls + 1


def test_out_on_the_first_call_and_for_a_view_of_a_larger_array(object_cache) -> None:
    f = fb.jit(relu_chain, cache=object_cache, threads=1)
    a, b, c = rand(64), rand(64), rand(64)
    big = np.zeros(128, np.float32)
    out = big[32:96]  # a contiguous view: slow path, exact overlap check, written in place
    assert f(a, b, c, out=out) is out
    np.testing.assert_allclose(big[32:96], np.maximum(a * b + c, 0), rtol=1e-6)
    assert not big[:32].any() and not big[96:].any()


def test_several_results_into_a_tuple_with_none(object_cache) -> None:
    f = fb.jit(two_results, cache=object_cache)
    a, b = rand(8, 16), rand(8, 16)
    o1, o2 = np.empty((8, 16), np.float32), np.empty((8, 16), np.float32)
    r1, r2 = f(a, b, out=(o1, o2))
    assert r1 is o1 and r2 is o2
    e1, e2 = ref_two(a, b)
    np.testing.assert_allclose(o1, e1, rtol=1e-6)
    np.testing.assert_allclose(o2, e2, rtol=1e-5)
    p2 = np.empty((8, 16), np.float32)
    r1, r2 = f(a, b, out=[None, p2])
    assert r2 is p2 and r1 is not o1
    np.testing.assert_allclose(r1, e1, rtol=1e-6)
    np.testing.assert_allclose(p2, e2, rtol=1e-5)


def test_returned_argument_is_copied_into_out(object_cache) -> None:
    f = fb.jit(lambda x, y: (x, x + y), cache=object_cache)
    x, y = rand(16), rand(16)
    o1, o2 = np.empty(16, np.float32), np.empty(16, np.float32)
    r1, r2 = f(x, y, out=(o1, o2))
    assert r1 is o1 and r2 is o2
    np.testing.assert_array_equal(o1, x)
    np.testing.assert_allclose(o2, x + y, rtol=1e-6)


def test_subclass_out_is_written(object_cache, tmp_path) -> None:
    f = fb.jit(relu_chain, cache=object_cache, threads=1)
    a, b, c = rand(256), rand(256), rand(256)
    f(a, b, c)
    mm = np.memmap(tmp_path / "out.bin", dtype=np.float32, mode="w+", shape=(256,))
    assert f(a, b, c, out=mm) is mm
    np.testing.assert_allclose(np.asarray(mm), np.maximum(a * b + c, 0), rtol=1e-6)


def test_compile_takes_out(object_cache) -> None:
    f = fb.compile(INPLACE, cache=object_cache)
    a, b = rand(64), rand(64)
    buf = np.empty(64, np.float32)
    assert f(a, b, out=buf) is buf
    np.testing.assert_allclose(buf, np.exp(a + b), rtol=1e-5)
    assert f(a, b, out=buf) is buf  # fast path
    np.testing.assert_allclose(buf, np.exp(a + b), rtol=1e-5)


# --------------------------------------------------------------------------- refusals

def _err(f, *args, out) -> str:
    with pytest.raises(ArgumentError) as info:
        f(*args, out=out)
    return str(info.value)


def test_out_dtype_shape_count_type(object_cache) -> None:
    f = fb.jit(relu_chain, cache=object_cache)
    a = rand(32)
    f(a, a, a)
    assert _err(f, a, a, a, out=np.empty(32)) == (
        "fusebind: out of 'relu_chain': expected float32[32], got float64[32]; results are not cast or broadcast")
    assert _err(f, a, a, a, out=np.empty((1, 32), np.float32)) == (
        "fusebind: out of 'relu_chain': expected float32[32], got float32[1,32]; results are not cast or broadcast")
    assert _err(f, a, a, a, out=[0.0] * 32) == (
        "fusebind: 'relu_chain' returns 1 array, but out= gives 32; pass one array")
    assert _err(f, a, a, a, out=(np.empty(32, np.float32), np.empty(32, np.float32))) == (
        "fusebind: 'relu_chain' returns 1 array, but out= gives 2; pass one array")
    assert _err(f, a, a, a, out="x") == "fusebind: out of 'relu_chain' must be a numpy array float32[32], got str"
    g = fb.jit(two_results, cache=object_cache)
    assert _err(g, a, a, out=np.empty(32, np.float32)) == (
        "fusebind: 'two_results' returns 2 arrays, but out= gives 1; pass a tuple of 2 arrays (or None)")


def test_out_layout_and_writeable(object_cache) -> None:
    f = fb.jit(relu_chain, cache=object_cache)
    a = rand(32)
    f(a, a, a)
    strided = np.empty(64, np.float32)[::2]
    assert _err(f, a, a, a, out=strided) == (
        "fusebind: out of 'relu_chain' is not C-contiguous (strides (8,)); pass a contiguous array, "
        "e.g. np.empty(shape, dtype)")
    ro = np.empty(32, np.float32)
    ro.flags.writeable = False
    assert _err(f, a, a, a, out=ro) == "fusebind: out of 'relu_chain' is read-only; pass a writeable array"
    assert not np.isnan(f(a, a, a)).any()


@pytest.mark.parametrize("n", [32, 1 << 15])
def test_out_overlapping_an_input_is_refused_naming_it(object_cache, n: int) -> None:
    f = fb.jit(relu_chain, cache=object_cache, threads=1)
    a, b, c = rand(n), rand(n), rand(n)
    f(a, b, c)
    keep = (a.copy(), b.copy(), c.copy())
    msg = ("fusebind: out of 'relu_chain' overlaps argument '{}' (#{}) in memory; the kernel would read inputs it "
           "has already overwritten. Pass an output array that shares no memory with the inputs (only a region "
           "marked fused.inplace may write over its operand)")
    assert _err(f, a, b, c, out=b) == msg.format("b", 1)
    big = np.concatenate([c, c])
    shifted = big[n // 2: n // 2 + n]  # partial overlap with the input c2 = big[:n]
    assert _err(f, a, b, big[:n], out=shifted) == msg.format("c", 2)
    for x, k in zip((a, b, c), keep):
        np.testing.assert_array_equal(x, k)  # nothing ran


def test_two_outputs_overlapping_are_refused(object_cache) -> None:
    g = fb.jit(two_results, cache=object_cache)
    a, b = rand(4, 4), rand(4, 4)
    o = np.empty((4, 4), np.float32)
    assert _err(g, a, b, out=(o, o)) == (
        "fusebind: out[1] and out[0] of 'two_results' overlap in memory; pass a separate array for each result")


def test_region_marked_inplace_may_write_over_its_operand(object_cache) -> None:
    f = fb.compile(INPLACE, cache=object_cache)
    a, b = rand(64), rand(64)
    expected = np.exp(a + b)
    assert f.executor.plan_for([a, b]).inplace_args == frozenset({(0, 0)})
    calls = f.stats.arms.fused_calls
    assert f(a, b, out=a) is a
    np.testing.assert_allclose(a, expected, rtol=1e-5)
    assert f.stats.arms.fused_calls == calls + 1  # the fused kernel wrote over its operand
    # only the marked operand, and only as the very same memory
    assert "overlaps argument 'b' (#1)" in _err(f, a, b, out=b)
    big = np.concatenate([a, a])
    assert "overlaps argument 'a' (#0)" in _err(f, big[:64], b, out=big[1:65])


def test_unmarked_region_has_no_inplace_pairs(object_cache) -> None:
    f = fb.compile(INPLACE.replace(" attributes {fused.inplace = array<i64: 0, 0>}", ""), cache=object_cache)
    a, b = rand(64), rand(64)
    assert f.executor.plan_for([a, b]).inplace_args == frozenset()
    assert "overlaps argument 'a' (#0)" in _err(f, a, b, out=a)
