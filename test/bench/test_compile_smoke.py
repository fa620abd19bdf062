"""bench/bench_compile.py measures what it says (behaviour only, no wall-clock assertions).

One real fresh-then-warm pair of children on the smallest workload (FUSEBIND_LONG=1: ~6 s); the rest is
the child plumbing and the summary logic on made-up figures.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import bench_compile as bc
from bench.workloads import WORKLOADS


def test_every_suite_workload_is_measured_at_its_smallest_size() -> None:
    pairs = bc.first_call_workloads(quick=False)
    assert pairs == [(w.name, next(iter(w.sizes))) for w in WORKLOADS]
    quick = bc.first_call_workloads(quick=True)
    assert {n for n, _ in quick} == {"relu(a*b+c)", "softmax(x, -1)", "MLP block", "causal multi-head attention"}
    assert bc.first_call_workloads(quick=False, only="swiglu") == [("SwiGLU block", "T=64,D=256,F=512")]


def test_child_env_drops_the_openblas_overrides_and_finds_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    env = bc.child_env({"X_HH": "1"})
    assert "OPENBLAS_CORETYPE" not in env and env["X_HH"] == "1"
    # Children keep bytecode (as an installed package has it), so imports are not timed as recompiles.
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == str(bc.PYCACHE)
    got = bc.run_child("import json, bench.workloads as w; print(json.dumps({'f': w.__file__}))", env=env)
    assert Path(got["f"]) == Path(bc.__file__).with_name("workloads.py")


def test_failing_child_names_its_error() -> None:
    with pytest.raises(RuntimeError, match=r"(?s)child failed \(1\): .*ZeroDivisionError"):
        bc.run_child("1/0")


@pytest.mark.skipif(not os.environ.get("FUSEBIND_LONG"), reason="two fresh interpreters (~6 s): FUSEBIND_LONG=1 runs it")
def test_fresh_then_warm_first_call_hits_the_cache(tmp_path: Path) -> None:
    """A fresh cache compiles every kernel; a new process with that cache loads them all (no miss), and its
    profile lists the top costs."""
    env = bc.child_env({"FUSEBIND_CACHE_DIR": str(tmp_path / "c")})
    fresh = bc.run_child(bc._FB_FIRST, "relu(a*b+c)", "1e3", "plain", env=env)
    assert fresh["correct"] is True
    assert fresh["kernels"] and all(k["error"] is None and not k["from_cache"] for k in fresh["kernels"])
    warm = bc.run_child(bc._FB_FIRST, "relu(a*b+c)", "1e3", "profile", env=env)
    assert warm["correct"] is True
    assert [k["from_cache"] for k in warm["kernels"]] == [True] * len(fresh["kernels"])
    # The cProfile rows are (function, own seconds, cumulative seconds), sorted by cumulative time.
    top = warm["top_cumulative"]
    assert len(top) > 5 and all(len(r) == 3 for r in top)
    assert [r[2] for r in top] == sorted((r[2] for r in top), reverse=True)
    assert any("__call__" in r[0] for r in top[:5]), json.dumps(top[:5])


def _res(firsts: dict[str, dict[str, object]]) -> SimpleNamespace:
    return SimpleNamespace(extra={f"first:{k}": v for k, v in firsts.items()} | {"first:profile": ("x", {})})


def test_summary_judges_each_target_by_its_worst_workload() -> None:
    res = _res({"a": {"fb": 0.02, "jax": 0.04, "start": 0.12, "worst_hit": 0.002},
                "b": {"fb": 0.09, "jax": 0.06, "start": 0.20, "worst_hit": 0.004}})
    rows = bc.first_call_summary(res)
    assert rows == [("first call vs jax.jit", "fb ÷ jax ≤ 1 on every workload", "worst 1.50× (b)", "", "missed"),
                    ("fresh interpreter → first result (warm cache)", "≤ 150 ms", "worst 200 ms", "", "missed"),
                    ("cache hit in a new process (API)", "≤ 3 ms per kernel", "worst 4 ms", "", "missed")]
    good = _res({"a": {"fb": 0.02, "jax": 0.04, "start": 0.12, "worst_hit": 0.002}})
    assert [r[-1] for r in bc.first_call_summary(good)] == ["met", "met", "met"]


def test_summary_without_jax_leaves_that_row_out() -> None:
    res = _res({"a": {"fb": 0.02, "jax": None, "start": 0.1, "worst_hit": None}})
    assert [r[0] for r in bc.first_call_summary(res)] == ["fresh interpreter → first result (warm cache)"]
    assert bc.first_call_summary(SimpleNamespace(extra={})) == []
