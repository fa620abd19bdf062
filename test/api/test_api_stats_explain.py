"""`.stats` counts every call (fast path too) and times only with profile=True;
plan hits, object-cache loads and real compiles are reported apart; a
background first call counts as arm 0; `explain()` names the kernel that runs
(key, dtypes, backend, row, source, cost and trust) and why every other row
lost; a kernel adopted after fusebind compiled one runs when it is cheaper,
or equal (the newest wins a tie), and not when it is costlier."""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fusebind as fb
from fusebind.compiler.cost import CostEstimate
from fusebind.dialect.fused import RegionOp
from fusebind.lowering import ObjectCache
from fusebind.runtime.bindings import bindings_generation, global_bindings
from fusebind.runtime.fused_kernels import adopt_runtime_fused
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.resolve import node_dtypes
from fusebind.runtime.testing import isolated_global_state, simple_signature

RNG = np.random.default_rng(3)
N = 256
NOT_TIMED = "seconds: not measured (pass profile=True)"


def exp_plus_one(x):
    return fb.exp(x) + 1.0


def ref(x: np.ndarray) -> np.ndarray:
    return np.exp(x) + np.float32(1)


def vector() -> np.ndarray:
    return RNG.standard_normal(N).astype(np.float32)


# --------------------------------------------------------------------------- counting and timing

def test_every_call_is_counted_and_nothing_is_timed_without_profile(object_cache) -> None:
    f = fb.jit(exp_plus_one, cache=object_cache)
    x = vector()
    np.testing.assert_allclose(f(x), ref(x), rtol=1e-6)
    one = f.stats
    assert (one.calls, one.fused_calls, one.arm0_calls) == (1, 1, 0)
    for _ in range(100):
        f(x)
    s = f.stats
    assert (s.calls, s.fused_calls, s.arm0_calls, s.plan_hits) == (101, 101, 0, 100)
    assert s.run_seconds is None and s.fused_seconds is None and s.arm0_seconds is None
    assert repr(s).endswith(f"fused_calls=101, {NOT_TIMED})") and "seconds=" not in repr(s)
    # the fast path is the bare native thunk: no timer wraps it
    assert type(f._fast.function).__name__ == "builtin_function_or_method"


def test_profile_times_every_call_fast_path_included(object_cache) -> None:
    f = fb.jit(exp_plus_one, cache=object_cache, profile=True)
    x = vector()
    f(x)
    one = f.stats
    assert one.fused_calls == 1 and one.fused_seconds > 0 and one.run_seconds >= one.fused_seconds
    for _ in range(100):
        np.testing.assert_allclose(f(x), ref(x), rtol=1e-6)
    s = f.stats
    assert s.calls == 101 and s.fused_calls == 101
    assert s.fused_seconds > one.fused_seconds and s.run_seconds > one.run_seconds  # the fast-path calls count
    assert s.arm0_seconds == 0.0
    assert "fused_seconds=" in repr(s) and NOT_TIMED not in repr(s)


EXP_PLUS_ONE_MLIR = """func.func @f(%x: tensor<256xf32>) -> tensor<256xf32> {
  %c = prim.constant dense<1.0> : tensor<f32>
  %e = prim.exp %x : tensor<256xf32> -> tensor<256xf32>
  %y = prim.add %e, %c : (tensor<256xf32>, tensor<f32>) -> tensor<256xf32>
  func.return %y : tensor<256xf32>
}"""


@pytest.mark.parametrize("profile", [False, True])
def test_fb_compile_counts_every_call_and_times_only_with_profile(object_cache, profile: bool) -> None:
    g = fb.compile(EXP_PLUS_ONE_MLIR, cache=object_cache, profile=profile)
    x = vector()
    for _ in range(21):
        np.testing.assert_allclose(g(x), ref(x), rtol=1e-6)
    s = g.stats
    assert s.calls == 21 and s.arms.fused_calls == 21
    if profile:
        assert s.run_seconds > 0 and NOT_TIMED not in repr(s)
    else:
        assert s.run_seconds is None and NOT_TIMED in repr(s)


