"""The benchmark suite's candidates compute the right thing (correctness only, tiny sizes).

No wall-clock assertions: the suite's timings are benchmarks, not tests.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import peers
from bench.peers_tables import (PIN_ENV, REFERENCE_KERNELS, Results, Row, candidates_for, check, peer_ratios,
                                peer_summary)
from bench.suite import BEGIN, END, write_block
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
    "rmsnorm": lambda w: ((4, 16), (16,)),
    "swiglu": lambda w: ((4, 8), (8, 16), (8, 16), (16, 8)),
    "mha": lambda w: ((1, 2, 16, 8),) * 3,
    "bmm": lambda w: ((2, 8, 16), (2, 16, 8)),
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
    built = candidates_for(w, xs, out, with_sol=False, numba_jit=w.name == "relu(a*b+c)", compilers=False)
    available = {b.name for b in built if isinstance(b, peers.Candidate)}
    # The lowering-direct candidate must always exist (it is how the suite sees generated code), except for
    # the causal mask, which only the API row has.
    blocks = "fb-kernel blocks"
    fb_name = {"matmul": "fb-kernel BLAS+epilogue", "mlp": blocks, "attention": blocks, "swiglu": blocks,
               "mha": "fusebind" if "causal" in w.name else blocks, "bmm": "fusebind"}
    assert fb_name.get(w.group, "fb-kernel") in available, [(b.name, getattr(b, "reason", "")) for b in built]
    assert "fusebind" in available
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


def test_all_core_candidates_match_numpy() -> None:
    """The all-core table's candidates (numba parallel, ORT default, fusebind's default threads) compute the math."""
    w = tiny(workload("softmax(x, -1)"))
    xs = w.inputs("tiny")
    ref = w.reference(*xs)
    out = np.empty(ref.shape, np.float32)
    built = candidates_for(w, xs, out, cores="all", numba_jit=False, compilers=False)
    names = {b.name for b in built}
    assert {"numba parallel", "ORT default", "fusebind"} <= names and "fb-kernel" not in names and "ORT 1t" not in names
    for b in built:
        if isinstance(b, peers.Candidate):
            out.fill(np.nan)
            assert check(b, ref, w) == "✓", b.name
    # One child per group, fusebind beside each peer group (the anchor of its ratios).
    base = candidates_for(w, xs, out, cores="all", numba_jit=False, compilers=False, group="base")
    assert [b.name for b in base] == ["numpy", "numpy out=", "numexpr", "fusebind"]
    ort = candidates_for(w, xs, out, cores="all", numba_jit=False, compilers=False, group="ort")
    assert [b.name for b in ort] == ["ORT default", "fusebind"]
    nb = candidates_for(w, xs, out, cores="all", numba_jit=False, compilers=False, group="numba")
    assert [b.name for b in nb] == ["numba parallel", "fusebind"]
    alone = candidates_for(w, xs, out, cores="all", numba_jit=False, compilers=False, group="alone")
    assert [b.name for b in alone] == ["fusebind"]


def test_all_core_ratios_are_taken_against_the_fusebind_of_the_same_child() -> None:
    res = Results(rows=[Row("a", "s", "fusebind", 1.0, 1.0, "✓", cores="all", group="base"),
                        Row("a", "s", "numpy", 2.0, 2.0, "✓", cores="all", group="base"),
                        Row("a", "s", "fusebind", 4.0, 4.0, "✓", cores="all", group="xla"),
                        Row("a", "s", "XLA (jax.jit)", 2.0, 2.0, "✓", cores="all", group="xla")])
    assert peer_ratios(res, "numpy", "all") == [("a s", 2.0)]
    assert peer_ratios(res, "XLA (jax.jit)", "all") == [("a s", 0.5)]  # not 2.0 against the base child's


@pytest.mark.parametrize("name", ["gelu_tanh(x)", "layer_norm(x, w, b)", "rms_norm(x, w)", "SwiGLU block",
                                  "MLP block", "causal multi-head attention"])
def test_torch_ops_compute_the_workload(name: str) -> None:
    """TorchOps is the same math as NumpyOps (checked eagerly: Inductor's compile is the slow-marked test)."""
    pytest.importorskip("torch", reason="torch is not installed: the torch.compile column is skipped")
    from bench.peers_torch import EAGER_NAME, torch_candidate

    w = tiny(workload(name))
    xs = w.inputs("tiny")
    c = torch_candidate(w, xs, compile=False)
    assert isinstance(c, peers.Candidate) and c.name == EAGER_NAME, c
    assert check(c, w.reference(*xs), w) == "✓"


def test_jax_ops_compute_the_workload() -> None:
    pytest.importorskip("jax", reason="jax is not installed (the bench venv has it): the jax.jit column is skipped")
    from bench.peers_jax import NAME, jax_candidate

    for name in ("softmax(x, -1)", "causal multi-head attention"):
        w = tiny(workload(name))
        xs = w.inputs("tiny")
        c = jax_candidate(w, xs)
        assert isinstance(c, peers.Candidate) and c.name == NAME, c
        assert check(c, w.reference(*xs), w) == "✓"


@pytest.mark.parametrize("module, builder, package", [("bench.peers_jax", "jax_candidate", "jax"),
                                                      ("bench.peers_torch", "torch_candidate", "torch")])
def test_missing_compiler_peer_is_unavailable_with_the_reason(module: str, builder: str, package: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    monkeypatch.setitem(sys.modules, package, None)  # `import <package>` now raises ImportError
    w = tiny(workload("relu(a*b+c)"))
    got = getattr(importlib.import_module(module), builder)(w, w.inputs("tiny"))
    assert isinstance(got, peers.Unavailable)
    assert got.reason.startswith(f"{package} not installed") and "for this column" in got.reason


@pytest.mark.skipif(not os.environ.get("FUSEBIND_LONG"), reason="Inductor and XLA compiles: FUSEBIND_LONG=1 runs it")
def test_compiled_peers_match_numpy() -> None:
    w = tiny(workload("SwiGLU block"))
    xs = w.inputs("tiny")
    for mod, fn in (("bench.peers_torch", "torch_candidate"), ("bench.peers_jax", "jax_candidate")):
        pytest.importorskip(mod.rsplit("_", 1)[1], reason="optional peer not installed")
        c = getattr(__import__(mod, fromlist=[fn]), fn)(w, xs)
        assert isinstance(c, peers.Candidate), c
        assert check(c, w.reference(*xs), w) == "✓"


def test_peer_summary_is_the_geomean_and_minimum_of_peer_over_fusebind() -> None:
    res = Results(rows=[Row("a", "s1", "fusebind", 1.0, 1.0, "✓"), Row("a", "s1", "numpy", 4.0, 4.0, "✓"),
                        Row("a", "s2", "fusebind", 2.0, 2.0, "✓"), Row("a", "s2", "numpy", 1.0, 1.0, "✓"),
                        Row("a", "s3", "fusebind", 1.0, 1.0, "✓"), Row("a", "s3", "numpy", 9.0, 9.0, "✗ wrong"),
                        Row("a", "s1", "fusebind", 1.0, 1.0, "✓", cores="all"),
                        Row("a", "s1", "numpy", 3.0, 3.0, "✓", cores="all")])
    assert peer_ratios(res, "numpy", "1") == [("a s1", 4.0), ("a s2", 0.5)]  # the ✗ row is left out
    table = peer_summary(res)
    assert "| one core | numpy | 1.41× | 0.50× | a s2 | 2 |" in table
    assert "| all cores | numpy | 3.00× | 3.00× | a s1 | 1 |" in table
    assert res.extra["peers:1:numpy"] == (pytest.approx(math.sqrt(2.0)), 0.5, "a s2")


def test_one_core_child_is_pinned_before_numpy_starts() -> None:
    """FB_BENCH_PIN_CORE pins the process at bench.peers_tables' first lines, so BLAS sizes its pool for one core."""
    core = max(os.sched_getaffinity(0))
    code = ("import os, json, bench.peers_tables, numpy\n"
            "try:\n    from threadpoolctl import threadpool_info\nexcept ImportError:\n    threadpool_info = list\n"
            "blas = [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']\n"
            "print(json.dumps({'aff': sorted(os.sched_getaffinity(0)), 'blas': blas}))")
    env = {**os.environ, PIN_ENV: str(core), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    got = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                    check=True).stdout)
    assert got["aff"] == [core]
    assert all(n == 1 for n in got["blas"])  # (empty without threadpoolctl: the affinity is the check)


def test_quick_keeps_one_size_of_every_workload_and_drops_the_large_ones() -> None:
    from bench.peers_tables import Config

    quick, full = Config(quick=True, only=None), Config(quick=False, only=None)
    for w in WORKLOADS:
        assert full.sizes(w) == list(w.sizes)
        assert quick.sizes(w), w.name
    assert quick.sizes(workload("causal multi-head attention")) == ["B=2,H=4,S=128"]
    assert "1e7" in quick.sizes(workload("relu(a*b+c)"))  # the one large size --quick keeps


@pytest.mark.parametrize("name, reason", [("MLP block", "numexpr has no matmul"),
                                          ("batched matmul", "numexpr has no matmul"),
                                          ("softmax(x, -1)", "not expressible as one numexpr expression")])
def test_every_table_has_a_numexpr_and_numba_cell(name: str, reason: str) -> None:
    """A peer that cannot express a workload is an explicit cell with the reason, never a silent gap."""
    w = tiny(workload(name))
    xs = w.inputs("tiny")
    out = np.empty(w.reference(*xs).shape, np.float32)
    built = {b.name: b for b in candidates_for(w, xs, out, with_sol=False, numba_jit=False, compilers=False)}
    ne = built["numexpr"]
    if isinstance(ne, peers.Unavailable):
        assert ne.reason.startswith(reason) or ne.reason.startswith("ModuleNotFoundError"), ne.reason
    else:  # (only the softmax case could be expressible, and it is not)
        pytest.fail(f"numexpr built for {name}")
    assert "numba" in built
    if name == "MLP block":
        assert isinstance(built["numba"], peers.Unavailable) and "np.dot" in built["numba"].reason


def _row(name: str, t: float, group: str = "", cores: str = "1", check_: str = "✓") -> Row:
    return Row("w", "s", name, t, t, check_, cores=cores, group=group)


def test_verdict_is_fastest_or_behind_the_fastest_peer_of_its_own_child() -> None:
    from bench.suite_verdicts import verdict

    rows = [_row("fusebind", 2.0), _row("numpy", 3.0), _row("ORT 1t", 1.0), _row("XLA (jax.jit)", 0.5, check_="✗ x"),
            _row("fb-kernel", 0.1), _row("SOL numba", 0.1)]  # ✗ peers and fusebind's own kernels do not count
    v = verdict(rows, "1")
    assert v["text"] == "behind ORT 1t by 2.00×" and v["behind"][0] == "ORT 1t"
    assert verdict([_row("fusebind", 1.0), _row("numpy", 1.5)], "1")["text"] == "fastest (next: numpy 1.50× slower)"
    # all cores: each peer against the fusebind measured beside it (4.0 in the xla child, so XLA is slower)
    rows = [_row("fusebind", 1.0, "base", "all"), _row("numpy", 2.0, "base", "all"),
            _row("fusebind", 4.0, "xla", "all"), _row("XLA (jax.jit)", 2.0, "xla", "all")]
    assert verdict(rows, "all")["text"] == "behind XLA (jax.jit) by 2.00×"
    gone = verdict([_row("fusebind", None, check_="unavailable (broken)"), _row("numpy", 1.0)], "1")
    assert gone["text"] == "no verdict: fusebind unavailable (broken)" and gone["behind"] is None


def test_profile_summary_and_what_would_close_it() -> None:
    from bench import suite_verdicts as sv

    ghz = sv.clock_ghz()
    prof = {"steps": [["prim.matmul", "Static(matmul)", "primitive", 8e-4, 2 * 256 * 512 * 2048],
                      ["region @bias_gelu", "Static(fused.bias_gelu)", "fused", 1e-4, 0]],
            "call_s": 1.2e-3, "call_min_s": 1e-3, "ncores": 1}
    ps = sv.profile_summary(prof)
    blas = ps["kinds"]["BLAS"]
    assert blas["share"] == pytest.approx(8e-4 / 1.2e-3) and blas["gflops"] == pytest.approx(2 * 256 * 512 * 2048 / 8e-4 / 1e9)
    assert ps["overhead"] == pytest.approx(1e-4) and ps["nsteps"] == 2  # fastest call less the steps' medians
    if ghz:
        assert blas["of_peak"] == pytest.approx(blas["gflops"] / (32 * ghz))
    text = sv.what_would_close(ps, gap_s=2e-4, ratio=1.25, peer="ORT 1t")
    assert "BLAS is 67% of the call" in text and "ORT 1t is 200 µs" in text
    # an overhead larger than the gap is named as what would close it
    tiny_gap = sv.what_would_close(ps, gap_s=5e-5, ratio=1.04, peer="numpy")
    assert tiny_gap.startswith("within 5%") and "plan overhead alone is 100 µs" in tiny_gap
    numpy_mm = sv.profile_summary({"steps": [["prim.matmul", "numpy reference", "primitive", 9e-4, 10**6]],
                                   "call_s": 1e-3, "ncores": 1})
    assert "numpy's reference" in sv.what_would_close(numpy_mm, 1e-4, 1.1, "XLA (jax.jit)")


def test_profile_of_a_real_plan_counts_its_gemm_flops() -> None:
    """profile_fusebind on a jitted MLP block: one step per plan op, the two matmuls' flops, a whole-call time."""
    from bench.suite_verdicts import behind_section, profile_fusebind, profile_summary

    w = tiny(workload("MLP block"))
    xs = w.inputs("tiny")
    c = peers.fusebind_candidate(w, xs)
    assert isinstance(c, peers.Candidate) and c.obj is not None
    prof = profile_fusebind(c.obj, xs, repeat=3)
    assert "error" not in prof, prof
    t, d = xs[0].shape[0], xs[0].shape[1]
    assert sum(s[4] for s in prof["steps"]) == 2 * (2 * t * d * 4 * d)  # x@W1 and h@W2
    assert prof["call_s"] > 0 and all(s[3] > 0 for s in prof["steps"])
    assert profile_summary(prof)["kinds"]["BLAS"]["flops"] == 2 * (2 * t * d * 4 * d)
    fb, peer = _row("fusebind", 2e-3), _row("ORT 1t", 1e-3)
    fb.profile = prof
    lines = behind_section([("w", "s", "1", {"behind": ("ORT 1t", 2.0, peer, fb)})])
    assert lines[0] == ("- **w s, one core**: behind ORT 1t by 2.00× (fusebind 2 ms, ORT 1t 1 ms, min of "
                        "interleaved rounds in one child).")
    assert lines[1].startswith("  Profile (`step_profile`, medians): call ") and "BLAS" in lines[1]
    assert lines[2].startswith("  What would close it: ")


def test_an_all_core_child_without_a_peer_for_the_workload_does_not_time_fusebind() -> None:
    w = tiny(workload("MLP block"))
    xs = w.inputs("tiny")
    out = np.empty(w.reference(*xs).shape, np.float32)
    nb = candidates_for(w, xs, out, cores="all", numba_jit=False, compilers=False, group="numba")
    assert [(b.name, type(b).__name__) for b in nb] == [("numba parallel", "Unavailable")]
    alone = candidates_for(w, xs, out, cores="all", numba_jit=False, compilers=False, group="alone")
    assert [b.name for b in alone] == ["fusebind"]


def test_a_crashed_workload_child_costs_one_size_not_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child dies (abort, as a segfault would) at one size: the parent restarts it for the sizes after it,
    and that size gets a ✗ row naming the signal and the stage, and no verdict."""
    from bench.peers_tables import CRASH_ENV, CRASHED, Config, workload_rows_in_child
    from bench.suite_verdicts import verdict

    monkeypatch.setenv(CRASH_ENV, "gelu_tanh(x)|1e3")
    rows, seen = workload_rows_in_child(Config(quick=True, only="gelu_tanh(x)"), "all", "alone")
    got = [(r.size, r.name, r.check) for r in rows]
    assert [g[:2] for g in got] == [("1e3", CRASHED), ("1e5", "fusebind")], got
    assert got[1][2] == "✓"
    assert got[0][2] == ("✗ the measuring child died (signal 6) while building candidates; the other sizes were "
                         "measured in a fresh child")
    assert verdict([r for r in rows if r.size == "1e3"], "all")["text"] == f"no verdict: {got[0][2]}"
    assert "error" not in seen and seen["affinity"]


def test_budget_flag_cuts_the_time_per_size_not_the_minimum_rounds() -> None:
    from bench.peers_tables import Config

    assert (Config(quick=False, only=None).budget_s, Config(quick=True, only=None).budget_s) == (1.0, 0.25)
    cut = Config(quick=False, only=None, budget=0.4)
    assert cut.budget_s == 0.4 and cut.rounds == Config(quick=False, only=None).rounds == (7, 40)
