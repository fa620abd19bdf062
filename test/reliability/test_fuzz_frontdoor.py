"""Fuzzing the front door: random, mutated, truncated and generated MLIR text
into `parse_module` and `fusebind-opt`.

The contract (`check_front_door` in conftest.py): every input ends in success
(and then print -> parse -> print is stable, custom and generic) or in a
`FusebindIRError` subclass; the driver exits 0, or 1 with an `error:`
diagnostic and never a traceback. The regression corpus (corpus/) is replayed
on every run; the recipe door (`prepare_recipe` on text) is fuzzed too.
Phase 2 adds `fb.compile` as one more door in `check_front_door` (conftest.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import LONG, check_front_door, corpus_files, opt_run, scaled, seed_texts
from index_maps import available_kinds, fuzz_tokens, shape_preserving_line

SEEDS = seed_texts()


def _generic_forms(texts: list[str]) -> list[str]:
    from fusebind.dialect import FusebindIRError, parse_module, print_module

    out = []
    for t in texts:
        try:
            out.append(print_module(parse_module(t), generic=True))
        except FusebindIRError:
            continue
    return out


ALL_SEEDS = SEEDS + _generic_forms(SEEDS)

TOKENS = [
    "%a", "%0", "%x", "@f", "@\"../../etc/x\"", "func.func", "func.return", "fused.region", "fused.yield",
    "\"fused.region\"", "\"prim.add\"", "prim.add", "prim.exp", "prim.reduce_sum", "prim.matmul", "prim.cast",
    "prim.constant", "prim.broadcast_to", "prim.compare", "\"llvm.call\"", "llvm.call @system", "arith.addi",
    "^bb0", "^bb1", "(", ")", "{", "}", "<", ">", "[", "]", ":", ",", "->", "=", "<{", "}>", "tensor<",
    "tensor<?x", "x", "xf32>", "xf64>", "xi1>", "xi32>", "xi64>", "f16", "bf16", "index", "?", "0x", "dense<",
    "dense<[1.0, 2.0]>", "1.0", "-1", "0", "-0.0", "nan", "inf", "0x7FC00000", "1e400", "99999999999999999999",
    "9223372036854775807", "-9223372036854775808", "#fused.cost<flops = 1, bytes = 2, ns = 3>", "#fused.cost<",
    "id", "id -1", "id 18446744073709551616", "axes = [", "axes = [1, 1]", "keepdims", "\"", "\\", "\\00",
    "\n", " ", "\t", "// c", "/*", "\x00", "\u00e9", "\ud7ff", "#", "!", "loc(", "attributes", "builtin.module",
    "\"builtin.unrealized_conversion_cast\"", "{axes = [-1]}", "<{fused_id = 3 : i64, name = \"g\"}>",
] + fuzz_tokens()


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A seed with 1..6 edits: delete, insert a token, replace a char, duplicate, swap lines, truncate."""
    text = draw(st.sampled_from(ALL_SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        n = len(text)
        i = draw(st.integers(0, n))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "duplicate", "swap", "truncate"]))
        if kind == "delete":
            j = draw(st.integers(i, min(n, i + 40)))
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif kind == "replace" and n:
            c = draw(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "Cc")))
            text = text[:i] + c + text[i + 1:]
        elif kind == "duplicate":
            j = draw(st.integers(i, min(n, i + 200)))
            text = text[:j] + text[i:j] + text[j:]
        elif kind == "swap":
            lines = text.split("\n")
            if len(lines) > 1:
                a = draw(st.integers(0, len(lines) - 1))
                b = draw(st.integers(0, len(lines) - 1))
                lines[a], lines[b] = lines[b], lines[a]
                text = "\n".join(lines)
        else:
            text = text[:i]
    return text


token_soup = st.lists(st.sampled_from(TOKENS), max_size=60).map(" ".join)

DTYPES = ["f32", "f64", "i32", "i64", "i1"]
FLOAT_UNARY = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf"]
ANY_UNARY = ["neg", "abs", "relu"]
BINARY = ["add", "sub", "mul", "div", "max", "min"]


