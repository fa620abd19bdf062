"""bench/bench_dask.py runs on a small input with the synchronous scheduler: both versions agree
(it refuses to report otherwise), and the table has a row per version with its tasks and bytes.

No wall-clock assertions: its timings are benchmarks, not tests."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("dask.array", reason="bench_dask needs dask[array] (pip install 'fusebind[dask]')")

from bench import bench_dask  # noqa: E402


def test_bench_dask_smoke_both_versions_agree_and_fusebind_writes_less():
    text, runs = bench_dask.bench(gib=4 * 2 ** 20 / 2 ** 30, cols=256, chunk_mib=1, repeat=1, scheduler="sync")
    plain, fused = (r for r in runs if r["version"] == "dask.array"), (r for r in runs if r["version"] == "fusebind.dask")
    plain, fused = next(plain), next(fused)
    np.testing.assert_allclose(fused["result"], plain["result"], rtol=1e-4, atol=1e-4 * np.abs(plain["result"]).max())
    assert fused["result"].shape == (256,) and fused["result"].dtype == np.float32
    assert fused["written"] < plain["written"] and fused["tasks"] < plain["tasks"]
    for version in ("dask.array", "fusebind.dask"):
        assert re.search(rf"^\| {re.escape(version)} \| [\d.]+ (?:µs|ms|s) \|", text, re.M), text
    assert "one fused kernel per chunk" in text and "no rechunk" in text
