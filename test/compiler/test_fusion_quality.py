"""Fusion quality: catalog patterns inside larger clusters, merging regions,
the in-place matmul epilogue, and cycle safety between regions."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.compiler.catalog import catalog_entry
from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.inplace import INPLACE_ATTR, inplace_of, inplace_operand
from fusebind.compiler.optimize import optimize_graph
from fusebind.compiler.recipes import RecipeRegistry
from fusebind.compiler.rules import Candidate, MatchState, Rule
from fusebind.dialect import RegionOp, interpret, parse_module, print_module

RNG = np.random.default_rng(1)


def regions(module):
    return [op for op in module.walk() if isinstance(op, RegionOp)]


def outside_prims(module, fn_index: int = 0):
    fn = list(module.ops)[fn_index]
    return [op.name for op in fn.body.blocks[0].ops if op.name.startswith("prim.")]


def args_for(module):
    fn = next(iter(module.ops))
    return [RNG.standard_normal([d for d in t.get_shape()]).astype(np.float32) for t in fn.function_type.inputs.data]


def same_values(a, b, *arrays):
    x, y = interpret(a, *arrays), interpret(b, *arrays)
    x = x if isinstance(x, tuple) else (x,)
    y = y if isinstance(y, tuple) else (y,)
    assert len(x) == len(y)
    for u, v in zip(x, y):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def body_ops(region):
    return [op.name for op in region.body.blocks[0].ops if op.name != "fused.yield"]


# --------------------------------------------------------------------------- 1. catalog inside a cluster

CHAIN = """
func.func @chain(%a: tensor<1024xf32>, %b: tensor<1024xf32>, %c: tensor<1024xf32>) -> tensor<1024xf32> {
  %0 = prim.mul %a, %b : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %1 = prim.add %0, %c : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %2 = prim.relu %1 : tensor<1024xf32> -> tensor<1024xf32>
  func.return %2 : tensor<1024xf32>
}
"""


def test_bias_relu_does_not_split_the_chain() -> None:
    module = parse_module(CHAIN)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert body_ops(region) == ["prim.mul", "prim.add", "prim.relu"]
    assert outside_prims(result.module) == []
    assert len(region.operands) == 3 and len(region.results) == 1  # 4 arrays of traffic, one launch
    (d,) = result.fused()
    assert d.rule == "elementwise" and "absorbs catalog bias_relu" in d.detail
    same_values(module, result.module, *args_for(module))


def test_exact_catalog_pattern_keeps_its_static_id() -> None:
    text = """
    func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
      %x = prim.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %y = prim.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
      func.return %y : tensor<4x8xf32>
    }
    """
    result = optimize_graph(parse_module(text), OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert region.id == catalog_entry("bias_relu").fused_id


def test_cluster_kernel_missing_runs_catalog_now_and_queues_the_cluster() -> None:
    """Only the catalog kernel is bound: bias_relu fuses under its static id
    now, the whole cluster is queued (once), and the mul is not queued alone."""
    module = parse_module(CHAIN)
    registry = RecipeRegistry()
    bias_relu = catalog_entry("bias_relu").fused_id
    result = optimize_graph(module, OptimizationContext.with_ids({bias_relu}, recipes=registry))
    (region,) = regions(result.module)
    assert region.id == bias_relu
    assert outside_prims(result.module) == ["prim.mul"]
    (item,) = result.work_order
    assert body_ops(item.region) == ["prim.mul", "prim.add", "prim.relu"]
    gated = [d for d in result.decisions if d.verdict == "gated"]
    assert [d.fused_id for d in gated] == [item.fused_id]
    same_values(module, result.module, *args_for(module))
    # Once the cluster's kernel is bound, the next optimization uses it.
    again = optimize_graph(module, OptimizationContext.with_ids({bias_relu, item.fused_id}, recipes=registry))
    (region,) = regions(again.module)
    assert region.id == item.fused_id and outside_prims(again.module) == []


def test_nothing_bound_queues_only_the_cluster() -> None:
    result = optimize_graph(parse_module(CHAIN), OptimizationContext.gate_none(recipes=RecipeRegistry()))
    assert regions(result.module) == []
    (item,) = result.work_order
    assert body_ops(item.region) == ["prim.mul", "prim.add", "prim.relu"] and item.static_id is None


SOFTMAX_PRO_EPI = """
func.func @f(%x: tensor<4x8xf32>, %t: tensor<f32>) -> tensor<4x8xf32> {
  %s = prim.mul %x, %t : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = prim.reduce_max %s {axes = [1], keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = prim.sub %s, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %e = prim.exp %d : tensor<4x8xf32> -> tensor<4x8xf32>
  %u = prim.reduce_sum %e {axes = [1], keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = prim.div %e, %u : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %n = prim.neg %r : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %n : tensor<4x8xf32>
}
"""


def test_softmax_absorbs_its_elementwise_prologue_and_epilogue() -> None:
    module = parse_module(SOFTMAX_PRO_EPI)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert body_ops(region)[0] == "prim.mul" and body_ops(region)[-1] == "prim.neg"
    assert len(body_ops(region)) == 7 and outside_prims(result.module) == []
    (d,) = result.fused()
    assert d.rule == "reduction" and "absorbs catalog softmax" in d.detail
    same_values(module, result.module, *args_for(module)[:1], np.float32(0.7))


def test_absorbing_not_cheaper_is_a_decision() -> None:
    """Free launches on a flop-bound machine: the cluster costs exactly the
    catalog region plus the mul, so absorbing is refused (and the catalog
    region, equal to its primitives, too): every refusal is a decision."""
    from fusebind.compiler.cost import MachineModel

    machine = MachineModel(bandwidth_bytes_per_s=1e15, flops_per_s=1e3, launch_ns=0.0)
    module = parse_module(CHAIN)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry(), machine=machine))
    absorb = [d for d in result.decisions if "absorbing 1 neighbour op(s) into catalog bias_relu" in d.detail]
    assert [(d.verdict, d.name) for d in absorb] == [("unprofitable", "ew_mul_add_relu")]
    assert absorb[0].fused_cost.ns == absorb[0].unfused_cost.ns
    assert ("unprofitable", "bias_relu") in [(d.verdict, d.name) for d in result.decisions]
    assert regions(result.module) == []


# --------------------------------------------------------------------------- 2. merging regions

MERGE = """
func.func @f(%a: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = prim.exp %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = prim.reduce_sum %e {axes = [1]} : tensor<4x8xf32> -> tensor<4xf32>
  %l = prim.log %s : tensor<4xf32> -> tensor<4xf32>
  %n = prim.neg %l : tensor<4xf32> -> tensor<4xf32>
  func.return %s, %n : tensor<4xf32>, tensor<4xf32>
}
"""


def test_reduction_region_and_elementwise_region_merge() -> None:
    module = parse_module(MERGE)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert body_ops(region) == ["prim.exp", "prim.reduce_sum", "prim.log", "prim.neg"]
    assert len(region.results) == 2  # %s is still returned
    (d,) = result.fused()  # the two merged regions' own verdicts are superseded
    assert d.rule == "merge" and "merges @fused_exp_reduce_sum (reduction) and @ew_log_neg (elementwise)" in d.detail
    same_values(module, result.module, *args_for(module))


def test_merge_respects_max_ops() -> None:
    module = parse_module(MERGE)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry(), max_region_ops=3))
    assert len(regions(result.module)) == 2
    too_big = [d for d in result.decisions if d.verdict == "too-big" and d.rule == "merge"]
    assert too_big and "4 ops > max-ops 3" in too_big[0].detail
    same_values(module, result.module, *args_for(module))


def test_nothing_bound_queues_the_merged_region_not_its_parts() -> None:
    module = parse_module(MERGE)
    registry = RecipeRegistry()
    gated = optimize_graph(module, OptimizationContext.gate_none(recipes=registry))
    (item,) = gated.work_order
    assert item.rule == "merge" and body_ops(item.region) == ["prim.exp", "prim.reduce_sum", "prim.log", "prim.neg"]
    assert [d.fused_id for d in gated.decisions if d.verdict == "gated"] == [item.fused_id]
    final = optimize_graph(module, OptimizationContext.with_ids({item.fused_id}, recipes=registry))
    assert [r.id for r in regions(final.module)] == [item.fused_id]


def test_parts_bound_merge_not_bound_parts_run_and_merge_is_queued() -> None:
    module = parse_module(MERGE)
    registry = RecipeRegistry()
    small = optimize_graph(module, OptimizationContext.gate_none(recipes=registry, max_region_ops=3))
    part_ids = {w.fused_id for w in small.work_order}
    assert len(part_ids) == 2
    result = optimize_graph(module, OptimizationContext.with_ids(part_ids, recipes=registry))
    assert sorted(r.id for r in regions(result.module)) == sorted(part_ids)
    (item,) = result.work_order
    assert item.rule == "merge" and len(body_ops(item.region)) == 4
    same_values(module, result.module, *args_for(module))
    final = optimize_graph(module, OptimizationContext.with_ids(part_ids | {item.fused_id}, recipes=registry))
    assert [r.id for r in regions(final.module)] == [item.fused_id]


def test_optimizing_the_optimized_module_changes_nothing() -> None:
    """A fixpoint: running the optimizer on its own output fuses nothing more."""
    for text in (MERGE, CHAIN, SOFTMAX_PRO_EPI):
        ctx = OptimizationContext.gate_all(recipes=RecipeRegistry())
        once = optimize_graph(parse_module(text), ctx)
        twice = optimize_graph(once.module, ctx)
        assert print_module(twice.module) == print_module(once.module)
        assert twice.fused() == ()


# --------------------------------------------------------------------------- 3. in-place epilogue

MATMUL = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = prim.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %x = prim.add %m, %bias : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %y = prim.sigmoid %x : tensor<4x16xf32> -> tensor<4x16xf32>
  %z = prim.add %y, %res : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %z : tensor<4x16xf32>
}
"""


def test_matmul_epilogue_is_marked_in_place() -> None:
    module = parse_module(MATMUL)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert outside_prims(result.module) == ["prim.matmul"]
    assert region.operands[0].owner.name == "prim.matmul"
    assert inplace_of(region) == (0, 0)
    (d,) = result.fused()
    assert d.inplace == (0, 0) and "in place: result 0 may reuse operand 0's buffer" in d.detail
    # The marker survives printing and parsing, custom and generic forms.
    for generic in (False, True):
        (again,) = regions(parse_module(print_module(result.module, generic=generic)))
        assert inplace_of(again) == (0, 0)
    same_values(module, result.module, *args_for(module))


def test_bias_gelu_after_matmul_is_marked_in_place() -> None:
    from fusebind.compiler.catalog import recipe_function_text

    text = recipe_function_text("bias_gelu", "f32", (4, 16)).replace(
        "func.func @bias_gelu(%arg0: tensor<4x16xf32>",
        "func.func @bias_gelu(%l: tensor<4x8xf32>, %r: tensor<8x16xf32>",
    ).replace("    %v1 =", "    %arg0 = prim.matmul %l, %r : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>\n    %v1 =", 1)
    module = parse_module(text)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert region.id == catalog_entry("bias_gelu").fused_id
    assert inplace_of(region) == (0, 0)


@pytest.mark.parametrize("case,epilogue", [
    # the matmul result is also returned: its buffer is not the region's to overwrite
    ("multi-use", """
  %x = prim.add %m, %bias : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %y = prim.sigmoid %x : tensor<4x16xf32> -> tensor<4x16xf32>
  %z = prim.add %y, %res : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %z, %m : tensor<4x16xf32>, tensor<4x16xf32>"""),
    # a reduction reads other elements of the row than the one being written
    ("reduction", """
  %r = prim.reduce_max %m {axes = [1], keepdims} : tensor<4x16xf32> -> tensor<4x1xf32>
  %x = prim.sub %m, %r : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %z = prim.exp %x : tensor<4x16xf32> -> tensor<4x16xf32>
  func.return %z, %res : tensor<4x16xf32>, tensor<4x16xf32>"""),
])
def test_unsound_epilogues_are_not_marked(case: str, epilogue: str) -> None:
    text = ("func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xf32>, %res: tensor<4x16xf32>)"
            " -> (tensor<4x16xf32>, tensor<4x16xf32>) {\n"
            "  %m = prim.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>" + epilogue + "\n}\n")
    module = parse_module(text)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert inplace_of(region) is None and INPLACE_ATTR not in region.attributes
    assert all(d.inplace is None for d in result.decisions)
    same_values(module, result.module, *args_for(module))


def test_broadcast_matmul_operand_is_not_in_place() -> None:
    """A (4x1) matmul result broadcast against a (4x16) operand: element i of
    the output does not read element i of the matmul result."""
    text = """
    func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x1xf32>, %w: tensor<4x16xf32>) -> tensor<4x16xf32> {
      %m = prim.matmul %a, %b : (tensor<4x8xf32>, tensor<8x1xf32>) -> tensor<4x1xf32>
      %x = prim.exp %m : tensor<4x1xf32> -> tensor<4x1xf32>
      %y = prim.mul %x, %w : (tensor<4x1xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
      func.return %y : tensor<4x16xf32>
    }
    """
    module = parse_module(text)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))
    (region,) = regions(result.module)
    assert inplace_of(region) is None