def test_plan_hits_object_cache_hits_and_compiles_are_apart(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path / "objects")
    f = fb.jit(exp_plus_one, cache=cache)
    x = vector()
    f(x)
    f(x)
    s = f.stats
    assert (s.compiles, s.object_cache_hits, s.plan_hits, s.calls) == (1, 0, 1, 2)
    with isolated_global_state():  # a fresh table, as in a new process: the object code is on disk
        g = fb.jit(exp_plus_one, cache=cache)
        np.testing.assert_allclose(g(x), ref(x), rtol=1e-6)
        t = g.stats
        assert (t.compiles, t.object_cache_hits, t.fused_calls) == (0, 1, 1)
        assert "kernel of @ew_exp_add: loaded from the object cache" in g.explain(x)
    assert "kernel of @ew_exp_add: compiled in" in f.explain(x)


def test_background_first_call_counts_as_arm0(object_cache) -> None:
    release = threading.Event()
    f = fb.jit(lambda x: fb.relu(x * 3.0 - 1.0), cache=object_cache, background=True,
               before_compile=lambda name: release.wait(30))
    x = vector()
    try:
        np.testing.assert_allclose(f(x), np.maximum(x * 3 - 1, 0), rtol=1e-6)
        s = f.stats
        assert (s.calls, s.arm0_calls, s.fused_calls) == (1, 1, 0)
        assert ("its ops run as primitives (counted as arm 0): compiling in the background"
                in f.explain(x))
    finally:
        release.set()
    assert f.wait_compiled(60)
    np.testing.assert_allclose(f(x), np.maximum(x * 3 - 1, 0), rtol=1e-6)
    s = f.stats
    assert (s.calls, s.arm0_calls, s.fused_calls) == (2, 1, 1)  # explain() runs no call


# --------------------------------------------------------------------------- which kernel runs

def writer(value: float, calls: list[int]) -> Kernel:
    """A Python kernel for a 1-d f32 -> f32 region that fills its output with `value`."""
    def body(*descs: Any) -> None:
        calls.append(1)
        out = descs[-1].contents
        arr = np.ctypeslib.as_array(ctypes.cast(out.aligned, ctypes.POINTER(ctypes.c_float)), shape=(out.sizes[0],))
        arr[:] = value

    return Kernel.from_python(body, signature=simple_signature(("f32", "f32"), 1), source=f"test:writes {value}")


def compiled(object_cache: ObjectCache) -> tuple[Any, np.ndarray, Any, Any, Any]:
    """A jit function whose region fusebind compiled, its argument, the region, its key and the JIT's row."""
    f = fb.jit(exp_plus_one, cache=object_cache)
    x = vector()
    f(x)
    f(x)  # the fast path is set up: the adoption below must invalidate it
    ex = f.executor(x)
    d = ex.plan_for([x]).decisions[0]
    assert d.arm == "fused" and d.kernel is not None and (d.kernel.index, d.kernel.of) == (0, 1)
    region = next(op for op in ex.optimized_module.walk() if isinstance(op, RegionOp))
    assert [t.value for t in node_dtypes(region)] == ["f32", "f32"]
    (row,) = global_bindings().lookup(d.kernel.key, d.kernel.dtypes, "cpu")
    text = f.explain(x)
    assert f"kernel: {d.kernel.key!r} (f32, f32) on 'cpu', row 0 of 1: {row.source}, " in text
    assert f"composed) -- the only row that fits" in text
    return f, x, region, d.kernel.key, row


def adopt(region: Any, kernel: Kernel, cost: Any) -> None:
    before = bindings_generation()
    adopt_runtime_fused("mine", region, kernel, ("f32", "f32"), "cpu", cost=cost)
    assert bindings_generation() == before + 1


