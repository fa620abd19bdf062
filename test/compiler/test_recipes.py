"""The recipe registry (ids, structural dedup, validation) and the static catalog."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from fusebind.compiler import (
    CATALOG,
    RUNTIME_FUSED_BASE,
    CatalogError,
    MalformedRecipeError,
    NotPrimitiveOnlyError,
    RecipeIdSpaceExhausted,
    RecipeParseError,
    RecipeRegistry,
    UnknownRecipeError,
    as_region,
    canonical_recipe,
    catalog_entry,
    recipe_function_text,
    recipe_region_text,
    static_kernel_op,
)
from fusebind.dialect import interpret, parse_module


def region_text(body: str = "prim.exp", name: str = "e", names: tuple[str, str, str] = ("a", "x", "y"), extra: str = "", cost: str = "") -> str:
    a, x, y = names
    return f"""
%r = fused.region @{name} {extra}(%{a}) : (tensor<4xf32>) -> tensor<4xf32> {cost}{{
^bb0(%{x}: tensor<4xf32>):
  %{y} = {body} %{x} : tensor<4xf32> -> tensor<4xf32>
  fused.yield %{y} : tensor<4xf32>
}}"""


def module_text(body: str = "prim.exp", name: str = "e") -> str:
    return f"""
func.func @f(%in: tensor<4xf32>) -> tensor<4xf32> {{
  %r = fused.region @{name} (%in) : (tensor<4xf32>) -> tensor<4xf32> {{
  ^bb0(%v: tensor<4xf32>):
    %w = {body} %v : tensor<4xf32> -> tensor<4xf32>
    fused.yield %w : tensor<4xf32>
  }}
  func.return %r : tensor<4xf32>
}}"""


def test_equal_math_shares_an_id_whatever_the_names_and_first_name_wins() -> None:
    reg = RecipeRegistry()
    first = reg.register("first", region_text())
    assert first == RUNTIME_FUSED_BASE
    same = [
        region_text(names=("p", "q", "s"), name="renamed"),
        region_text(extra="id 99 ", cost="cost #fused.cost<flops = 4, bytes = 32, ns = 1> "),
        module_text(),
        parse_module(module_text()).body.block.first_op.body.block.first_op,  # the op itself
    ]
    for text_or_op in same:
        assert reg.register("later", text_or_op) == first
    assert reg.recipe_of(first).name == "first"
    assert reg.recipe_of(first).region.id == first  # stamped with its id and first name
    assert reg.recipe_of(first).region.region_name == "first"
    assert reg.register("log", region_text("prim.log")) == first + 1
    assert len(reg) == 2 and reg.ids() == (first, first + 1)


def test_recipe_of_returns_a_copy_mutations_do_not_reach_the_registry() -> None:
    from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64

    reg = RecipeRegistry()
    fid = reg.register("exp", region_text())
    got = reg.recipe_of(fid).region
    before = canonical_recipe(got)
    # A careless caller re-labels the region and rewrites its math in place.
    got.properties["name"] = StringAttr("hijacked")
    got.properties["fused_id"] = IntegerAttr(7, i64)
    body = got.body.blocks[0]
    exp = body.first_op
    neg = parse_module(module_text("prim.neg")).body.block.first_op.body.block.first_op.body.blocks[0].first_op
    neg.detach()
    body.insert_op_before(neg, exp)
    neg.operands = [exp.operands[0]]
    exp.results[0].replace_all_uses_with(neg.results[0])
    body.erase_op(exp)
    assert canonical_recipe(got) != before  # the copy did change
    again = reg.recipe_of(fid).region
    assert again is not got
    assert (again.id, again.region_name) == (fid, "exp")
    assert canonical_recipe(again) == before == reg.recipe_of(fid).canonical
    assert [op.name for op in again.body.blocks[0].ops] == ["prim.exp", "fused.yield"]
    assert reg.register("other", region_text()) == fid  # dedup still sees the original math


def test_canonical_recipe_ignores_the_inplace_marker() -> None:
    from xdsl.dialects.builtin import DenseArrayBase, i64

    plain = as_region(region_text())
    marked = as_region(region_text())
    marked.attributes["fused.inplace"] = DenseArrayBase.from_list(i64, [0, 0])
    assert canonical_recipe(marked) == canonical_recipe(plain)


def test_canonical_recipe_ignores_labels_but_not_math() -> None:
    assert canonical_recipe(region_text()) == canonical_recipe(region_text(names=("u", "v", "w"), name="z"))
    assert canonical_recipe(region_text()) != canonical_recipe(region_text("prim.tanh"))
    assert "fused_id" not in canonical_recipe(region_text(extra="id 5 "))
    assert '"prim.exp"' in canonical_recipe(region_text())  # generic form


def test_not_primitive_only_is_a_typed_error_naming_the_op() -> None:
    text = """
