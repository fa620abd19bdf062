"""Patterns as data: each catalog entry is one pattern, from which its recipe and its matcher come.

Every entry's recipe matches its own rule; a commuted form (operands of commutative ops swapped, the
op's trait says which) matches; a swapped non-commutative op does not; a constant off by more than the
tolerance does not (and one f32 rounding away does); a pattern written in this file, not in the
package, is found by the generic matcher. GELU-tanh is written once (`catalog.gelu_tanh`).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from xdsl.traits import Commutative

from fusebind.compiler.catalog import CATALOG, catalog_entry, gelu_tanh, recipe_function_text
from fusebind.compiler.catalog_rules import CATALOG_RULES
from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.graph import DataflowGraph
from fusebind.compiler.matching import MatchState
from fusebind.compiler.optimize import optimize_graph
from fusebind.compiler.pattern_match import is_commutative, pattern_rule
from fusebind.compiler.patterns import LAST, ROW, X, Input, Pattern, PatternBuilder, PatternError
from fusebind.compiler.prim_text import PrimTextBuilder, TextValue
from fusebind.compiler.recipes import RecipeRegistry
from fusebind.compiler.synthesized_rules import SYNTHESIZED_RULES
from fusebind.dialect import RegionOp, interpret, parse_module
from fusebind.dialect.prim import AddOp, CompareOp, MulOp, SubOp

NAMES = [e.name for e in CATALOG]
RULES = {r.name: r for r in CATALOG_RULES}
SHAPE = (4, 8)


def _function(entry_name: str, builder: PrimTextBuilder, shape: tuple[int | None, ...] = SHAPE) -> str:
    """The entry's pattern replayed on `builder`, as a func.func (like recipe_function_text)."""
    pattern = catalog_entry(entry_name).pattern
    args = [TextValue(f"%arg{i}", shape if r == X else shape[-1:]) for i, r in enumerate(pattern.roles)]
    res = pattern.evaluate(builder, *args)
    params = ", ".join(f"{a.name}: {builder.type_of(a)}" for a in args)
    body = "\n".join(f"    {line}" for line in builder.lines)
    return (f"func.func @{entry_name}({params}) -> {builder.type_of(res)} {{\n{body}\n"
            f"    func.return {res.name} : {builder.type_of(res)}\n}}\n")


def _candidates(text: str, rule_name: str):
    module = parse_module(text)
    fn = next(iter(module.ops))
    graph = DataflowGraph(fn.body.blocks[0])
    return graph, RULES[rule_name].match(MatchState(graph, set(), 64))


def _ops_but_constants(graph: DataflowGraph) -> tuple:
    return tuple(op for op in graph.ops if op.name.startswith("prim.") and op.name != "prim.constant")


class Swapped(PrimTextBuilder):
    """Writes every op of a kind in `kinds` with its two operands swapped."""

    def __init__(self, kinds: set[str]) -> None:
        super().__init__("f32")
        self.kinds = kinds

    def op(self, kind, *args, **props):
        if kind in self.kinds and len(args) == 2:
            args = args[::-1]
        return super().op(kind, *args, **props)


class Perturbed(PrimTextBuilder):
    """Writes the `index`-th constant times `factor`."""

    def __init__(self, index: int, factor: float) -> None:
        super().__init__("f32")
        self.index, self.factor, self.seen = index, factor, 0

    def constant(self, value):
        self.seen += 1
        return super().constant(value * self.factor if self.seen - 1 == self.index else value)


@pytest.mark.parametrize("shape", [SHAPE, (None, 8), (2, 3, 8)])
@pytest.mark.parametrize("name", NAMES)
def test_each_recipe_matches_its_own_rule(name: str, shape) -> None:
    graph, cands = _candidates(recipe_function_text(name, "f32", shape), name)
    (cand,) = cands
    assert cand.static_id == catalog_entry(name).fused_id and cand.name == name
    assert cand.ops == _ops_but_constants(graph)  # every op, in block order; constants are cloned in


