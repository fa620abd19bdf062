"""Reductions over the leading axis give bitwise the same result at 1, 2, 4 and 8 threads
(compiler/tree_reduce.py, docs/THREADS.md "Reductions: a fixed tree").

The tree is fixed by the operand's shape: chunks of TREE_CHUNK_ELEMS elements reduced first (a
region that keeps the chunk axis, so the pool may run it in chunks of rows), then the partials
and the ragged tail. Sizes here are not multiples of the chunk (a tail), in f32 and f64, for sum,
mean, var, max, min, prod, column sums with a consumer that fuses, integer sums that wrap and
bool sums (int64). The inner stage's own kernel, compiled for dynamic shapes as the split
compiles it, is run through the native pool at 1/2/4/8 threads and several chunkings: bitwise
the static kernel's partials, so splitting it cannot change a bit either."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusebind as fb

THREADS = (1, 2, 4, 8)
N = 300_007                # 4 chunks of 65 536 and a tail of 37 863
ROWS, COLS = 1031, 260     # column sums: 2 chunks of 512 rows and a tail of 7; the full sum: 4 of 252, 23

RNG = np.random.default_rng(17)
X32 = RNG.standard_normal(N).astype(np.float32)
X64 = RNG.standard_normal(N)
M32 = RNG.standard_normal((ROWS, COLS)).astype(np.float32)

#: one jitted function per operand (its kernels shared by the four thread counts): name -> how
#: to compute it, and which outputs are sums checked against the bound (the others: rtol)
CASES = {
    "f32 vector": (lambda x: (x.sum(), x.mean(), x.var(), x.max(), (1 + x * np.float32(1e-4)).prod()), X32),
    "f64 vector": (lambda x: ((x * x).sum(), x.min()), X64),
    "f32 matrix": (lambda m: (m.sum(axis=0), m - m.mean(axis=0, keepdims=True), m.sum()), M32),
}
SUMS = {"f32 vector": {0: (None, False)}, "f64 vector": {0: (None, True)}, "f32 matrix": {0: (0, False), 2: (None, False)}}
#: a product's bound is its n - 1 roundings whatever the order (docs/REDUCTIONS.md): rounding near 1
#: is biased, so f32 products of 3e5 factors 1 + O(1e-4) drift by ~1e-3 (numpy's rows too, by half)
RTOL = {"f32 vector": [0, 2e-6, 2e-6, 0, N * 2.0**-24], "f64 vector": [0, 0], "f32 matrix": [0, 2e-6, 0]}


def _bound(x: np.ndarray, axis) -> np.ndarray:
    n = x.size // max(np.size(np.sum(x, axis=axis)), 1)
    return 2 * math.log2(n) * np.finfo(x.dtype).eps * np.sum(np.abs(x.astype(np.float64)), axis=axis)


@pytest.mark.parametrize("name", list(CASES))
def test_bitwise_the_same_at_1_2_4_8_threads(name: str) -> None:
    fn, x = CASES[name]
    # the most threads first: the first executor compiles the shared kernels, and only one with
    # threads > 1 compiles the splittable inner stage for chunks (a 1-thread one compiles it static)
    by_threads = {t: fb.jit(fn, threads=t)(x) for t in reversed(THREADS)}
    results = [by_threads[t] for t in THREADS]
    want = fn(x)
    exact = fn(x.astype(np.longdouble))
    for k, w in enumerate(want):
        for t, got in zip(THREADS, results):
            g = got[k]
            assert g.dtype == w.dtype and np.shape(g) == np.shape(w), (name, k, t, g.dtype, np.shape(g))
            np.testing.assert_array_equal(g, results[0][k], err_msg=f"{name} output {k}: threads={t}")
        g, e = np.asarray(results[0][k], np.longdouble), exact[k]
        if k in SUMS[name]:
            axis, squares = SUMS[name][k]
            assert np.all(np.abs(g - e) <= _bound(x * x if squares else x, axis)), (name, k)
        else:
            np.testing.assert_allclose(g.astype(np.float64), np.asarray(e, np.float64), rtol=RTOL[name][k],
                                       atol=1e-6 if g.ndim == 2 else 0, err_msg=f"{name} output {k}")


def test_the_tree_is_in_the_plan() -> None:
    f = fb.jit(lambda x: x.sum(), threads=2)
    f(X32)
    ir = str(f.optimized(X32))
    assert "tensor<262144xf32> -> tensor<4x65536xf32>" in ir and "starts = [262144]" in ir, ir


def test_the_inner_stage_runs_split_on_the_pool() -> None:
    """The split is decided on the work (the inner stage reads 262 144 elements and writes 4): a
    2-thread executor runs it in chunks, with the 1-thread result bit for bit."""
    fn = lambda x: (x * np.float32(3) - 1).sum()  # noqa: E731 (its own regions: not shared with other tests)
    f2 = fb.jit(fn, threads=2)
    got2 = f2(X32)
    assert "split over 2 threads" in f2.explain(X32), f2.explain(X32)
    np.testing.assert_array_equal(got2, fb.jit(fn, threads=1)(X32))


def test_nan_propagates_from_a_chunk_and_from_the_tail() -> None:
    f = fb.jit(lambda x: x.max(), threads=2)
    for where in (3, N - 2):
        x = X32.copy()
        x[where] = np.nan
        assert np.isnan(f(x)) and np.isnan(fb.jit(lambda x: x.sum(), threads=1)(x))


def test_integer_sums_wrap_as_numpys_and_bool_sums_are_int64() -> None:
    big = RNG.integers(2**61, 2**62, N, dtype=np.int64)  # the sum wraps many times
    flags = X32 > 0
    for t in (1, 2):
        got = fb.jit(lambda a: a.sum(), threads=t)(big)
        assert got.dtype == np.int64 and got == big.sum()
        count = fb.jit(lambda b: b.sum(), threads=t)(flags)
        assert count.dtype == np.int64 and count == flags.sum()


def test_the_inner_stage_kernel_is_bitwise_equal_in_chunks_on_the_pool() -> None:
    """What the split will run: the inner region's kernel compiled for dynamic shapes, called
    through the native pool at 1/2/4/8 threads in any chunking, gives the static kernel's
    partials bit for bit (each chunk of rows is reduced whole, in the kernel's fixed order)."""
    from fusebind.compiler.splitting import region_is_splittable
    from fusebind.dialect.types import shape_of
    from fusebind.lowering import decompose_region
    from fusebind.runtime.kernel import Kernel
    from fusebind.runtime.pool import PoolUnavailable, pool_for
    from fusebind.runtime.thunk import ParallelThunkCall, ThunkCall

    f = fb.jit(lambda x: (x * x).sum(), threads=1)
    f(X64)
    func = f.executor(X64).optimized_func(None, [X64.shape])
    (inner,) = [op for op in func.walk() if op.name == "fused.region" and region_is_splittable(op)]
    a_shape, o_shape = tuple(shape_of(inner.operands[0].type)), tuple(shape_of(inner.results[0].type))
    assert a_shape == (292, 1024) and o_shape == (292, 1)  # a fused row kernel: rows of TREE_ROW_ELEMS
    a = X64[:292 * 1024].reshape(a_shape)
    static = Kernel.from_decomposition(decompose_region(inner))
    dynamic = Kernel.from_decomposition(decompose_region(inner, dynamic=True))
    want = np.empty(o_shape)
    assert ThunkCall(static, [a_shape, o_shape]).function(a, want) is want
    np.testing.assert_allclose(want[:, 0], (a * a).sum(axis=1), rtol=1e-14)
    try:
        pools = {t: pool_for(t) for t in THREADS}
    except PoolUnavailable as exc:
        pytest.skip(f"native pool unavailable here: {exc}")
    for t in THREADS:
        for chunks in (292, 7, 2, 1):
            out = np.full(o_shape, np.nan)
            par = ParallelThunkCall(dynamic, [a_shape, o_shape], pools[t], chunks, t, [0, 0])
            assert par.function(a, out) is out
            np.testing.assert_array_equal(out, want, err_msg=f"threads={t} chunks={chunks}")