def test_a_cheaper_kernel_adopted_later_runs_and_explain_names_it(object_cache) -> None:
    f, x, region, key, jit_row = compiled(object_cache)
    calls: list[int] = []
    c = jit_row.cost
    adopt(region, writer(7.0, calls), CostEstimate(c.flops, c.bytes, c.ns / 10, "declared"))
    np.testing.assert_array_equal(f(x), np.full(N, 7, np.float32))
    assert calls == [1]
    text = f.explain(x)
    assert f"kernel: {key!r} (f32, f32) on 'cpu', row 1 of 2: test:writes 7.0, " in text
    assert "declared) -- the cheapest priced row that fits" in text
    assert f"row 0 not used: {jit_row.source}, " in text and "-- costlier than the row chosen (" in text
    assert f"chosen: fused {key!r} row 1 (test:writes 7.0) -- " in text


def test_an_equal_cost_kernel_wins_the_tie_and_trust_breaks_an_exact_tie(object_cache) -> None:
    f, x, region, key, jit_row = compiled(object_cache)
    c = jit_row.cost
    three: list[int] = []
    adopt(region, writer(3.0, three), c)  # the very same estimate: a tie, the newest wins
    np.testing.assert_array_equal(f(x), np.full(N, 3, np.float32))
    text = f.explain(x)
    assert "row 1 of 2: test:writes 3.0, " in text and "the cheapest priced row that fits (the newest of a tie)" in text
    assert "-- same predicted time and trust, older: a tie goes to the newest row" in text
    four: list[int] = []
    adopt(region, writer(4.0, four), CostEstimate(c.flops, c.bytes, c.ns, "declared"))
    five: list[int] = []
    adopt(region, writer(5.0, five), CostEstimate(c.flops, c.bytes, c.ns, "composed"))
    np.testing.assert_array_equal(f(x), np.full(N, 4, np.float32))  # newer, but less trusted than row 2
    assert five == [] and len(four) == 1
    text = f.explain(x)
    assert "row 2 of 4: test:writes 4.0, " in text
    assert "row 3 not used: test:writes 5.0, " in text
    assert "same predicted time, less trusted (composed < declared)" in text


def test_a_costlier_or_unpriced_kernel_is_not_chosen_and_explain_says_why(object_cache) -> None:
    f, x, region, key, jit_row = compiled(object_cache)
    c = jit_row.cost
    slow: list[int] = []
    adopt(region, writer(9.0, slow), CostEstimate(c.flops, c.bytes, c.ns * 10, "declared"))
    unpriced: list[int] = []
    adopt(region, writer(8.0, unpriced), None)
    np.testing.assert_allclose(f(x), ref(x), rtol=1e-6)
    assert slow == [] and unpriced == []
    text = f.explain(x)
    assert f"row 0 of 3: {jit_row.source}, " in text and f"chosen: fused {key!r} row 0 ({jit_row.source})" in text
    assert (f"row 1 not used: test:writes 9.0, {c.ns * 10 / 1000:.3g} us" in text
            and f"-- costlier than the row chosen ({c.ns * 10 / 1000:.3g} us > {c.ns / 1000:.3g} us)" in text)
    assert "row 2 not used: test:writes 8.0, UNKNOWN_COST -- unpriced (UNKNOWN_COST): a priced row wins" in text


@pytest.mark.parametrize("trust", ["composed", "declared", "measured"])
def test_the_choice_names_the_trust_kind(object_cache, trust: str) -> None:
    f, x, region, key, jit_row = compiled(object_cache)
    c = jit_row.cost
    calls: list[int] = []
    adopt(region, writer(2.0, calls), CostEstimate(c.flops, c.bytes, c.ns / 2, trust))  # type: ignore[arg-type]
    np.testing.assert_array_equal(f(x), np.full(N, 2, np.float32))
    assert f", {trust}) -- the cheapest priced row that fits" in f.explain(x)


# --------------------------------------------------------------------------- prologues (issue 13)