@st.composite
def generated(draw: st.DrawFn) -> str:
    """A structurally plausible module: an elementwise chain with index maps (the registry's
    INDEX_MAP ops, in shape-preserving forms, for static shapes), maybe inside a fused.region."""
    elem = draw(st.sampled_from(DTYPES))
    dims = draw(st.lists(st.sampled_from(["1", "3", "8", "?", "0"]), max_size=3))
    ty = "tensor<" + "".join(d + "x" for d in dims) + elem + ">"
    body: list[str] = []
    values = ["%x"]
    for k in range(draw(st.integers(1, 6))):
        static = "?" not in dims
        pool = ANY_UNARY + (FLOAT_UNARY if elem in ("f32", "f64") else []) + BINARY + \
            ([f"map:{m}" for m in available_kinds()] if static else [])
        op = draw(st.sampled_from(pool))
        a = draw(st.sampled_from(values))
        lines = shape_preserving_line(op[4:], f"%v{k}", a, [int(d) for d in dims], elem) \
            if op.startswith("map:") else None
        if op.startswith("map:") and lines is None:
            continue
        if lines is not None:
            body.extend(lines)
        elif op in BINARY:
            b = draw(st.sampled_from(values))
            body.append(f"%v{k} = prim.{op} {a}, {b} : ({ty}, {ty}) -> {ty}")
        else:
            body.append(f"%v{k} = prim.{op} {a} : {ty} -> {ty}")
        values.append(f"%v{k}")
    last = values[-1]
    if draw(st.booleans()):
        inner = "\n    ".join(body)
        fid = draw(st.sampled_from(["", " id 0", " id 7", " id 65536"]))
        text = (f"func.func @f(%a: {ty}) -> {ty} {{\n  %r = fused.region @g{fid} (%a) : ({ty}) -> {ty} {{\n"
                f"  ^bb0(%x: {ty}):\n    {inner}\n    fused.yield {last} : {ty}\n  }}\n  func.return %r : {ty}\n}}\n")
    else:
        inner = "\n  ".join(body)
        text = f"func.func @f(%x: {ty}) -> {ty} {{\n  {inner}\n  func.return {last} : {ty}\n}}\n"
    return text


def fuzz_one(text: str) -> None:
    """check_front_door on one generated input."""
    check_front_door(text)


FUZZ = settings(max_examples=scaled(150, 3000), deadline=None, derandomize=not LONG,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


@FUZZ
@given(mutated())
def test_mutated_seeds_end_cleanly(text: str) -> None:
    fuzz_one(text)


@FUZZ
@given(token_soup)
def test_token_soup_ends_cleanly(text: str) -> None:
    fuzz_one(text)


@FUZZ
@given(st.text(max_size=300))
def test_arbitrary_unicode_ends_cleanly(text: str) -> None:
    fuzz_one(text)


@FUZZ
@given(generated())
def test_generated_modules_parse_or_fail_cleanly(text: str) -> None:
    fuzz_one(text)


@FUZZ
@given(st.sampled_from(ALL_SEEDS), st.data())
def test_every_truncation_point_ends_cleanly(text: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(text)))
    fuzz_one(text[:cut])


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_regression_corpus_replays_cleanly(path: Path) -> None:
    data = path.read_bytes()
    check_front_door(data.decode("utf-8", errors="replace"))


def test_seed_corpus_is_not_empty() -> None:
    from fusebind.dialect import FusebindIRError, parse_module

    ok = 0
    for t in SEEDS:
        try:
            parse_module(t)
            ok += 1
        except FusebindIRError:
            pass
    assert len(SEEDS) > 20 and ok > 10, "the fuzzer needs valid seeds from examples/ and test/lit/"


# --------------------------------------------------------------------------- security of the parser


@pytest.mark.parametrize("op", [
    '"llvm.call"() {callee = @system} : () -> ()',
    'llvm.call @system() : () -> ()',
    '"llvm.inline_asm"() {asm_string = "syscall", constraints = ""} : () -> ()',
    '"memref.alloc"() : () -> memref<4xf32>',
    '"test.anything"() : () -> ()',
])
def test_parser_rejects_ops_outside_our_dialects(op: str) -> None:
    from fusebind.dialect import IRParseError, parse_module

    text = f"func.func @f() {{\n  {op}\n  func.return\n}}\n"
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    assert "is not registered" in info.value.message and info.value.line == 2
    code, out, err = opt_run(["-"], text)
    assert code == 1 and out == "" and "<stdin>:2:" in err and "is not registered" in err


