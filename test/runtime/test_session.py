"""Sessions: each owns its binding table and recipe registry; the default one is the global API's."""

from __future__ import annotations

import threading

import pytest

from fusebind.compiler import RUNTIME_FUSED_BASE
from fusebind.runtime import Session, adopt_runtime_fused, default_session, fused_kernel_available
from fusebind.runtime.bindings import BindingError, bindings_generation, global_bindings, global_recipes
from fusebind.runtime.session import current_session, use_session
from fusebind.runtime.testing import isolated_global_state, noop_kernel

REGION = """
%r = "fused.region"(%a) <{fused_id = 0 : i64, name = "exp"}> ({
^bb0(%x: tensor<4xf32>):
  %e = prim.exp %x : tensor<4xf32> -> tensor<4xf32>
  "fused.yield"(%e) : (tensor<4xf32>) -> ()
}) : (tensor<4xf32>) -> tensor<4xf32>
"""

REGION2 = REGION.replace("prim.exp", "prim.neg")


def test_two_sessions_do_not_see_each_others_bindings_or_recipes() -> None:
    with isolated_global_state():
        one, two = Session("one"), Session("two")
        fid = adopt_runtime_fused("exp", REGION, noop_kernel(), ("f32", "f32"), "cpu", session=one)
        assert fid == RUNTIME_FUSED_BASE
        assert fused_kernel_available(fid, "cpu", session=one)
        assert not fused_kernel_available(fid, "cpu", session=two)
        assert (len(one.table), one.generation, len(one.recipes)) == (1, 1, 1)
        assert (len(two.table), two.generation, len(two.recipes)) == (0, 0, 0)
        # a fresh session allocates from the base again: ids depend only on the session
        fid2 = adopt_runtime_fused("neg", REGION2, noop_kernel(), ("f32", "f32"), "cpu", session=two)
        assert fid2 == RUNTIME_FUSED_BASE and two.recipes.recipe_of(fid2).name == "neg"
        assert one.recipes.recipe_of(fid).name == "exp"
        # neither touched the global table or registry
        assert len(global_bindings()) == 0 and len(global_recipes()) == 0


def test_the_global_functions_are_the_default_sessions() -> None:
    with isolated_global_state():
        session = default_session()
        before = bindings_generation()
        fid = adopt_runtime_fused("exp", REGION, noop_kernel(), ("f32", "f32"), "cpu")
        assert global_bindings() is session.table and bindings_generation() == session.generation == before + 1
        assert global_recipes() is session.recipes and session.recipes.recipe_of(fid).name == "exp"
        assert fused_kernel_available(fid, "cpu") and fused_kernel_available(fid, "cpu", session=session)


def test_use_session_scopes_the_current_session() -> None:
    mine = Session("mine")
    assert current_session() is default_session()
    with use_session(mine):
        assert current_session() is mine
    assert current_session() is default_session()
    with pytest.raises(TypeError, match="use_session needs a fusebind Session, got str"):
        with use_session("default"):  # type: ignore[arg-type]
            pass


def test_a_nested_writer_is_refused_in_any_session() -> None:
    session = Session()
    with pytest.raises(BindingError, match="from inside a writer fn"):
        session.extend_bindings(lambda b: session.extend_bindings(lambda c: None))
    assert session.generation == 0


def test_concurrent_adopts_into_one_session_keep_its_table_consistent() -> None:
    session = Session("threads")
    regions = [REGION.replace("4xf32", f"{n}xf32") for n in range(2, 10)]
    errors: list[BaseException] = []
    ids: dict[int, int] = {}

    def adopt(i: int) -> None:
        try:
            for _ in range(3):  # the same recipe and kernel again: no new row, no new id
                ids[i] = adopt_runtime_fused(f"r{i}", regions[i], kernels[i], ("f32", "f32"), "cpu", session=session)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    kernels = [noop_kernel() for _ in regions]
    threads = [threading.Thread(target=adopt, args=(i,)) for i in range(len(regions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(ids.values()) == list(range(RUNTIME_FUSED_BASE, RUNTIME_FUSED_BASE + len(regions)))
    session.table.validate()
    assert len(session.table) == len(regions) and session.generation == len(regions)
    for i, fid in ids.items():
        assert session.recipes.recipe_of(fid).name == f"r{i}"
        (row,) = [r for k, _, _, r in session.table.rows() if k.fused_id == fid]
        assert row.kernel is kernels[i]


CHAIN = """
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %s = prim.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %e = prim.exp %s : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}
"""


def test_fusebind_opt_ids_do_not_depend_on_what_the_process_did_before(capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from fusebind.tools.opt import run_opt

    with isolated_global_state():
        # the process has allocated a runtime id already (the global registry is not empty)...
        adopt_runtime_fused("exp", REGION, noop_kernel(), ("f32", "f32"), "cpu")
        outputs = []
        for _ in range(2):
            out, err = io.StringIO(), io.StringIO()
            assert run_opt(["-", "-p", "fuse{gate=table remarks=true}"], io.StringIO(CHAIN), out, err) == 0
            outputs.append(capsys.readouterr().err)
        # ...but each chunk runs in a fresh session: its first id is the base, every time
        assert f"gated id {RUNTIME_FUSED_BASE} (no kernel on cpu): @ew_add_exp in @chain" in outputs[0]
        assert outputs[0] == outputs[1]
        assert len(global_recipes()) == 1  # nothing leaked into the default session


def test_optimize_graph_ids_depend_only_on_the_registry_given() -> None:
    from fusebind.compiler import OptimizationContext, RecipeRegistry, optimize_graph
    from fusebind.dialect import parse_module

    def ids(registry: RecipeRegistry) -> list[int]:
        result = optimize_graph(parse_module(CHAIN), OptimizationContext.gate_none(recipes=registry))
        return [item.fused_id for item in result.work_order]

    assert ids(RecipeRegistry()) == ids(RecipeRegistry()) == [RUNTIME_FUSED_BASE]
    busy = RecipeRegistry()
    busy.register("other", REGION)
    assert ids(busy) == [RUNTIME_FUSED_BASE + 1]
    with pytest.raises(TypeError, match="OptimizationContext.recipes must be a RecipeRegistry"):
        OptimizationContext(recipes=None)  # type: ignore[arg-type]