def test_explain_shows_slices_as_region_prologues(object_cache) -> None:
    """Each index-map op (INDEX_MAP) of a fused region is a prologue line under its region's
    header, worded as numpy's subscript of the argument it reads; np.split pieces too."""
    def f(x, y):
        a, b = np.split(x[1:5:2, :], 2, axis=1)
        return (a * 2.0 + y[::-1, ::2]) - b

    f_jit = fb.jit(f, cache=object_cache)
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    y = RNG.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(f_jit(x, y), f(x, y), rtol=1e-6)
    assert f_jit.stats.fused_calls == 1
    text = f_jit.explain(x, y)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("region @"))
    assert lines[head + 1:head + 5] == [
        "  prologue: slice x[1:5:2, :] (index map, no copy)",
        "  prologue: slice (slice x[1:5:2, :])[:, :2] (index map, no copy)",
        "  prologue: slice (slice x[1:5:2, :])[:, 2:] (index map, no copy)",
        "  prologue: slice y[::-1, ::2] (index map, no copy)",
    ], text
    assert lines[head + 5].startswith("  arm 0 (primitives): "), text


def test_explain_without_index_maps_has_no_prologue(object_cache) -> None:
    f = fb.jit(exp_plus_one, cache=object_cache)
    x = vector()
    f(x)
    assert "prologue" not in f.explain(x)


def test_describe_default_words_kind_operands_and_props() -> None:
    """PrimOp.describe: KIND, operand names, properties; slice bounds as numpy's subscript
    (numpy's defaults left out, a negative stride's -1 limit is 'past the front')."""
    from fusebind.dialect import parse_module

    text = """func.func @m(%x: tensor<6x4xf32>, %y: tensor<6x4xf32>) -> tensor<2x4xf32> {
  %s = prim.slice %x {starts = [5, 3], limits = [0, -1], strides = [-2, -1]} : tensor<6x4xf32> -> tensor<3x4xf32>
  %t = prim.slice %x {starts = [0, 1], limits = [6, 3], strides = [1, 1]} : tensor<6x4xf32> -> tensor<6x2xf32>
  %r = prim.reduce_sum %y {axes = [1], keepdims} : tensor<6x4xf32> -> tensor<6x1xf32>
  %c = prim.compare lt %x, %y : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xi1>
  %e = prim.slice %x {starts = [-1, 0], limits = [-1, 4], strides = [-1, 1]} : tensor<6x4xf32> -> tensor<0x4xf32>
  %o = prim.slice %x {starts = [1, 0], limits = [5, 4], strides = [2, 1]} : tensor<6x4xf32> -> tensor<2x4xf32>
  func.return %o : tensor<2x4xf32>
}"""
    ops = list(parse_module(text).walk())
    by_name = {op.results[0].name_hint: op for op in ops if op.results and op.results[0].name_hint}
    assert by_name["s"].describe(["x"]) == "slice x[:0:-2, ::-1]"
    assert by_name["t"].describe(["x"]) == "slice x[:, 1:3]"
    assert by_name["o"].describe(["x"]) == "slice x[1:5:2, :]"
    assert by_name["e"].describe(["x"]) == "slice x[0:0, :]"
    assert by_name["r"].describe(["y"]) == "reduce_sum y axes [1] keepdims"
    assert by_name["c"].describe(["x", "y"]) == "compare lt x, y"
    assert by_name["c"].describe() == "compare lt #0, #1"


def test_explain_shows_gathers_and_concats_as_prologues_without_a_class_list(object_cache) -> None:
    """gather / concat (INDEX_MAP ops landed after the explain code) appear with no edit to it:
    np.take by constant indices and np.roll (two slices and a concat) as prologues."""
    def f(x, y):
        return np.take(x, [3, -1, 0], axis=1) * y + np.roll(x, 1, axis=1)[:, :3]

    f_jit = fb.jit(f, cache=object_cache)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y = np.float32(2.0) * np.ones(3, np.float32)
    np.testing.assert_array_equal(f_jit(x, y), f(x, y))
    assert f_jit.stats.fused_calls == 1
    lines = [line for line in f_jit.explain(x, y).splitlines() if "prologue" in line]
    assert "  prologue: gather x, (constant) axis 1 (index map, no copy)" in lines, lines
    assert "  prologue: concat (slice x[:, 3:]), (slice x[:, :3]) axis 1 (index map, no copy)" in lines, lines