def test_func_call_to_an_undefined_symbol_is_refused() -> None:
    from fusebind.dialect import IRVerifyError, parse_module

    text = 'func.func @f() {\n  "func.call"() {callee = @system} : () -> ()\n  func.return\n}\n'
    with pytest.raises(IRVerifyError, match="@system' could not be found in symbol table") as info:
        parse_module(text)
    assert info.value.line == 2


@pytest.mark.parametrize("op", [
    "%y = func.call @system(%x) : (tensor<4xf32>) -> tensor<4xf32>",
    "%y = arith.addf %x, %x : tensor<4xf32>",
])
def test_a_region_body_holds_only_prim_ops(op: str) -> None:
    """A region is the only thing lowering compiles: nothing but prim ops may reach it,
    so user text can never make a kernel call `system` or anything else."""
    from fusebind.dialect import IRVerifyError, parse_module

    text = f"""func.func private @system(tensor<4xf32>) -> tensor<4xf32>
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{
  %r = fused.region @k (%a) : (tensor<4xf32>) -> tensor<4xf32> {{
  ^bb0(%x: tensor<4xf32>):
    {op}
    fused.yield %y : tensor<4xf32>
  }}
  func.return %r : tensor<4xf32>
}}
"""
    name = op.split("=")[1].split()[0]
    with pytest.raises(IRVerifyError, match=f"fused.region: body holds '{name}'; only prim ops") as info:
        parse_module(text)
    assert info.value.line == 3


def test_opt_output_goes_only_where_dash_o_says(tmp_path: Path) -> None:
    """The input text cannot redirect output: -o is the only path written, and
    a path whose directory does not exist is a diagnostic, not a traceback."""
    text = ('// RUN: fusebind-opt %s -o /etc/passwd\n'
            'func.func @"../../etc/x"(%a: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %a : tensor<4xf32>\n}\n')
    before = set(tmp_path.iterdir())
    out_file = tmp_path / "out.mlir"
    code, out, err = opt_run(["-", "-o", str(out_file)], text)
    assert code == 0 and out == "" and err == ""
    assert set(tmp_path.iterdir()) - before == {out_file}
    assert '@"../../etc/x"' in out_file.read_text()
    code, _, err = opt_run(["-", "-o", str(tmp_path / "missing" / "out.mlir")], text)
    assert code == 1 and "cannot write" in err and "Traceback" not in err
    assert not (tmp_path / "missing").exists()


# --------------------------------------------------------------------------- real subprocesses


SUBPROCESS_INPUTS = {
    "valid": SEEDS[0] if SEEDS else "",
    "truncated": "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %b = prim.exp %a : tensor<4x",
    "llvm-op": 'func.func @f() {\n  "llvm.call"() {callee = @system} : () -> ()\n  func.return\n}\n',
    "nul-bytes": "func.func @f() {\x00\x00}",
    "deep-nesting": "func.func @f() {" * 3000,
    "huge-dim": ("func.func @f() -> tensor<100000000000x100000000000xf32> {\n  %c = prim.constant dense<1.0> : "
                 "tensor<100000000000x100000000000xf32>\n  func.return %c : tensor<100000000000x100000000000xf32>\n}\n"),
}


@pytest.mark.parametrize("name", sorted(SUBPROCESS_INPUTS))
def test_real_fusebind_opt_process_never_prints_a_traceback(name: str) -> None:
    text = SUBPROCESS_INPUTS[name]
    exe = Path(sys.executable).with_name("fusebind-opt")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "fusebind.tools.opt"]
    proc = subprocess.run(cmd, input=text.encode("utf-8", "surrogatepass"), capture_output=True, timeout=120)
    err = proc.stderr.decode(errors="replace")
    assert "Traceback (most recent call last)" not in err and "internal error" not in err, err
    if name == "valid":
        assert proc.returncode == 0, err
    else:
        assert proc.returncode == 1 and "error:" in err, err


# --------------------------------------------------------------------------- found bugs


def test_an_unterminated_string_literal_fails_fast() -> None:
    script = ("from fusebind.dialect import FusebindIRError, parse_module\n"
              "try:\n    parse_module('func.func @\"' + 'a' * 40)\nexcept FusebindIRError as err:\n    print(err)\n")
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=8)
    except subprocess.TimeoutExpired:
        pytest.fail("watchdog: parse_module of a 52-char input did not finish in 8 s")
    assert "string literal" in proc.stdout