@pytest.mark.parametrize("name", [n for n in NAMES if n != "softmax"])  # softmax has no commutative op
def test_commuted_form_matches_and_computes_the_same(name: str) -> None:
    assert AddOp.has_trait(Commutative) and MulOp.has_trait(Commutative)
    text = _function(name, Swapped({"add", "mul"}))
    assert text != _function(name, PrimTextBuilder("f32"))  # really commuted
    graph, cands = _candidates(text, name)
    (cand,) = cands
    assert cand.ops == _ops_but_constants(graph)
    rng = np.random.default_rng(0)
    fn = next(iter(parse_module(text).ops))
    args = [rng.standard_normal(t.get_shape()).astype(np.float32) for t in fn.function_type.inputs.data]
    np.testing.assert_allclose(interpret(parse_module(text), *args),
                               interpret(parse_module(recipe_function_text(name, "f32", SHAPE)), *args),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["sub", "div"])
def test_swapped_non_commutative_op_does_not_match(kind: str) -> None:
    assert not SubOp.has_trait(Commutative)
    text = _function("softmax", Swapped({kind}))
    assert f"prim.{kind}" in text
    assert _candidates(text, "softmax")[1] == []


CONSTANTS = [(e.name, i) for e in CATALOG for i in range(len(e.pattern.constants()))]


@pytest.mark.parametrize(("name", "index"), CONSTANTS)
def test_near_miss_constant_does_not_match(name: str, index: int) -> None:
    assert _candidates(_function(name, Perturbed(index, 1 + 1e-4)), name)[1] == []
    # one f32 rounding away (the printed f32 value of the constant) still matches
    (cand,) = _candidates(_function(name, Perturbed(index, 1 + 6e-8)), name)[1]
    assert cand.static_id == catalog_entry(name).fused_id


def test_catalog_constants_are_the_documented_ones() -> None:
    assert [c.value for c in catalog_entry("gelu").pattern.constants()] == [0.044715, math.sqrt(2 / math.pi), 0.5, 1.0]
    assert [c.value for c in catalog_entry("layernorm").pattern.constants()] == [1e-5]
    assert [r.name for r in CATALOG_RULES] == ["bias_gelu", "gelu", "softmax", "layernorm", "bias_relu"]


def test_layernorm_with_another_eps_is_not_the_catalog_layernorm() -> None:
    """Regression: the hand-written matcher accepted any eps, so a layernorm with eps 0.5 fused under
    the catalog id 2 and its kernel (eps 0.5) was bound as Static(fused.layernorm) for every layernorm."""
    text = recipe_function_text("layernorm", "f32", SHAPE).replace("dense<1.0e-05>", "dense<0.5>")
    result = optimize_graph(parse_module(text), OptimizationContext.gate_all(recipes=RecipeRegistry()))
    assert "layernorm" not in {d.rule for d in result.decisions}
    (region,) = [r for r in result.module.walk() if isinstance(r, RegionOp)]  # still fused, as synthesized ops
    assert region.id != 2 and region.region_name != "layernorm"
    assert [op.name for op in next(iter(result.module.ops)).body.blocks[0].ops] == ["fused.region", "func.return"]


def _swish(b, x):
    return b.mul(x, b.sigmoid(x))


SWISH = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<16xf32>) -> (tensor<4x8xf32>, tensor<16xf32>) {
  %s = prim.sigmoid %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %y = prim.mul %s, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = prim.sigmoid %b : tensor<16xf32> -> tensor<16xf32>
  %z = prim.mul %b, %t : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  func.return %y, %z : tensor<4x8xf32>, tensor<16xf32>
}
"""


def test_a_pattern_written_outside_the_package_is_found() -> None:
    pattern = Pattern.trace(_swish, [X], ["x"])
    rule = pattern_rule("swish", 90, pattern)
    module = parse_module(SWISH)
    ctx = OptimizationContext.with_ids({90}, recipes=RecipeRegistry())
    result = optimize_graph(module, ctx, rules=[rule, *SYNTHESIZED_RULES])
    regions = [op for op in result.module.walk() if isinstance(op, RegionOp)]
    assert [(r.region_name, r.id) for r in regions] == [("swish", 90), ("swish", 90)]  # commuted and not
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(16).astype(np.float32)
    got, want = interpret(result.module, a, b), (a / (1 + np.exp(-a)), b / (1 + np.exp(-b)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    # the same pattern is its recipe too
    builder = PrimTextBuilder("f32")
    out = pattern.evaluate(builder, TextValue("%arg0", (4, 8)))
    assert builder.lines == ["%v1 = prim.sigmoid %arg0 : tensor<4x8xf32> -> tensor<4x8xf32>",
                             "%v2 = prim.mul %arg0, %v1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>"]
    assert out == TextValue("%v2", (4, 8))


def test_shared_sub_value_must_be_one_value() -> None:
    """softmax's exp feeds both the sum and the division: two different exps are not softmax."""
    text = recipe_function_text("softmax", "f32", SHAPE)
    two_exps = text.replace("%v4 = prim.reduce_sum %v3", "%v9 = prim.exp %v2 : tensor<4x8xf32> -> tensor<4x8xf32>\n"
                            "    %v4 = prim.reduce_sum %v9")
    assert two_exps != text
    assert _candidates(two_exps, "softmax")[1] == []


