"""fusebind.dask.jit on dask arrays: blockwise fused kernels, tree reductions along chunked axes,
matmul with a fused epilogue, the rechunk a row-wise op forces (and explain() saying so), and the
errors for what it cannot map. Values against numpy on the gathered result. Most tests run on the
synchronous scheduler (the graph is what is tested); the cluster tests are in test_dask_cluster.py."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="fusebind.dask needs dask[array] (pip install 'fusebind[dask]')")
import dask  # noqa: E402

import fusebind.dask as fbd  # noqa: E402
from fusebind.dialect.errors import FusebindValueError, UnsupportedOperation  # noqa: E402

RNG = np.random.default_rng(18)
X = RNG.standard_normal((2048, 128)).astype(np.float32)
W = RNG.standard_normal((128, 32)).astype(np.float32)
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def normalise_gelu(x):
    m = x.mean(axis=1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=1, keepdims=True)
    y = (x - m) / np.sqrt(v + 1e-5)
    return 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))


def _bound(a: np.ndarray, axis) -> np.ndarray:
    """docs/REDUCTIONS.md: |fb - sum| <= 2 log2(n) eps sum|x| (n summed values per output)."""
    n = a.size if axis is None else a.shape[axis]
    return 2 * np.log2(n) * EPS32 * np.abs(a.astype(np.float64)).sum(axis=axis)


def test_blockwise_rows_whole_is_one_kernel_per_chunk_and_no_rechunk():
    f = fbd.jit(normalise_gelu)
    x = da.from_array(X, chunks=(512, 128))
    text = f.explain(x)
    assert "no rechunk" in text
    assert text.count("one fused kernel per chunk (4 chunk(s), 1 block shape(s) compiled)") == 1
    out = f(x)
    assert isinstance(out, da.Array) and out.chunks == x.chunks
    got = out.compute()
    assert got.dtype == np.float32 and got.shape == X.shape
    np.testing.assert_allclose(got, normalise_gelu(X), rtol=2e-5, atol=2e-5)


def test_tree_reduction_along_the_chunked_axis_meets_the_accuracy_bound():
    # x * x is one IEEE multiply in numpy and in the kernel, so the summands are equal and the
    # only error is the summation's: the chunk partials' and the f64 combine's
    f = fbd.jit(lambda x: (x * x).sum(axis=0))
    x = da.from_array(X, chunks=(256, 128))
    text = f.explain(x)
    assert "per-chunk partial prim.reduce_sum" in text and "as a tree" in text and "no rechunk" in text
    got = f(x).compute()
    squares = X * X
    exact = squares.astype(np.float64).sum(axis=0)
    assert got.dtype == np.float32 and got.shape == (128,)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= _bound(squares, 0))


def test_fused_partials_of_a_pipeline_reduce_along_the_chunked_axis():
    f = fbd.jit(lambda x: normalise_gelu(x).sum(axis=0))
    got = f(da.from_array(X, chunks=(512, 128))).compute()
    np.testing.assert_allclose(got, normalise_gelu(X).sum(axis=0), rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("name, fn", [
    ("sum", lambda x: (x * x).sum()),
    ("mean", lambda x: np.tanh(x).mean(axis=0)),
    ("max", lambda x: (x + 1.0).max(axis=0, keepdims=True)),
    ("min", lambda x: np.abs(x).min(axis=0)),
])
def test_tree_reductions_match_numpy(name, fn):
    f = fbd.jit(fn)
    got = f(da.from_array(X, chunks=(512, 64))).compute()
    want = fn(X)
    assert got.dtype == want.dtype and got.shape == want.shape
    if name in ("max", "min"):
        np.testing.assert_array_equal(got, want)  # exact in any order
    else:
        exact = fn(X.astype(np.float64))
        tol = _bound(X, None if name == "sum" else 0) / (1 if name == "sum" else X.shape[0])
        assert np.all(np.abs(got.astype(np.float64) - exact) <= 4 * tol + 1e-7)


def test_matmul_is_dasks_blocked_matmul_with_the_epilogue_fused_per_output_block():
    def layer(x, w):
        return np.maximum(x @ w + 0.5, 0.0)

    f = fbd.jit(layer)
    x = da.from_array(X, chunks=(512, 64))
    w = da.from_array(W, chunks=(64, 16))
    text = f.explain(x, w)
    assert "dask's blocked matmul (k in 2 chunk(s)), 8 output block(s)" in text
    assert "[prim.constant, prim.add, prim.constant, prim.max]" in text
    got = f(x, w).compute()
    np.testing.assert_allclose(got, layer(X, W), rtol=1e-5, atol=1e-4)


def test_a_rowwise_op_on_split_rows_rechunks_and_explain_says_why():
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    f = fbd.jit(softmax)
    x = da.from_array(X, chunks=(512, 32))
    text = f.explain(x)
    assert ("rechunk x along axis [1]: [4] chunk(s) -> [1]: prim.reduce_max along axes [1] needs whole rows: "
            "each chunk must hold the whole reduced axis, since its result is broadcast back along it") in text
    out = f(x)
    assert out.chunks == ((512,) * 4, (128,))
    np.testing.assert_allclose(out.compute(), softmax(X), rtol=1e-5, atol=1e-7)
    # rows already whole: nothing is rechunked
    assert "no rechunk" in f.explain(da.from_array(X, chunks=(512, 128)))


def test_captured_and_numpy_arguments_and_uneven_chunks():
    bias = RNG.standard_normal(128).astype(np.float32)

    def shift(x, scale):
        return np.tanh(x * scale + bias)

    f = fbd.jit(shift)
    x = da.from_array(X, chunks=(700, 128))  # 700, 700, 648: two block shapes
    scale = np.float32(0.5) * np.ones(128, np.float32)
    text = f.explain(x, scale)
    assert "2 block shape(s) compiled" in text
    np.testing.assert_allclose(f(x, scale).compute(), shift(X, scale), rtol=1e-5, atol=1e-6)


def test_tuple_results():
    f = fbd.jit(lambda x: (x + 1.0, (x * 2.0).sum(axis=0)))
    a, s = dask.compute(*f(da.from_array(X, chunks=(512, 128))))
    np.testing.assert_allclose(a, X + 1.0, rtol=1e-6)
    np.testing.assert_allclose(s, (X * 2.0).sum(axis=0), rtol=1e-4, atol=1e-3)


def test_an_op_it_cannot_map_is_a_clear_error():
    f = fbd.jit(lambda x: np.cumsum(x, axis=0))
    with pytest.raises(UnsupportedOperation, match=r"fusebind\.dask\.jit: prim\.\w+ is not mapped onto dask chunks.*"
                                                     r"dask\.array\.map_blocks"):
        f(da.from_array(X, chunks=(512, 128)))


def test_a_non_array_argument_is_a_clear_error():
    f = fbd.jit(lambda x, s: x * s)
    with pytest.raises(FusebindValueError, match=r"argument #1 is a float; pass dask or numpy arrays"):
        f(da.from_array(X, chunks=(512, 128)), 2.0)


@pytest.mark.parametrize("name, fn", [
    ("var", lambda x: x.var(axis=0)),
    ("std", lambda x: x.std(axis=0)),
    ("centered mean", lambda x: ((x - x.mean(axis=0, keepdims=True)) ** 2).mean(axis=0)),
    ("var of a fused chain, every axis", lambda x: np.tanh(x * 0.01).var()),
])
def test_variance_along_the_chunked_axis_uses_welford_partials_not_a_rechunk(name, fn):
    shifted = X * 3.0 + 100.0  # a large mean: a one-pass sum of squares would lose digits
    f = fbd.jit(fn)
    x = da.from_array(shifted, chunks=(500, 64))  # uneven: 500 x4 and 48
    text = f.explain(x)
    assert "Welford partials (n, mean, M2)" in text and "no rechunk" in text
    got = f(x).compute()
    want = fn(shifted.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == fn(shifted).shape
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_a_mean_read_again_is_row_wise_and_rechunks():
    def centre(x):
        return x - x.mean(axis=0)

    f = fbd.jit(centre)
    x = da.from_array(X, chunks=(512, 128))
    text = f.explain(x)
    assert "fusebind.dask plan for 'centre'(x: float32[2048, 128] chunks [4, 1])" in text
    assert "rechunk x along axis [0]: [4] chunk(s) -> [1]: prim.reduce_mean along axes [0] needs whole rows" in text
    np.testing.assert_allclose(f(x).compute(), centre(X), rtol=1e-5, atol=1e-6)


def test_a_scalar_result_feeds_the_next_kernel():
    # regression: a 0-d block went through np.ascontiguousarray, which makes it 1-d, and no kernel fit
    f = fbd.jit(lambda x: (x * x).sum() * 0.5 + 1.0)
    got = f(da.from_array(X, chunks=(512, 128))).compute()
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(got, (X.astype(np.float64) ** 2).sum() * 0.5 + 1.0, rtol=1e-6)


def test_unknown_chunk_sizes_are_a_clear_error():
    x = da.from_array(X, chunks=(512, 128))
    rows = x[x[:, 0] > 0]  # boolean indexing: dask no longer knows the chunk sizes
    with pytest.raises(FusebindValueError, match=r"argument #0 has unknown chunk sizes .*compute_chunk_sizes\(\)"):
        fbd.jit(lambda x: x + 1.0)(rows)


def test_the_threaded_scheduler_calls_one_kernel_from_many_threads():
    f = fbd.jit(normalise_gelu)  # the same kernel text as the blockwise test: compiled once per process
    x = da.from_array(X, chunks=(512, 128))
    with dask.config.set(scheduler="threads", num_workers=4):
        got = f(x).compute()
    np.testing.assert_allclose(got, normalise_gelu(X), rtol=2e-5, atol=2e-5)