def test_the_inputs_the_fuzzers_once_steered_around_are_parse_errors() -> None:
    for text in ('"\x02""' + "\x00" * 19 + "!!", 'func.func @"' + "a" * 400, 'func.func @"a\\q' + "a" * 400 + '"'):
        assert check_front_door(text) == "IRParseError"


class _CountingText(str):
    """A str that counts how many characters `count` and `rfind` scan (to prove
    location bookkeeping is linear, without timing anything)."""

    scanned = 0

    def count(self, sub: str, start: int | None = None, end: int | None = None) -> int:  # type: ignore[override]
        _CountingText.scanned += (end if end is not None else len(self)) - (start or 0)
        return str.count(self, sub, start, end)  # type: ignore[arg-type]

    def rfind(self, sub: str, start: int | None = None, end: int | None = None) -> int:  # type: ignore[override]
        _CountingText.scanned += (end if end is not None else len(self)) - (start or 0)
        return str.rfind(self, sub, start, end)  # type: ignore[arg-type]


def chain_text(n: int) -> str:
    lines = ["func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {"]
    prev = "%a"
    for i in range(n):
        lines.append(f"  %v{i} = prim.exp {prev} : tensor<4xf32> -> tensor<4xf32>")
        prev = f"%v{i}"
    lines.append(f"  func.return {prev} : tensor<4xf32>\n}}")
    return "\n".join(lines)


def test_op_locations_cost_linear_work_in_the_text_size() -> None:
    from fusebind.dialect import make_context
    from fusebind.dialect.source import parse_with_locations

    text = _CountingText(chain_text(2000))
    _CountingText.scanned = 0
    parse_with_locations(make_context(), text)
    assert _CountingText.scanned <= 4 * len(text), (
        f"locating {2000} ops scanned {_CountingText.scanned} chars of a {len(text)}-char text")



# --------------------------------------------------------------------------- coverage-guided (atheris)


def test_atheris_harness_runs_bounded_without_crashes(tmp_path: Path) -> None:
    pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris)")
    seconds = scaled(5, 600)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, seed in enumerate(SEEDS[:20]):
        (corpus / f"seed{i}.mlir").write_text(seed)
    harness = Path(__file__).resolve().parents[2] / "fuzz" / "fuzz_parser.py"
    proc = subprocess.run([sys.executable, str(harness), f"-max_total_time={seconds}", "-timeout=60",
                           "-rss_limit_mb=4096", "-seed=12345", str(corpus)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=seconds + 300)
    crashes = sorted(p.name for p in tmp_path.glob("crash-*")) + sorted(p.name for p in tmp_path.glob("timeout-*"))
    assert proc.returncode == 0 and not crashes, (crashes, proc.stderr[-3000:])
    assert "Done" in proc.stderr and " runs in " in proc.stderr


# --------------------------------------------------------------------------- the recipe door (text -> recipe)

REGION_SEEDS = [t for t in ALL_SEEDS if "fused.region" in t] or ALL_SEEDS


def recipe_door(text: str) -> str:
    """`prepare_recipe` takes region text from users (adopt_runtime_fused accepts it):
    it must succeed or raise a RecipeError, nothing else."""
    from fusebind.compiler.recipes import RecipeError, prepare_recipe

    try:
        prepare_recipe("fuzzed", text)
        return "ok"
    except RecipeError as err:
        assert str(err)
        return type(err).__name__


@FUZZ
@given(st.sampled_from(REGION_SEEDS), st.data())
def test_recipe_text_truncations_end_in_a_recipe_error(text: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(text)))
    recipe_door(text[:cut])


@pytest.mark.parametrize("name", ["deep-nesting.mlir", "huge-dim-constant.mlir", "fused-id-overflow.mlir"])
def test_recipe_text_from_the_corpus_ends_in_a_recipe_error(name: str) -> None:
    path = Path(__file__).parent / "corpus" / name
    assert recipe_door(path.read_text()) != "ok"


def test_recipe_text_with_an_open_string_at_the_start_is_a_recipe_error() -> None:
    assert recipe_door('"') == "RecipeParseError"


def test_recipe_text_that_is_not_a_region_is_a_recipe_error() -> None:
    assert recipe_door("") == "RecipeParseError"
    assert recipe_door("func.func @f() {\n  func.return\n}\n") == "RecipeParseError"