def test_inplace_operand_rejects_a_derived_broadcast() -> None:
    """Hand-built region: the matmul result (4x16) is broadcast to (2x4x16)
    inside; the single result cannot alias it (different type anyway), and a
    same-type result computed through a broadcast_to of it is refused."""
    text = """
    func.func @f(%a: tensor<16x8xf32>, %b: tensor<8x16xf32>) -> tensor<16x16xf32> {
      %m = prim.matmul %a, %b : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
      %r = fused.region @g (%m) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
      ^bb0(%x: tensor<16x16xf32>):
        %t = prim.broadcast_to %x {shape = [16, 16]} : tensor<16x16xf32> -> tensor<16x16xf32>
        %y = prim.neg %t : tensor<16x16xf32> -> tensor<16x16xf32>
        fused.yield %y : tensor<16x16xf32>
      }
      func.return %r : tensor<16x16xf32>
    }
    """
    (region,) = regions(parse_module(text))
    assert inplace_operand(region, {region}) is None
    ok = parse_module(text.replace("prim.broadcast_to %x {shape = [16, 16]}", "prim.exp %x"))
    (region,) = regions(ok)
    assert inplace_operand(region, {region}) == 0


# --------------------------------------------------------------------------- 5. cycles between regions

CYCLE = """
func.func @f(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = prim.exp %x : tensor<8xf32> -> tensor<8xf32>
  %b = prim.neg %a : tensor<8xf32> -> tensor<8xf32>
  %c = prim.exp %y : tensor<8xf32> -> tensor<8xf32>
  %d = prim.neg %c : tensor<8xf32> -> tensor<8xf32>
  func.return %b, %d : tensor<8xf32>, tensor<8xf32>
}
"""


