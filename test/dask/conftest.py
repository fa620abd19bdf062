"""One two-worker LocalCluster (process workers, one thread each) for every test of test/dask/,
started once per test session. The tests skip, with the reason, where dask or distributed is absent
(the `dask` extra)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def client():
    """A distributed Client on LocalCluster(n_workers=2, threads_per_worker=1, processes=True)."""
    pytest.importorskip("dask.array", reason="fusebind.dask needs dask[array] (pip install 'fusebind[dask]')")
    distributed = pytest.importorskip("distributed", reason="the cluster tests need distributed "
                                                            "(pip install 'fusebind[dask]')")
    # the workers inherit this process's environment (FUSEBIND_STRICT, the test object cache dir)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=40)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()
