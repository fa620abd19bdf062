"""Fused chains mixing categories (the benchmark workloads at small sizes):
decompose_region's kernel against the reference interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fusebind.dialect import interpret, parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.kernel import Kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_lowering as wl  # noqa: E402

from lowering_helpers import ulp_distance  # noqa: E402

CASES = [
    ("relu_fma", lambda: wl.relu_fma(1001), [(1001,)] * 3, 0),
    ("gelu", lambda: wl.gelu_tanh(517), [(517,)], 8),
    ("exp_log_sqrt", lambda: wl.exp_log_sqrt(333), [(333,)], 8),
    ("softmax", lambda: wl.softmax(7, 129), [(7, 129)], 64),
    ("layernorm", lambda: wl.layernorm(5, 300), [(5, 300)], 256),
    ("softmax_1x1", lambda: wl.softmax(1, 1), [(1, 1)], 0),
]


@pytest.mark.parametrize("name,make,shapes,ulps", CASES, ids=[c[0] for c in CASES])
def test_chain_matches_interpreter(name: str, make, shapes, ulps: int, object_cache: ObjectCache) -> None:  # type: ignore[no-untyped-def]
    module = parse_module(make())
    region = next(op for op in module.walk() if op.name == "fused.region")
    d = decompose_region(region, cache=object_cache)
    kernel = Kernel.from_decomposition(d)
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(s).astype(np.float32) * 2 for s in shapes]
    want = interpret(module, *args)
    out = np.empty(want.shape, np.float32)
    kernel(*(descriptor_for(a) for a in args), descriptor_for(out))
    assert not np.isnan(out).any()
    # reductions reassociate and approximations add a few ulps; sums of 300 f32s near zero need an abs floor
    diff = ulp_distance(out, want)
    close = np.isclose(out, want, rtol=0, atol=1e-6)
    assert (diff <= ulps)[~close].all(), f"{name}: max {diff.max()} ulps > {ulps}"
