"""Unaligned arrays (`np.frombuffer(buf, offset=1)`) run through an aligned
copy, as numpy's own loops do: on the fast path (the thunk declines, the slow
path copies), on the slow path (fused and static kernel steps), and for
`out=` (the result is computed into an aligned array and copied back).
Before the fix each of these raised "fusebind internal error: the call thunk
refused validated operands"."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import fusebind as fb
from fusebind.lowering import ObjectCache
from fusebind.runtime.testing import isolated_global_state

RNG = np.random.default_rng(5)
N = 1000


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> ObjectCache:
    return ObjectCache(Path(tmp_path_factory.mktemp("fusebind-align-cache")))


@pytest.fixture(autouse=True)
def _isolated() -> Iterator[None]:
    with isolated_global_state():
        yield


def unaligned(values: np.ndarray, offset: int = 1) -> np.ndarray:
    """A writeable copy of `values` whose data starts `offset` bytes past an aligned address."""
    buf = bytearray(values.nbytes + offset)
    a = np.frombuffer(buf, dtype=values.dtype, offset=offset).reshape(values.shape)
    a[...] = values
    assert not a.flags.aligned and a.flags.c_contiguous and a.flags.writeable
    return a


def exp_plus_one(x):
    return fb.exp(x) + 1.0


def test_unaligned_input_from_frombuffer_on_the_fast_path(cache: ObjectCache) -> None:
    """The issue's reproducer: the fast path exists (an aligned call built it),
    its thunk declines the unaligned array, and the slow path runs a copy."""
    f = fb.jit(exp_plus_one, cache=cache)
    x = RNG.standard_normal(N).astype(np.float32)
    np.testing.assert_allclose(f(x), np.exp(x) + 1, rtol=1e-6)
    assert f._fast is not None  # the next call tries the fast path first
    zeros = np.frombuffer(bytes(4 * N + 1), dtype=np.float32, offset=1)
    assert f._fast.function(zeros, np.empty(N, np.float32)) is None  # the thunk declines it
    np.testing.assert_array_equal(f(zeros), np.full(N, 2.0, np.float32))
    u = unaligned(x)
    got = f(u)
    assert got.dtype == np.float32 and got.shape == (N,)
    np.testing.assert_allclose(got, np.exp(x) + 1, rtol=1e-6)
    assert f.stats.fused_calls == 3  # still the fused kernel, on the copy


def test_unaligned_input_on_the_first_call_and_in_two_results(cache: ObjectCache) -> None:
    """No fast path (first call; two results): the plan's fused steps copy."""
    @fb.jit(cache=cache)
    def two(a, b):
        return a * b + 1.0, fb.exp(a - b)

    a = RNG.standard_normal((8, 16)).astype(np.float32)
    b = RNG.standard_normal((8, 16)).astype(np.float32)
    p, q = two(unaligned(a), unaligned(b, 3))
    np.testing.assert_allclose(p, a * b + np.float32(1), rtol=1e-6)
    np.testing.assert_allclose(q, np.exp(a - b), rtol=1e-6)


def test_unaligned_float64_and_int32_through_static_kernels(cache: ObjectCache) -> None:
    """Every op a static kernel step (no fusion): float64 4 bytes off its
    8-byte alignment, int32 one byte off."""
    text = """
func.func @f(%a: tensor<64xf64>, %b: tensor<64xf64>, %i: tensor<64xi32>) -> (tensor<64xf64>, tensor<64xi32>) {
  %s = prim.add %a, %b : (tensor<64xf64>, tensor<64xf64>) -> tensor<64xf64>
  %e = prim.exp %s : tensor<64xf64> -> tensor<64xf64>
  %j = prim.mul %i, %i : (tensor<64xi32>, tensor<64xi32>) -> tensor<64xi32>
  func.return %e, %j : tensor<64xf64>, tensor<64xi32>
}
"""
    f = fb.compile(text, optimize=False, cache=cache)
    a, b = RNG.standard_normal(64), RNG.standard_normal(64)
    i = RNG.integers(-100, 100, 64).astype(np.int32)
    e, j = f(unaligned(a, 4), unaligned(b, 4), unaligned(i, 1))
    np.testing.assert_allclose(e, np.exp(a + b), rtol=1e-12)
    np.testing.assert_array_equal(j, i * i)
    assert j.dtype == np.int32


def test_unaligned_out_is_written_by_copy_back(cache: ObjectCache) -> None:
    """Chosen behaviour for an unaligned `out=`: accepted, the result is
    computed into an aligned array and copied into it; the call returns `out`."""
    f = fb.jit(exp_plus_one, cache=cache)
    x = RNG.standard_normal(N).astype(np.float32)
    f(x)  # builds the fast path
    o = unaligned(np.zeros(N, np.float32))
    assert f(x, out=o) is o
    np.testing.assert_allclose(o, np.exp(x) + 1, rtol=1e-6)
    o2 = unaligned(np.zeros(N, np.float32), 2)
    assert f(unaligned(x), out=o2) is o2  # unaligned input and output
    np.testing.assert_allclose(o2, np.exp(x) + 1, rtol=1e-6)
    assert f.stats.fused_calls == 3


def test_unaligned_large_input_split_over_threads(cache: ObjectCache) -> None:
    """A call large enough to run in chunks on two threads copies first too."""
    f = fb.jit(lambda x: fb.relu(x * 2.0 + 1.0), cache=cache, threads=2)
    x = RNG.standard_normal(1 << 19).astype(np.float32)
    np.testing.assert_allclose(f(unaligned(x)), np.maximum(x * 2 + 1, 0), rtol=1e-6)
    o = unaligned(np.zeros_like(x))
    f(x, out=o)
    np.testing.assert_allclose(o, np.maximum(x * 2 + 1, 0), rtol=1e-6)