%r = fused.region @bad (%a) : (tensor<4xf32>) -> tensor<4xf32> {
^bb0(%x: tensor<4xf32>):
  %c = arith.constant 1.0 : f32
  fused.yield %x : tensor<4xf32>
}"""
    with pytest.raises(NotPrimitiveOnlyError, match=r"body holds arith.constant, but a recipe may hold only prim"):
        RecipeRegistry().register("bad", text)


def test_malformed_region_is_a_typed_error_and_allocates_nothing() -> None:
    text = """
%r = fused.region @bad (%a) : (tensor<4xf32>) -> tensor<8xf32> {
^bb0(%x: tensor<4xf32>):
  %y = prim.exp %x : tensor<4xf32> -> tensor<4xf32>
  fused.yield %y : tensor<4xf32>
}"""
    reg = RecipeRegistry()
    with pytest.raises(MalformedRecipeError, match=r"fused.region does not verify: .*yield value #0 has type"):
        reg.register("bad", text)
    assert len(reg) == 0
    assert reg.register("good", region_text()) == RUNTIME_FUSED_BASE


def test_text_must_hold_exactly_one_region() -> None:
    two = module_text() + module_text("prim.log").replace("@f", "@g")
    with pytest.raises(RecipeParseError, match="exactly one fused.region, found 2"):
        as_region(two)
    with pytest.raises(RecipeParseError, match="does not parse"):
        as_region("%r = fused.region @e (")
    with pytest.raises(TypeError, match="expected a fused.region op or its MLIR text"):
        as_region(42)


def test_canonical_recipe_raises_only_recipe_errors() -> None:
    # the runtime and lowering catch exactly RecipeError around canonical_recipe (not Exception)
    from fusebind.compiler.recipes import NotARegionError, RecipeError, canonical_recipe

    for bad, cls in ((42, NotARegionError), ("%r = fused.region @e (", RecipeParseError)):
        with pytest.raises(RecipeError) as info:
            canonical_recipe(bad)
        assert type(info.value) is cls
    assert issubclass(NotARegionError, TypeError) and issubclass(NotARegionError, RecipeError)


@pytest.mark.parametrize("text, message", [
    ('"', 'recipe text does not parse: 1:1: unterminated string literal'),  # the very first token
    ("%r = fused.region @e (" + "(" * 5000, "recipe text does not parse: 1:23: operand expected"),
    (region_text().replace("@e ", "@e id 18446744073709551616 "),
     "recipe text does not parse: 6:2: Integer value 18446744073709551616 is out of range"),  # xDSL verifies on parse
    ("prim.constant dense<1.0> : tensor<100000000000x100000000000xf32>",
     "recipe text does not parse: 1:"),  # an element count beyond int64 (OverflowError inside xDSL)
    (region_text().replace("@e", '@"e' + "x" * 200), "recipe text does not parse: 2:20: unterminated string literal"),
    ("prim.constant dense<1.0> : tensor<100000x100000xf32>", "recipe text does not parse: 1:20: dense attribute of "),
])
def test_every_parse_failure_of_recipe_text_is_a_recipe_parse_error(text: str, message: str) -> None:
    with pytest.raises(RecipeParseError) as info:
        as_region(text)
    assert str(info.value).startswith(message), str(info.value)


def test_region_text_still_parses_through_the_guarded_parser() -> None:
    region = as_region(region_text(name="kept"))
    assert region.region_name == "kept" and [op.name for op in region.body.blocks[0].ops] == ["prim.exp", "fused.yield"]


def test_id_space_exhaustion_is_typed_and_existing_recipes_still_resolve() -> None:
    reg = RecipeRegistry(capacity=2)
    a = reg.register("exp", region_text("prim.exp"))
    b = reg.register("log", region_text("prim.log"))
    with pytest.raises(RecipeIdSpaceExhausted, match="all 2 runtime FusedOpIds from 65536 are taken; cannot register recipe 'tanh'"):
        reg.register("tanh", region_text("prim.tanh"))
    assert reg.register("exp again", region_text("prim.exp")) == a
    assert (a, b) == (RUNTIME_FUSED_BASE, RUNTIME_FUSED_BASE + 1)
    with pytest.raises(ValueError, match="runtime ids start at RUNTIME_FUSED_BASE"):
        RecipeRegistry(base=5)


def test_recipe_of_unknown_id() -> None:
    with pytest.raises(UnknownRecipeError, match="no recipe is registered under FusedOpId 70000"):
        RecipeRegistry().recipe_of(70000)


def test_concurrent_registration_gives_one_id_per_recipe() -> None:
    reg = RecipeRegistry()
    bodies = ["prim.exp", "prim.log", "prim.tanh", "prim.sqrt"]
    results: list[tuple[str, int]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        barrier.wait()
        for j in range(10):
            body = bodies[(i + j) % len(bodies)]
            fid = reg.register(f"t{i}", region_text(body, names=(f"a{i}", f"x{j}", "y")))
            with lock:
                results.append((body, fid))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ids_by_body: dict[str, set[int]] = {}
    for body, fid in results:
        ids_by_body.setdefault(body, set()).add(fid)
    assert all(len(ids) == 1 for ids in ids_by_body.values())
    assert sorted(i for ids in ids_by_body.values() for i in ids) == list(range(RUNTIME_FUSED_BASE, RUNTIME_FUSED_BASE + 4))


# ----------------------------------------------------------------------------- catalog


def test_catalog_ids_are_static_and_keyed_as_fused_ops() -> None:
    assert [(e.fused_id, e.name) for e in CATALOG][:5] == [
        (1, "softmax"), (2, "layernorm"), (3, "gelu"), (4, "bias_relu"), (5, "bias_gelu"),
    ]
    assert all(0 < e.fused_id < RUNTIME_FUSED_BASE for e in CATALOG)
    assert static_kernel_op(1) == "fused.softmax"
    assert static_kernel_op(RUNTIME_FUSED_BASE) is None and static_kernel_op(999) is None
    with pytest.raises(CatalogError, match="no built-in fused op 'swish'"):
        catalog_entry("swish")
    with pytest.raises(CatalogError, match="defined for f32 and f64"):
        recipe_function_text("gelu", "i32", (4,))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_catalog_recipes_compute_their_math(elem: str) -> None:
    rng = np.random.default_rng(0)
    dt = np.float32 if elem == "f32" else np.float64
    x = rng.standard_normal((3, 8)).astype(dt)
    g = rng.standard_normal(8).astype(dt)
    b = rng.standard_normal(8).astype(dt)
    mean = x.mean(1, keepdims=True)
    var = ((x - mean) ** 2).mean(1, keepdims=True)
    expected = {
        "softmax": ((x,), np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)),
        "layernorm": ((x, g, b), (x - mean) / np.sqrt(var + 1e-5) * g + b),
        "gelu": ((x,), _gelu(x)),
        "bias_relu": ((x, b), np.maximum(x + b, 0)),
        "bias_gelu": ((x, b), _gelu(x + b)),
    }
    tol = 1e-5 if elem == "f32" else 1e-12
    for name, (args, want) in expected.items():
        got = interpret(parse_module(recipe_function_text(name, elem, (3, 8))), *args)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)
        region = as_region(recipe_region_text(name, elem, (3, 8)))
        assert region.id == catalog_entry(name).fused_id and region.region_name == name
        assert canonical_recipe(region) == canonical_recipe(recipe_region_text(name, elem, (3, 8)))
