"""Issue 19, "A long-running process stays bounded": the soak (docs/SOAK.md).

A jitted function is called over many distinct input shapes under the LRU kernel budget
(runtime/budget.py), with the shape-polymorphic kernels off (`dynamic=False`), automatic
(`None`) and on (`True`), in a fresh interpreter (soak_child.py) with a fresh
FUSEBIND_CACHE_DIR (evicted kernels come back from the object cache). Every result is
checked against numpy in the child. Asserted here: the kernels bound never exceed the
budget, an evicted kernel's rows are gone, the recipe registry holds at most the bound
kernels' recipes + RECIPES_UNBOUND, the linked code alive is the budget + a constant, and
RSS grows within the documented bound. The default suite runs a short slice; FUSEBIND_LONG=1
runs the full 2,000 calls over 300 shapes of each mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import LONG, scaled

HERE = Path(__file__).resolve().parent

#: linked code alive beyond the budget: call thunks (one per kernel signature), static
#: kernels, and a kernel or two held by a plan until its executor next plans (measured: 5)
LIVE_CODE_SLACK = 16
#: RSS per distinct shape, static traces (dynamic=False): one trace, executor and optimized
#: module per shape, kept by the jitted function (measured 175 KiB over 300 shapes)
STATIC_KIB_PER_SHAPE = 320
#: RSS per distinct shape with a dynamic trace: one trace and one plan per shape (measured 25 KiB)
DYNAMIC_KIB_PER_SHAPE = 96
#: RSS per kernel load after eviction: LLJIT keeps ~9 KiB per library it ever linked
#: (loader.py); measured 10 KiB
KIB_PER_LOAD = 16
#: allocator noise and first-use growth after the first checkpoint
SLACK_KIB = 12 * 1024


def _soak(tmp_path: Path, *specs: str, recipes_unbound: int | None = None) -> list[dict]:
    env = dict(os.environ, FUSEBIND_CACHE_DIR=str(tmp_path / "cache"), FUSEBIND_MACHINE="default")
    env.pop("FUSEBIND_KERNEL_BUDGET", None)
    if recipes_unbound is not None:
        env["SOAK_RECIPES_UNBOUND"] = str(recipes_unbound)
    proc = subprocess.run([sys.executable, str(HERE / "soak_child.py"), *specs], capture_output=True, text=True,
                          env=env, timeout=1800 if LONG else 300)
    assert proc.returncode == 0, f"the soak failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _check_bounded(fig: dict) -> None:
    budget = fig["budget"]
    where = f"{fig['mode']} soak, {fig['shapes']} shapes, {fig['calls']} calls, budget {budget}: {fig}"
    assert fig["kernels"] <= budget, where
    assert fig["evicted_with_rows"] == [], where  # an evicted kernel's rows left the table with it
    # the registry: every bound kernel's recipe, plus at most RECIPES_UNBOUND others
    assert fig["recipes"] <= fig["recipes_bound"] + fig["recipes_unbound"], where
    # a kernel has rows under its own id, and a dynamic one also beside a static id (jit.bind_beside)
    assert fig["recipes_bound"] <= fig["runtime_rows"] <= 2 * budget, where
    assert fig["live_code"] <= budget + LIVE_CODE_SLACK, where
    assert fig["freed_code"] >= fig["evictions"] - LIVE_CODE_SLACK, where  # evicted code was unloaded
    per_shape = STATIC_KIB_PER_SHAPE if fig["mode"] == "static" else DYNAMIC_KIB_PER_SHAPE
    first, last = fig["rss"][0][1], fig["rss"][-1][1]
    bound = fig["shapes"] * per_shape + fig["loaded_code"] * KIB_PER_LOAD + SLACK_KIB
    assert last - first <= bound, f"RSS grew {last - first} KiB > {bound} KiB; {where}"


@pytest.fixture(scope="module")
def short_soak(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """One child, three short soaks (~4 s of the child's ~9 s is importing fusebind)."""
    return _soak(tmp_path_factory.mktemp("soak"), "static:6:30:2", "auto:8:40:2", "dynamic:8:40:2",
                 f"churn:{scaled(800, 6000)}:64", recipes_unbound=2)


def test_a_short_soak_stays_bounded_and_correct(short_soak: list[dict]) -> None:
    figs = [f for f in short_soak if f["mode"] != "churn"]
    assert [f["mode"] for f in figs] == ["static", "auto", "dynamic"]
    for fig in figs:
        _check_bounded(fig)
    static = figs[0]
    assert static["evictions"] >= static["shapes"] - static["budget"]  # the budget really evicted
    assert static["loads_after_all_shapes"] > 0  # evicted shapes came back (object cache loads)
    assert static["recipes_forgotten"] > 0  # the registry was trimmed, not just small
    # a dynamic trace compiles once for every shape: no kernel per shape
    assert figs[2]["loaded_code"] <= 8 and figs[2]["executors"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["static", "auto", "dynamic"])
def test_the_full_soak_2000_calls_over_300_shapes(tmp_path: Path, mode: str) -> None:
    (fig,) = _soak(tmp_path, f"{mode}:300:2000:32")
    _check_bounded(fig)
    print(json.dumps(fig))


def test_an_executor_keeps_only_the_fast_paths_of_its_cached_plans(short_soak: list[dict]) -> None:
    for fig in short_soak[:3]:
        assert fig["fast_paths_kept"] <= fig["plans_cached"], fig


# --------------------------------------------------------------------------- the recipe registry's bound


def _region(n: int):
    from fusebind.dialect import parse_module

    t = f"tensor<{n}xf32>"
    text = (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %r = fused.region @k (%a, %b) : ({t}, {t}) -> {t} {{\n"
            f"  ^bb0(%x: {t}, %y: {t}):\n"
            f"    %m = prim.mul %x, %y : ({t}, {t}) -> {t}\n"
            f"    fused.yield %m : {t}\n  }}\n  func.return %r : {t}\n}}\n")
    return next(op for op in parse_module(text).walk() if op.name == "fused.region")


def test_a_trimmed_registry_forgets_the_least_recently_used_and_never_reuses_an_id() -> None:
    from fusebind.compiler.recipes import RecipeRegistry, UnknownRecipeError

    registry = RecipeRegistry()
    ids = [registry.register(f"r{n}", _region(n)) for n in range(2, 8)]
    assert ids == list(range(ids[0], ids[0] + 6))
    registry.recipe_of(ids[0])  # used: now the most recent
    assert registry.trim(2, pinned={ids[1]}) == 3  # keeps the pinned one and the two most recent others
    assert sorted(registry.ids()) == sorted([ids[0], ids[1], ids[5]])
    assert registry.id_of(_region(3)) == ids[1] and registry.id_of(_region(4)) is None
    with pytest.raises(UnknownRecipeError, match=f"no recipe is registered under FusedOpId {ids[2]}"):
        registry.recipe_of(ids[2])
    assert registry.register("again", _region(4)) == ids[2]  # the same math gets its old id back
    assert registry.recipe_of(ids[2]).name == "again"
    assert registry.register("new", _region(9)) == ids[5] + 1  # a new region never gets a forgotten id
    assert registry.forgotten() == 2 and registry.forgotten_total == 3
    with pytest.raises(ValueError, match="trim keeps a number of recipes >= 0"):
        registry.trim(-1)


def test_a_forgotten_digest_beyond_the_limit_gives_a_new_id(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusebind.compiler.recipes import RecipeRegistry

    monkeypatch.setattr(RecipeRegistry, "FORGOTTEN_LIMIT", 1)
    registry = RecipeRegistry()
    first, second = registry.register("a", _region(2)), registry.register("b", _region(3))
    assert registry.trim(0) == 2 and registry.forgotten() == 1  # the older digest went
    assert registry.register("b", _region(3)) == second
    assert registry.register("a", _region(2)) == second + 1 != first


def test_a_session_trims_its_registry_at_every_swap_that_binds() -> None:
    """Before the bound: a region registered per shape stayed for the session's life (recipes grew
    with every shape served). Now every swap that binds keeps the bound ids' recipes and
    RECIPES_UNBOUND others."""
    from fusebind.runtime import session as session_mod
    from fusebind.runtime.fused_kernels import adopt_runtime_fused
    from fusebind.runtime.session import Session
    from fusebind.runtime.testing import noop_kernel, simple_signature

    s = Session("trim")
    unbound = [s.recipes.register(f"gated{n}", _region(n)) for n in range(2, 2 + session_mod.RECIPES_UNBOUND + 10)]
    assert len(s.recipes) == session_mod.RECIPES_UNBOUND + 10  # registering alone never trims
    sig = simple_signature(("f32", "f32", "f32"))
    bound = adopt_runtime_fused("bound", _region(200), noop_kernel(sig), ["f32"] * 3, "cpu", session=s)
    assert len(s.recipes) == session_mod.RECIPES_UNBOUND + 1
    assert int(bound) in s.recipes.ids() and unbound[0] not in s.recipes.ids() and unbound[-1] in s.recipes.ids()
    assert s.recipes.recipe_of(int(bound)).name == "bound"


# --------------------------------------------------------------------------- the loader's engines

_TINY_IR = """define void @tiny(ptr %p) {
entry:
  store i64 7, ptr %p
  ret void
}
"""


def test_load_and_free_churn_does_not_grow_per_load(short_soak: list[dict]) -> None:
    """Before engine rotation (runtime/loader.py) every load kept ~9 KiB in the one LLJIT for
    good (its JITDylib cannot be removed): a budget thrashing over many shapes grew forever."""
    (fig,) = [f for f in short_soak if f["mode"] == "churn"]
    assert fig["kib_per_load"] <= 2.0, f"RSS kept per load+free: {fig} (LLJIT keeps ~9 KiB without rotation)"
    # every engine retired during the churn was disposed once its code was freed
    assert fig["engines"] <= fig["engines_before"] + 1, fig


def test_a_retired_engine_lives_while_its_code_does() -> None:
    import ctypes
    import gc

    import llvmlite.binding as llvm

    from fusebind.runtime import loader

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    code = llvm.Target.from_default_triple().create_target_machine().emit_object(llvm.parse_assembly(_TINY_IR))
    saved = loader.LIBRARIES_PER_ENGINE
    loader.LIBRARIES_PER_ENGINE = 2
    try:
        for _ in range(2):  # fill an engine with dropped code: `keep` then opens a fresh one
            loader.load_object(code, "tiny")
        keep = loader.load_object(code, "tiny")
        for _ in range(6):  # three engines' worth: the one holding `keep` is retired, not freed
            loader.load_object(code, "tiny")
        gc.collect()
        held = loader.loaded_code_stats().engines
        out = np.zeros(1, np.int64)
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(keep.address)(out.ctypes.data)  # its code is still mapped
        assert out[0] == 7
        del keep
        gc.collect()
        assert loader.loaded_code_stats().engines == held - 1  # its engine went with its last code
    finally:
        loader.LIBRARIES_PER_ENGINE = saved


def test_lasting_code_goes_to_an_engine_that_never_rotates() -> None:
    """A thunk or static kernel lives as long as the process: loaded into a rotating engine
    it would pin that engine (and its per-library memory) for good."""
    import ctypes
    import gc

    import llvmlite.binding as llvm

    from fusebind.runtime import loader
    from fusebind.runtime.kernel import Kernel
    from fusebind.runtime.testing import simple_signature

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    code = llvm.Target.from_default_triple().create_target_machine().emit_object(llvm.parse_assembly(_TINY_IR))
    signature = simple_signature(("i64",))
    saved = loader.LIBRARIES_PER_ENGINE
    loader.LIBRARIES_PER_ENGINE = 2
    try:
        for _ in range(2):  # a fresh current engine from here
            loader.load_object(code, "tiny")
        gc.collect()
        before = loader.loaded_code_stats().engines
        lasting = [loader.load_object(code, "tiny", lasting=True) for _ in range(3)]  # 3 engines if rotated
        lasting += [Kernel.from_object(code, "tiny", signature=signature, lasting=True) for _ in range(3)]
        with_lasting = loader.loaded_code_stats().engines
        assert with_lasting <= before + 1  # one lasting engine at most, however many lasting objects
        for _ in range(8):  # four rotations: none of them is pinned by the lasting code
            loader.load_object(code, "tiny")
        gc.collect()
        assert loader.loaded_code_stats().engines == with_lasting
        assert all(c.address for c in lasting)
        out = np.zeros(1, np.int64)
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lasting[-1].address)(out.ctypes.data)  # its code runs
        assert out[0] == 7
    finally:
        loader.LIBRARIES_PER_ENGINE = saved


# --------------------------------------------------------------------------- a function's traces


def test_a_jit_function_keeps_at_most_max_trace_keys_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_TRACE_KEYS the oldest trace key is forgotten: its executor closes, its counts stay in
    `stats`, and a call at that shape again traces again and is right."""
    import sys

    import fusebind as fb
    from fusebind.api.jit import JitFunction

    monkeypatch.setattr(sys.modules[JitFunction.__module__], "MAX_TRACE_KEYS", 3)
    f = fb.jit(lambda x: np.tanh(x) * 2.0 + 1.0, dynamic=False)
    xs = [np.linspace(-2, 2, n, dtype=np.float32) for n in range(5, 11)]
    for x in xs:
        np.testing.assert_allclose(f(x), np.tanh(x) * 2.0 + 1.0, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(f(x), np.tanh(x) * 2.0 + 1.0, rtol=1e-6, atol=1e-6)
    assert len(f._entries) == 3 and len(f._executors) == 3 and len(f._plain) <= 3
    st = f.stats
    assert (st.calls, st.traces) == (12, 6)
    np.testing.assert_allclose(f(xs[0]), np.tanh(xs[0]) * 2.0 + 1.0, rtol=1e-6, atol=1e-6)
    assert (f.stats.calls, f.stats.traces) == (13, 7) and len(f._entries) == 3
