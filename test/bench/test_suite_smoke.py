"""The benchmark suite's candidates compute the right thing (correctness only, tiny sizes).

No wall-clock assertions: the suite's timings are benchmarks, not tests.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from bench import peers
from bench.suite import BEGIN, END, REFERENCE_KERNELS, candidates_for, check, write_block
from bench.timing import measure_interleaved
from bench.workloads import WORKLOADS, Workload, workload

TINY = {
    "elementwise": lambda w: tuple((64,) for _ in w.args),
    "transcendental": lambda w: ((64,),),
    "softmax": lambda w: ((4, 16),),
    "layernorm": lambda w: ((4, 16), (16,), (16,)),
    "matmul": lambda w: ((8, 16), (16, 8), (8,)),
    "mlp": lambda w: ((4, 8), (8,), (8,), (8, 32), (32,), (32, 8), (8,)),
    "attention": lambda w: ((16, 64),) * 3,
}


def tiny(w: Workload) -> Workload:
    return dataclasses.replace(w, sizes={"tiny": TINY[w.group](w)})


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEBIND_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_every_available_candidate_matches_numpy(w: Workload) -> None:
    w = tiny(w)
    xs = w.inputs("tiny")
    ref = w.reference(*xs)
    out = np.empty(ref.shape, np.float32)
    # SOL kernels are bounds, not the math; numba is jitted for one workload (the jit path), interpreted
    # for the others (same kernel source, no compile time).
    built = candidates_for(w, xs, out, with_sol=False, numba_jit=w.name == "relu(a*b+c)")
    available = {b.name for b in built if isinstance(b, peers.Candidate)}
    # The lowering-direct candidate must always exist: it is how the suite sees generated code.
    fb_name = {"matmul": "fb-kernel BLAS+epilogue", "mlp": "fb-kernel blocks", "attention": "fb-kernel blocks"}
    assert fb_name.get(w.group, "fb-kernel") in available, [(b.name, getattr(b, "reason", "")) for b in built]
    for b in built:
        if isinstance(b, peers.Candidate) and not b.name.startswith(REFERENCE_KERNELS):
            out.fill(np.nan)
            assert check(b, ref, w) == "✓", b.name


def test_wrong_candidate_is_marked() -> None:
    w = tiny(workload("relu(a*b+c)"))
    xs = w.inputs("tiny")
    wrong = peers.Candidate("wrong", lambda: w.reference(*xs) + 1)
    assert check(wrong, w.reference(*xs), w).startswith("✗ max abs err")
    promoted = peers.Candidate("f64", lambda: w.reference(*xs).astype(np.float64))
    assert check(promoted, w.reference(*xs), w) == "✗ dtype float64 (expected float32)"


def test_numexpr_expression_that_promotes_to_f64_is_refused() -> None:
    pytest.importorskip("numexpr")
    w = dataclasses.replace(tiny(workload("relu(a*b+c)")), numexpr="where(a*b+c > 0.0, a*b+c, 0.0)",
                            numexpr_consts={})
    xs = w.inputs("tiny")
    got = peers.numexpr_candidate(w, xs, np.empty(64, np.float32))
    assert isinstance(got, peers.Unavailable) and "float64" in got.reason


def test_interleaved_measurement_records_every_candidate_each_round() -> None:
    calls: list[str] = []
    timings = measure_interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                                  budget_s=0.0, lo=4, hi=4, warmup=1)
    assert {n: len(t.samples) for n, t in timings.items()} == {"a": 4, "b": 4}
    assert timings["a"].min <= timings["a"].median


def test_write_block_replaces_only_the_suite_block(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text(f"# Results\n\nother section\n\n{BEGIN}\nold\n{END}\n\ntail section\n", encoding="utf-8")
    write_block(path, "new table")
    assert path.read_text(encoding="utf-8") == (f"# Results\n\nother section\n\n{BEGIN}\nnew table\n{END}\n\n"
                                                "tail section\n")
    fresh = tmp_path / "fresh.md"
    write_block(fresh, "x")
    assert fresh.read_text(encoding="utf-8") == f"{BEGIN}\nx\n{END}\n"