def _pairs_rule(state: MatchState) -> list[Candidate]:
    """Crafted: {a, d} and {b, c}. Each is convex, but the first needs %c
    from the second and the second needs %a from the first."""
    a, b, c, d = state.graph.ops[:4]
    return [Candidate("pairs", "first", (a, d)), Candidate("pairs", "second", (b, c))]


def test_candidate_closing_a_cycle_is_dropped_with_a_decision() -> None:
    module = parse_module(CYCLE)
    rules = [Rule("pairs", None, _pairs_rule)]
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()), rules=rules)
    (region,) = regions(result.module)
    assert region.region_name == "first"
    (d,) = [d for d in result.decisions if d.name == "second"]
    assert d.verdict == "illegal"
    assert d.detail == "would create a cycle: a path leaves through region @first and re-enters at prim.neg"
    assert d.remark() == ("remark: rejected @second (illegal: would create a cycle: a path leaves through "
                          "region @first and re-enters at prim.neg) in @f")
    result.module.verify()
    same_values(module, result.module, *args_for(module))


def test_merged_region_results_ignore_uses_by_regions_not_yet_inserted() -> None:
    """Regression (found by the random-graph test): the reduction region's
    pending operand %v0 must not make %v0 an extra result of the merge."""
    text = """
    func.func @f(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %v0 = prim.exp %a : tensor<3x4xf32> -> tensor<3x4xf32>
      %v3 = prim.reduce_sum %v0 {axes = [1], keepdims} : tensor<3x4xf32> -> tensor<3x1xf32>
      %v4 = prim.exp %v0 : tensor<3x4xf32> -> tensor<3x4xf32>
      %v10 = prim.add %a, %v3 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
      func.return %v10 : tensor<3x4xf32>
    }
    """
    module = parse_module(text)
    result = optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry(), max_region_ops=4))
    (region,) = regions(result.module)
    assert len(region.results) == 1
    same_values(module, result.module, *args_for(module))
