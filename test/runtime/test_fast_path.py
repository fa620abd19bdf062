"""The one fast call path (FastPath.call) and the stats the API derives from the runtime's."""

from __future__ import annotations

import numpy as np

import fusebind as fb
from fusebind.api.jit import JitStats
from fusebind.runtime.arms import ArmStats
from fusebind.runtime.session import default_session


def test_jit_and_compile_share_the_runtime_fast_path_and_it_declines_when_the_table_moves() -> None:
    f = fb.jit(lambda x, y: np.exp(x) * y)
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    y = np.full(16, 2.0, np.float32)
    want = np.exp(x) * y
    np.testing.assert_allclose(f(x, y), want, rtol=1e-6)
    fast = f._fast
    assert fast is not None and fast.session is default_session()
    np.testing.assert_allclose(fast.call((x, y)), want, rtol=1e-6)
    out = np.empty(16, np.float32)
    assert fast.call((x, y), out) is out and np.allclose(out, want, rtol=1e-6)
    assert fast.call((x, y), x) is None  # out= is an input: the slow path decides
    assert fast.call((x[:8], y[:8])) is None  # does not fit the thunk
    calls = fast.calls
    default_session().extend_bindings(lambda b: None)  # no change: no swap, the fast path stays
    assert fast.call((x, y)) is not None and fast.calls == calls + 1
    # a plan of an older table: never run
    stale = type(fast)(fast.generation - 1, fast.thunk, fast.shape, fast.dtype, session=fast.session)
    assert stale.call((x, y)) is None and stale.calls == 0 and fast.calls == calls + 1


def test_jit_stats_extend_the_runtime_arm_stats() -> None:
    f = fb.jit(lambda x: np.exp(x) + 1)
    x = np.ones(16, np.float32)
    f(x), f(x)
    stats = f.stats
    assert isinstance(stats, JitStats) and isinstance(stats, ArmStats)
    assert (stats.calls, stats.fused_calls, stats.arm0_calls) == (2, 2, 0)
    assert stats.arm0_seconds is None and stats.fused_seconds is None
    assert repr(stats).startswith("JitStats(calls=2, traces=1, plans=2, plan_hits=1, compiles=")
    assert repr(stats).endswith("arm0_calls=0, fused_calls=2, seconds: not measured (pass profile=True))")
