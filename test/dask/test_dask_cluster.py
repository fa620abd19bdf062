"""fusebind on a distributed LocalCluster with two process workers (conftest.py starts it once):
fusebind.dask.jit's blockwise kernels and tree reduction, `da.map_blocks` with an `fb.jit`
function, the values against numpy on the gathered result, and no kernel compiled on a worker."""

from __future__ import annotations

import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="fusebind.dask needs dask[array] (pip install 'fusebind[dask]')")
cloudpickle = pytest.importorskip("cloudpickle", reason="the cluster tests need cloudpickle (the dask extra)")

import fusebind as fb  # noqa: E402
import fusebind.dask as fbd  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module

RNG = np.random.default_rng(19)
X = RNG.standard_normal((2048, 128)).astype(np.float32)


def normalise_gelu(x):
    m = x.mean(axis=1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=1, keepdims=True)
    y = (x - m) / np.sqrt(v + 1e-5)
    return 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))


def colsum(x):
    return normalise_gelu(x).sum(axis=0)


def _worker_state():
    """What each worker built itself: fusebind.dask's kernel counts, and whether it imported mlir."""
    import sys as _sys

    import fusebind.dask as _fbd

    from fusebind.lowering.cache import portable_counts

    return {**_fbd.process_compiles(), "mlir imported": "mlir" in _sys.modules,
            "portable hits": portable_counts()["hits"]}


def test_blockwise_and_a_tree_reduction_on_process_workers(client):
    x = da.from_array(X, chunks=(512, 128))
    rows, sums = client.compute([fbd.jit(normalise_gelu)(x), fbd.jit(colsum)(x)], sync=True)
    np.testing.assert_allclose(rows, normalise_gelu(X), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(sums, colsum(X), rtol=1e-4, atol=2e-3)
    assert rows.dtype == np.float32 and sums.shape == (128,)


def test_map_blocks_with_an_fb_jit_function_on_process_workers(client):
    @fb.jit
    def gelu_rows(b):
        return normalise_gelu(b)

    x = da.from_array(X, chunks=(512, 128))
    if hasattr(gelu_rows, "precompile"):  # every chunk shape compiled here, so the pickle carries it
        gelu_rows.precompile(np.empty((512, 128), np.float32))
    before = client.run(_worker_state)
    got = client.compute(da.map_blocks(gelu_rows, x, dtype=np.float32), sync=True)
    np.testing.assert_allclose(got, normalise_gelu(X), rtol=2e-5, atol=2e-5)
    if hasattr(gelu_rows, "precompile"):
        _assert_nothing_compiled(before, client.run(_worker_state))


def _assert_nothing_compiled(before, after):
    """No worker compiled a kernel or imported mlir, and the kernels came from the pickle."""
    assert len(after) == 2
    for worker, state in after.items():
        assert state["compiles"] == before[worker]["compiles"], worker
        assert state["mlir imported"] is False, worker
    assert sum(s["portable hits"] - before[w]["portable hits"] for w, s in after.items()) > 0


def test_fused_kernels_travel_and_workers_compile_nothing(client):
    if not hasattr(fb.CompiledFunction, "precompile"):
        pytest.skip("compiled functions do not travel with their object code yet (CompiledFunction.precompile, "
                    "issue 18)")
    x = da.from_array(X, chunks=(512, 128))
    before = client.run(_worker_state)
    f = fbd.jit(lambda x: np.tanh(normalise_gelu(x) * 0.5).sum(axis=0))
    got = client.compute(f(x), sync=True)
    np.testing.assert_allclose(got, np.tanh(normalise_gelu(X) * 0.5).sum(axis=0), rtol=1e-4, atol=2e-3)
    _assert_nothing_compiled(before, client.run(_worker_state))
