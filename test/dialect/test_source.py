"""source.py: the guarded parse entry (string-literal pre-scan, dense size
cap, error mapping) and lazy op locations."""

from __future__ import annotations

import io

import pytest

from fusebind.dialect import IRParseError, IRVerifyError, make_context, parse_module, print_module
from fusebind.dialect.source import (
    MAX_DENSE_ELEMENTS,
    LineIndex,
    check_string_literals,
    line_col,
    parse_text,
    parse_with_locations,
)

FUNC = 'func.func @{name}() {{\n  func.return\n}}\n'


# --------------------------------------------------------------------------- string literals


@pytest.mark.parametrize("text, line, col", [
    ('func.func @"' + "a" * 4000, 1, 12),
    ('"', 1, 1),
    ('// a "comment" line\nfunc.func @"abc\n}', 2, 12),
    ('%x = "a\\"b" "open \\\\', 1, 13),
    ('"closed" "open\v"', 1, 10),  # \v ends a literal line in xDSL's lexer
])
def test_an_unterminated_string_is_refused_at_its_opening_quote(text: str, line: int, col: int) -> None:
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    assert info.value.message.startswith("unterminated string literal")
    assert (info.value.line, info.value.column) == (line, col)


def test_a_bad_escape_is_refused_at_its_backslash() -> None:
    with pytest.raises(IRParseError) as info:
        parse_module('func.func @"ab\\q' + "c" * 4000 + '"() {\n  func.return\n}\n')
    assert info.value.message.startswith("invalid escape '\\q' in string literal")
    assert (info.value.line, info.value.column) == (1, 15)


@pytest.mark.parametrize("name", ['"my kernel"', '"a\\"b"', '"tab\\there"', '"\\0A\\\\"', '"// not a comment"', '""'])
def test_valid_string_literals_pass_the_scan_and_round_trip(name: str) -> None:
    check_string_literals(name)
    module = parse_module(FUNC.format(name=name))
    assert parse_module(print_module(module)) is not None


def test_quotes_inside_comments_are_not_literals() -> None:
    module = parse_module('// it"s "\n' + FUNC.format(name="f") + '// "trailing')
    assert "func.func @f" in print_module(module)


def test_every_door_refuses_the_open_literal() -> None:
    from fusebind.tools.opt import run_opt
    from fusebind.compiler.recipes import RecipeParseError, prepare_recipe

    text = 'func.func @"' + "a" * 400
    out, err = io.StringIO(), io.StringIO()
    assert run_opt(["-"], io.StringIO(text), out, err) == 1
    assert "1:12: error: unterminated string literal" in err.getvalue()
    with pytest.raises(RecipeParseError, match="unterminated string literal"):
        prepare_recipe("r", text)


# --------------------------------------------------------------------------- locations


def test_line_index_agrees_with_a_direct_scan() -> None:
    text = "ab\n\ncdef\nx\n\n"
    index = LineIndex(text)
    for pos in range(len(text) + 1):
        assert index.line_col(pos) == line_col(text, pos)


def test_verifier_errors_keep_their_op_locations() -> None:
    text = ("func.func @f(%a: tensor<4xf32>) {\n  %0 = prim.exp %a : tensor<4xf32> -> tensor<4xf32>\n"
            "    %1 = prim.add %a, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf64>\n  func.return\n}\n")
    with pytest.raises(IRVerifyError) as info:
        parse_module(text)
    assert (info.value.line, info.value.column) == (3, 5)


def test_locations_are_offsets_until_asked() -> None:
    lines = [f"  %v{i} = prim.exp %a : tensor<4xf32> -> tensor<4xf32>\n" for i in range(3)]
    text = "func.func @f(%a: tensor<4xf32>) {\n" + "".join(lines) + "  func.return\n}\n"
    module, source_map = parse_with_locations(make_context(), text)
    exps = [op for op in module.walk() if op.name == "prim.exp"]
    assert [source_map.offsets[id(op)] for op in exps] == [text.index(f"%v{i}") for i in range(3)]
    assert [source_map.location(op) for op in exps] == [(2, 3), (3, 3), (4, 3)]


# --------------------------------------------------------------------------- dense size cap


def _constant(ty: str, generic: bool = False) -> str:
    if generic:
        op = f'"prim.constant"() <{{value = dense<"0x0000803F"> : {ty}}}> : () -> {ty}'
    else:
        op = f"prim.constant dense<1.0> : {ty}"
    return f"func.func @f() -> {ty} {{\n  %c = {op}\n  func.return %c : {ty}\n}}\n"


@pytest.mark.parametrize("generic", [False, True])
def test_a_dense_attribute_above_the_cap_is_refused_with_its_location(generic: bool) -> None:
    ty = f"tensor<{MAX_DENSE_ELEMENTS + 1}xf32>"
    with pytest.raises(IRParseError) as info:
        parse_module(_constant(ty, generic))
    assert info.value.message.startswith(f"dense attribute of type {ty} has {MAX_DENSE_ELEMENTS + 1} elements, "
                                         f"more than the {MAX_DENSE_ELEMENTS} fusebind parses")
    assert info.value.line == 2


def test_the_cap_also_guards_dense_attributes_outside_prim_constant() -> None:
    text = ('func.func @f() {\n  %c = "arith.constant"() <{value = dense<0> : tensor<65536x65536xi32>}> : '
            "() -> tensor<65536x65536xi32>\n  func.return\n}\n")
    with pytest.raises(IRParseError, match="has 4294967296 elements"):
        parse_module(text)


def test_a_splat_below_the_cap_still_parses() -> None:
    module = parse_module(_constant("tensor<64x64xf32>"))
    assert "dense<1.000000e+00> : tensor<64x64xf32>" in print_module(module)


# --------------------------------------------------------------------------- error mapping


def test_parse_text_maps_any_failure_inside_the_body_to_a_located_parse_error() -> None:
    def body(parser: object) -> None:
        raise OverflowError("too big")

    with pytest.raises(IRParseError) as info:
        parse_text(make_context(), "x", "<t>", body)
    assert info.value.message == "cannot parse: OverflowError: too big" and info.value.line == 1
