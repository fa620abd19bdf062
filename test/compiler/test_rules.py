"""Unit tests of each fusion rule and each rejection reason (optimize_graph)."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.compiler.catalog import RUNTIME_FUSED_BASE, catalog_entry, recipe_function_text
from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.cost import MachineModel
from fusebind.compiler.optimize import optimize_graph
from fusebind.compiler.recipes import RecipeRegistry
from fusebind.compiler.rules import CATALOG_RULES, capability_gated_rules
from fusebind.dialect import RegionOp, interpret, parse_module

RNG = np.random.default_rng(0)


def regions(module):
    return [op for op in module.walk() if isinstance(op, RegionOp)]


def prims(module):
    """Prim ops outside any region."""
    fn = next(iter(module.ops))
    return [op.name for op in fn.body.blocks[0].ops if op.name.startswith("prim.")]


def same_values(a, b, *arrays):
    x, y = interpret(a, *arrays), interpret(b, *arrays)
    x = x if isinstance(x, tuple) else (x,)
    y = y if isinstance(y, tuple) else (y,)
    for u, v in zip(x, y):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-6)


def args_for(module):
    fn = next(iter(module.ops))
    return [RNG.standard_normal([d for d in t.get_shape()]).astype(np.float32) for t in fn.function_type.inputs.data]


@pytest.mark.parametrize("name", ["softmax", "layernorm", "gelu", "bias_relu", "bias_gelu"])
def test_catalog_rule_fuses_under_static_id_when_gate_open(name: str) -> None:
    entry = catalog_entry(name)
    module = parse_module(recipe_function_text(name, "f32", (4, 8)))
    ctx = OptimizationContext.with_ids({entry.fused_id}, recipes=RecipeRegistry())
    result = optimize_graph(module, ctx)
    (region,) = regions(result.module)
    assert (region.id, region.region_name) == (entry.fused_id, name)
    assert prims(result.module) == []  # every primitive went into the region (constants cloned in)
    assert result.work_order == ()
    same_values(module, result.module, *args_for(module))


@pytest.mark.parametrize("name", ["softmax", "layernorm", "gelu", "bias_relu"])
def test_catalog_rule_gated_goes_on_work_order(name: str) -> None:
    entry = catalog_entry(name)
    module = parse_module(recipe_function_text(name, "f32", (4, 8)))
    registry = RecipeRegistry()
    result = optimize_graph(module, OptimizationContext.gate_none(recipes=registry))
    assert regions(result.module) == []
    (item,) = result.work_order
    assert item.static_id == entry.fused_id and item.fused_id >= RUNTIME_FUSED_BASE
    assert registry.recipe_of(item.fused_id).name == name
    gated = [d for d in result.decisions if d.verdict == "gated"]
    assert [d.fused_id for d in gated] == [entry.fused_id]
    assert f"gated id {entry.fused_id} (no kernel on cpu)" in gated[0].remark()
    # Once the runtime id has a kernel, the same pattern fuses under it.
    again = optimize_graph(module, OptimizationContext.with_ids({item.fused_id}, recipes=registry))
    (region,) = regions(again.module)
    assert region.id == item.fused_id


def test_capability_gated_rules_lists_static_ids_without_kernel() -> None:
    rules, gated = capability_gated_rules(lambda i: i == catalog_entry("softmax").fused_id)
    static = sorted(r.static_id for r in CATALOG_RULES)
    assert sorted(gated) == [i for i in static if i != 1]
    assert "softmax" in [r.name for r in rules] and "gelu" not in [r.name for r in rules]
    assert {"elementwise", "reduction", "matmul-epilogue"} <= {r.name for r in rules}


MATMUL = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = prim.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %x = prim.add %m, %bias : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %y = prim.sigmoid %x : tensor<4x16xf32> -> tensor<4x16xf32>
  %z = prim.add %y, %res : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %z : tensor<4x16xf32>
}
"""


def test_matmul_epilogue_keeps_matmul_outside() -> None:
    module = parse_module(MATMUL)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert region.region_name.startswith("matmul_epilogue_")
    assert prims(result.module) == ["prim.matmul"]
    assert [d.rule for d in result.fused()] == ["matmul-epilogue"]
    same_values(module, result.module, *args_for(module))


REDUCTION = """
func.func @f(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = prim.exp %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = prim.reduce_sum %e {axes = [1]} : tensor<4x8xf32> -> tensor<4xf32>
  %l = prim.log %s : tensor<4xf32> -> tensor<4xf32>
  func.return %l : tensor<4xf32>
}
"""


def test_reduction_with_prologue_and_epilogue() -> None:
    module = parse_module(REDUCTION)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert [op.name for op in region.body.blocks[0].ops] == ["prim.exp", "prim.reduce_sum", "prim.log", "fused.yield"]
    assert [d.rule for d in result.fused()] == ["reduction"]
    same_values(module, result.module, *args_for(module))


NONCONVEX = """
func.func @f(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = prim.exp %a : tensor<4x4xf32> -> tensor<4x4xf32>
  %t = prim.transpose %e {perm = [1, 0]} : tensor<4x4xf32> -> tensor<4x4xf32>
  %s = prim.add %e, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}
"""