def test_row_operand_must_be_as_long_as_the_last_axis() -> None:
    text = """
    func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %x = prim.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %y = prim.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
      func.return %y : tensor<4x8xf32>
    }
    """
    assert _candidates(text, "bias_relu")[1] == []


def test_commutativity_comes_from_the_op() -> None:
    module = parse_module("""
    func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xi1> {
      %s = prim.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %d = prim.sub %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %e = prim.compare eq %s, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
      %l = prim.compare lt %s, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
      %m = prim.max %s, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      func.return %l : tensor<4xi1>
    }
    """)
    ops = {op.name + getattr(getattr(op, "predicate", None), "data", ""): op
           for op in next(iter(module.ops)).body.blocks[0].ops}
    assert [is_commutative(ops[k]) for k in ("prim.add", "prim.sub", "prim.compareeq", "prim.comparelt",
                                             "prim.max")] == [True, False, True, False, True]
    assert isinstance(ops["prim.compareeq"], CompareOp)


def test_gelu_tanh_is_one_function_over_any_builder() -> None:
    x = np.linspace(-4, 4, 33, dtype=np.float64)
    numpy = SimpleNamespace(add=np.add, mul=np.multiply, tanh=np.tanh, constant=float)
    want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(gelu_tanh(numpy, x), want, rtol=1e-15, atol=1e-15)
    traced = Pattern.trace(gelu_tanh, [X])
    assert [n.kind for n in traced.ops()] == ["mul", "mul", "mul", "add", "mul", "tanh", "mul", "add", "mul"]
    assert [n.kind for n in catalog_entry("gelu").pattern.ops()] == [n.kind for n in traced.ops()]


def test_pattern_authoring_errors_are_clear() -> None:
    b = PatternBuilder()
    with pytest.raises(PatternError, match="pattern input role 'col' is not one of x, row"):
        Pattern.trace(_swish, ["col"])
    with pytest.raises(PatternError, match="a pattern's first input must have role X"):
        Pattern.trace(lambda b, bias, x: b.add(x, bias), [ROW, X])
    with pytest.raises(PatternError, match="pattern input 'stray' is used but not declared"):
        Pattern.trace(lambda b, x: b.add(x, Input("stray")), [X])
    with pytest.raises(PatternError, match="a pattern's root must be a prim op, got Input"):
        Pattern.trace(lambda b, x: x, [X])
    with pytest.raises(PatternError, match="pattern op 'reduce_sum': unknown property 'axis'; a pattern may state "
                                           "axes, keepdims"):
        b.reduce_sum(Input("x"), axis=-1)
    with pytest.raises(PatternError, match=r"pattern op 'reduce_sum': keepdims=1 is not allowed"):
        b.reduce_sum(Input("x"), axes=LAST, keepdims=1)
    with pytest.raises(PatternError, match="pattern op 'mul': operand 0.5 is not a pattern value; use b.constant"):
        b.mul(Input("x"), 0.5)
    with pytest.raises(PatternError, match="pattern constant must be a finite number, got nan"):
        b.constant(float("nan"))
    with pytest.raises(PatternError, match="pattern takes 1 inputs, got 2"):
        catalog_entry("gelu").pattern.evaluate(PrimTextBuilder("f32"), TextValue("%a", (4,)), TextValue("%b", (4,)))
    assert isinstance(PatternError("x"), ValueError)