def test_nonconvex_merge_is_illegal() -> None:
    module = parse_module(NONCONVEX)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    assert regions(result.module) == []
    (d,) = result.rejected()
    assert d.verdict == "illegal"
    assert "non-convex" in d.detail and "prim.transpose" in d.detail


def chain_text(n: int, shape: str = "16") -> str:
    t = f"tensor<{shape}xf32>"
    lines = [f"  %v1 = prim.exp %a : {t} -> {t}"]
    for i in range(2, n + 1):
        op = "neg" if i % 2 else "abs"
        lines.append(f"  %v{i} = prim.{op} %v{i - 1} : {t} -> {t}")
    return f"func.func @f(%a: {t}) -> {t} {{\n" + "\n".join(lines) + f"\n  func.return %v{n} : {t}\n}}\n"


def test_too_big_splits_the_chain() -> None:
    module = parse_module(chain_text(5))
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry(), max_region_ops=3))
    assert [len(r.body.blocks[0].ops) - 1 for r in regions(result.module)] == [3, 2]
    too_big = [d for d in result.decisions if d.verdict == "too-big"]
    assert too_big and "4 ops > max-ops 3" in too_big[0].detail
    same_values(module, result.module, *args_for(module))


def test_catalog_candidate_too_big() -> None:
    module = parse_module(recipe_function_text("layernorm", "f32", (4, 8)))
    ctx = OptimizationContext.gate_all(recipes=RecipeRegistry(), max_region_ops=4)
    result = optimize_graph(module, ctx)
    assert any(d.verdict == "too-big" and d.rule == "layernorm" for d in result.decisions)
    assert all(r.id != catalog_entry("layernorm").fused_id for r in regions(result.module))
    same_values(module, result.module, *args_for(module))


def test_unprofitable_when_costs_are_equal() -> None:
    # No launch overhead and a tiny flop rate: both sides are compute-bound with equal flops.
    machine = MachineModel(bandwidth_bytes_per_s=20e9, flops_per_s=1e3, launch_ns=0.0)
    module = parse_module(chain_text(2))
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry(), machine=machine))
    assert regions(result.module) == []
    (d,) = result.decisions
    assert d.verdict == "unprofitable"
    assert d.remark().startswith("remark: rejected @ew_exp_abs (unprofitable: fused ")
    assert d.fused_cost.ns == d.unfused_cost.ns


def test_dynamic_shapes_priced_symbolically() -> None:
    module = parse_module(chain_text(3, "?"))
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert region.cost is None  # a symbolic price is never stamped on the IR
    (d,) = result.fused()
    assert "symbolic per-element cost" in d.detail
    a = RNG.standard_normal(7).astype(np.float32)
    same_values(module, result.module, a)


def test_multi_use_value_becomes_a_result() -> None:
    text = """
    func.func @f(%a: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
      %e = prim.exp %a : tensor<8xf32> -> tensor<8xf32>
      %n = prim.neg %e : tensor<8xf32> -> tensor<8xf32>
      %t = prim.reshape %e : tensor<8xf32> -> tensor<8xf32>
      func.return %n, %t : tensor<8xf32>, tensor<8xf32>
    }
    """
    module = parse_module(text)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert len(region.results) == 2
    same_values(module, result.module, *args_for(module))


def test_identical_chains_share_one_id() -> None:
    text = """
    func.func @f(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
      %x1 = prim.exp %a : tensor<8xf32> -> tensor<8xf32>
      %y1 = prim.neg %x1 : tensor<8xf32> -> tensor<8xf32>
      %x2 = prim.exp %b : tensor<8xf32> -> tensor<8xf32>
      %y2 = prim.neg %x2 : tensor<8xf32> -> tensor<8xf32>
      func.return %y1, %y2 : tensor<8xf32>, tensor<8xf32>
    }
    """
    module = parse_module(text)
    registry = RecipeRegistry()
    gated = optimize_graph(module, OptimizationContext.gate_none(recipes=registry))
    assert len(gated.work_order) == 1 and len(registry) == 1
    ids = {d.fused_id for d in gated.decisions if d.verdict == "gated"}
    assert ids == {gated.work_order[0].fused_id}
    fused = optimize_graph(module, OptimizationContext.with_ids(ids, recipes=registry))
    assert [r.id for r in regions(fused.module)] == [gated.work_order[0].fused_id] * 2


def test_input_module_not_mutated_and_result_pure() -> None:
    from fusebind.dialect import print_module

    module = parse_module(recipe_function_text("softmax", "f32", (2, 4)))
    before = print_module(module)
    ctx = OptimizationContext.gate_all(recipes=RecipeRegistry())
    r1, r2 = optimize_graph(module, ctx), optimize_graph(module, ctx)
    assert print_module(module) == before
    assert print_module(r1.module) == print_module(r2.module)
    assert r1.remarks() == r2.remarks()


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(TypeError, match="ctx must be an OptimizationContext"):
        optimize_graph(parse_module(chain_text(2)), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_region_ops must be an int >= 2"):
        OptimizationContext(max_region_ops=1, recipes=RecipeRegistry())
