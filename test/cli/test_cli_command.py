"""The `fusebind` command: reports on built-in examples and examples/*.mlir,
exit codes, and one-line errors for bad input."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fusebind.cli import main, only_entry, parse_shapes, CliError
from fusebind.examples_builtin import BUILTIN_EXAMPLES, get_example

REPO = Path(__file__).resolve().parents[2]


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fusebind: error: ")
    assert "Traceback" not in err
    for f in fragments:
        assert f in lines[0], (f, lines[0])


# ----------------------------------------------------------------- built-in examples
def test_builtin_examples_match_their_numpy_twins() -> None:
    from fusebind.dialect import interpret, parse_module

    for ex in BUILTIN_EXAMPLES.values():
        args = ex.make_inputs(np.random.default_rng(1), 8)
        ref = interpret(parse_module(ex.mlir), *args, entry=ex.entry)
        np.testing.assert_allclose(ex.numpy_fn(*args), ref, rtol=1e-5, atol=1e-5, err_msg=ex.name)


def test_examples_lists_every_builtin_and_prints_mlir() -> None:
    code, out, _ = run_cli("examples")
    assert code == 0
    for name, ex in BUILTIN_EXAMPLES.items():
        assert f"@{ex.entry}" in out and name in out
    code, out, _ = run_cli("examples", "--mlir", "mlp")
    assert code == 0 and out == get_example("mlp").mlir and "func.func @mlp" in out


def test_run_builtin_mlp_reports_regions_kernels_check_and_time() -> None:
    code, out, err = run_cli("run", "--example", "mlp", "--dim", "16", "--repeat", "2", "-q")
    assert code == 0, out + err
    assert err == ""  # -q: no progress
    assert "== example:mlp @mlp (seed 0)" in out
    assert "x: f32[16,64]" in out
    for region in ("@layernorm", "@bias_gelu"):
        assert region in out
    assert "arm: fused" in out
    assert "RuntimeFused(" in out and "llvm:" in out and "Static(matmul)" in out
    assert "cost: arm 0" in out
    assert "check vs reference interpreter: PASS" in out
    assert "plain numpy" in out and "reference interpreter" in out
    assert out.rstrip().endswith("result: PASS")


def test_run_json_report_is_structured() -> None:
    code, out, _ = run_cli("--example", "attention", "--dim", "8", "--repeat", "1", "--json", "-q")
    assert code == 0
    [rep] = json.loads(out)
    assert rep["entry"] == "attention" and rep["passed"] is True
    names = {r["name"] for r in rep["regions"]}
    assert "layernorm" in names
    # softmax absorbs the score scaling before it, so its region is named after its ops
    assert any({"prim.reduce_max", "prim.exp", "prim.reduce_sum", "prim.div"} <= set(r["op_names"]) for r in rep["regions"])
    for r in rep["regions"]:
        assert r["fused_id"] > 0 and r["ops"] == len(r["op_names"]) and r["arm"] in ("fused", "arm 0")
    # the exact catalog match keeps its built-in id (the JIT binds Static(fused.layernorm)); synthesized
    # regions get runtime ids
    assert {r["fused_id"] for r in rep["regions"] if r["name"] == "layernorm"} == {2}
    assert all(r["fused_id"] >= 65536 for r in rep["regions"] if r["name"] != "layernorm")
    assert all({"key", "dtypes", "backend", "source"} <= set(k) for k in rep["kernels"])
    assert any(k["key"] == "Static(fused.layernorm)" for k in rep["kernels"])
    assert rep["check"]["max_rel_error"] <= rep["check"]["tolerance"]
    assert rep["timing"]["repeat"] == 1 and rep["timing"]["numpy"] > 0


def test_run_file_runs_every_function(tmp_path: Path) -> None:
    code, out, _ = run_cli(str(REPO / "examples" / "mlp.mlir"), "--repeat", "1", "-q")
    assert code == 0, out
    assert "@mlp (seed 0)" in out and "@attention (seed 0)" in out
    assert "@layernorm" in out and "@bias_gelu" in out
    assert "reduce_max_sub_exp" in out  # the softmax region, with the score scaling absorbed
    assert out.count("check vs reference interpreter: PASS") == 2
    assert "plain numpy" not in out  # only built-in examples have a numpy twin


def test_every_fusebind_command_the_readme_shows_runs() -> None:
    """Issue 11: the README's `fusebind run examples/mlp.mlir --entry mlp --shape x=128x64`
    exited 2 (x was declared 8x16). Every `fusebind ...` and `fusebind-opt ...` line of
    its sh blocks must succeed."""
    import shlex

    from fusebind.tools.opt import run_opt

    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)
    commands = [shlex.split(line, comments=True) for block in blocks for line in block.splitlines()
                if line.startswith(("fusebind ", "fusebind-opt "))]
    assert ["fusebind", "run", "examples/mlp.mlir", "--entry", "mlp", "--shape", "x=128x64"] in commands
    assert sum(argv[0] == "fusebind-opt" for argv in commands) >= 4
    cwd = os.getcwd()
    os.chdir(REPO)  # the README's paths are relative to the checkout
    try:
        for argv in commands:
            if argv[0] == "fusebind-opt":
                out, err = io.StringIO(), io.StringIO()
                assert run_opt(argv[1:], io.StringIO(), out, err) == 0, (argv, err.getvalue())
                assert out.getvalue(), argv
                continue
            extra = ["--repeat", "1"] if argv[1] == "run" else []
            code, text, err_text = run_cli(*argv[1:], *extra, "-q")
            assert code == 0, (argv, err_text)
            if argv[1] == "run":
                assert "result: PASS" in text, argv
            elif "--dot" in argv:
                assert text.startswith("digraph ") and "subgraph cluster_region_" in text, argv
            else:
                assert "func.func" in text, argv
    finally:
        os.chdir(cwd)
    code, out, _ = run_cli(str(REPO / "examples" / "mlp.mlir"), "--entry", "mlp", "--shape", "x=128x64", "-q",
                           "--repeat", "0")
    assert code == 0 and "x: f32[128,64], gamma: f32[64]" in out and "check vs reference interpreter: PASS" in out


def test_run_file_dynamic_dims_from_dim_and_shape() -> None:
    chain = str(REPO / "examples" / "chain.mlir")
    code, out, _ = run_cli(chain, "--entry", "gelu_erf", "--dim", "300", "--repeat", "0", "-q")
    assert code == 0 and "x: f32[300]" in out and "time per call" not in out
    code, out, _ = run_cli(chain, "--entry", "gelu_erf", "--shape", "x=77", "--repeat", "0", "-q", "--seed", "5")
    assert code == 0 and "x: f32[77]" in out and "(seed 5)" in out


def test_check_failure_exits_1() -> None:
    chain = str(REPO / "examples" / "chain.mlir")
    code, out, _ = run_cli(chain, "--entry", "gelu_erf", "--dim", "64", "--repeat", "0", "-q", "--tol", "1e-30")
    assert code == 1
    assert "check vs reference interpreter: FAIL" in out and "result: FAIL (@gelu_erf)" in out


def test_explain_prints_plan_and_optimized_ir() -> None:
    code, out, _ = run_cli("explain", "--example", "chain", "--dim", "64", "-q")
    assert code == 0
    assert "fusebind plan for 'chain'" in out and "fused.region" in out and "tensor<64xf32>" in out


def test_dynamic_program_runs_through_the_executors_specialization() -> None:
    import fusebind.cli as cli
    import fusebind.cli_inputs as cli_inputs

    assert not hasattr(cli, "specialize")  # one specialization: the executor's
    code, out, _ = run_cli("explain", str(REPO / "examples" / "chain.mlir"), "--entry", "gelu_erf", "--dim", "5", "-q")
    assert code == 0
    assert "gelu_erf'(x: float32[5])" in out and "tensor<5xf32>" in out and "tensor<?xf32>" not in out
    assert "@chain" not in out and "chosen: fused" in out


def test_only_entry_drops_other_functions_and_keeps_the_input() -> None:
    from fusebind.dialect import parse_module, print_module

    module = parse_module((REPO / "examples" / "chain.mlir").read_text())
    before = print_module(module)
    text = print_module(only_entry(module, "gelu_erf"))
    assert "@gelu_erf" in text and "@chain" not in text
    assert print_module(module) == before


def test_parse_shapes() -> None:
    assert parse_shapes(["x=4x8", "s=scalar", "v=3"]) == {"x": (4, 8), "s": (), "v": (3,)}
    with pytest.raises(CliError, match="is not NAME=DIMxDIM"):
        parse_shapes(["x=4by8"])


# ----------------------------------------------------------------- bad input
def test_missing_file() -> None:
    code, _, err = run_cli("run", "no/such/file.mlir", "-q")
    assert_one_line_error(code, err, "cannot read program file 'no/such/file.mlir'", "No such file or directory")


def test_parse_error_names_file_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                   "  %0 = prim.bogus %a : tensor<4xf32>\n  func.return %0 : tensor<4xf32>\n}\n")
    code, _, err = run_cli(str(bad), "-q")
    assert_one_line_error(code, err, f"{bad}:2:", "prim.bogus is not registered")


def test_verify_error(tmp_path: Path) -> None:
    bad = tmp_path / "wrong.mlir"
    bad.write_text("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                   "  %0 = prim.exp %a : tensor<4xf32> -> tensor<5xf32>\n  func.return %0 : tensor<4xf32>\n}\n")
    code, _, err = run_cli(str(bad), "-q")
    assert_one_line_error(code, err, f"{bad}:")


def test_unknown_entry() -> None:
    code, _, err = run_cli(str(REPO / "examples" / "mlp.mlir"), "--entry", "nope", "-q")
    assert_one_line_error(code, err, "no function @nope", "@mlp, @attention")


def test_unknown_example() -> None:
    code, _, err = run_cli("run", "--example", "nope", "-q")
    assert_one_line_error(code, err, "unknown example 'nope'", "mlp", "transformer")
    code, _, err = run_cli("examples", "--mlir", "nope")
    assert_one_line_error(code, err, "unknown example 'nope'")


@pytest.mark.parametrize("argv, fragment", [
    (["run", "--bogus"], "unrecognized arguments: --bogus"),
    (["run", "--dim", "x"], "invalid int value"),
    (["run", "--dim", "0"], "--dim must be >= 1"),
    (["run", "--repeat", "-1"], "--repeat must be >= 0"),
    (["run", "--tol", "-1"], "--tol must be a positive number"),
    (["run", "examples/mlp.mlir", "--example", "mlp"], "not both"),
    (["run", "--example", "chain", "--shape", "a=3"], "the shapes of the arguments of 'chain' (a: [3], b: [1048576], "
                                                      "c: [1048576]) do not fit its ops: prim.mul: operand shapes "
                                                      "(3,), (1048576,) do not broadcast; pick argument shapes"),
    (["run", "--example", "chain", "--shape", "zz=3"], "--shape names no argument of @chain: zz"),
    (["run", "--example", "mlp", "--shape", "x=4x5"], "does not fit argument 'x'"),
    (["run", "examples/mlp.mlir", "--shape", "x=4x5"], "pick it with --entry"),
])
def test_bad_options(argv: list[str], fragment: str) -> None:
    code, _, err = run_cli(*argv, "-q")
    assert_one_line_error(code, err, fragment)


# Issue 11: `fusebind run --dim 100000000` died of a MemoryError with exit 3.
def test_inputs_larger_than_memory_are_refused_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import fusebind.cli as cli
    import fusebind.cli_inputs as cli_inputs

    def never(*_: object) -> None:
        raise AssertionError("inputs were allocated")

    real = cli.get_example
    monkeypatch.setattr(cli, "get_example", lambda name: dataclasses.replace(real(name), make_inputs=never))
    monkeypatch.setattr(cli, "random_inputs", never)
    monkeypatch.setattr(cli_inputs, "available_memory", lambda: 8 << 30)
    code, _, err = run_cli("run", "--dim", "100000000", "-q", "--repeat", "0")
    # x is 100000000x64 f32 (23.8 GiB of the 23.8), drawn as float64 first (+47.7 GiB)
    assert_one_line_error(code, err)
    assert err == ("fusebind: error: the inputs of @transformer_block need 71.5 GiB to create (23.8 GiB of arrays; "
                   "the largest, x: f32[100000000,64]), more than the 8.0 GiB of memory available; "
                   "pick a smaller --dim or --shape\n")
    code, _, err = run_cli("explain", str(REPO / "examples" / "chain.mlir"), "--entry", "gelu_erf", "--shape",
                           "x=3000000000", "-q")
    assert err == ("fusebind: error: the inputs of @gelu_erf need 33.5 GiB to create (11.2 GiB of arrays; "
                   "the largest, x: f32[3000000000]), more than the 8.0 GiB of memory available; "
                   "pick a smaller --dim or --shape\n") and code == 2


def test_inputs_larger_than_any_machine_exit_2() -> None:
    code, _, err = run_cli(str(REPO / "examples" / "chain.mlir"), "--entry", "gelu_erf", "--shape",
                           "x=1000000000000", "-q", "--repeat", "0")
    assert_one_line_error(code, err, "the inputs of @gelu_erf need 10.9 TiB to create (3.6 TiB of arrays; the "
                          "largest, x: f32[1000000000000]), more than the ", "pick a smaller --dim or --shape")


def test_a_memory_error_allocating_or_running_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    import fusebind.cli as cli
    import fusebind.cli_inputs as cli_inputs
    import fusebind.dialect as dialect

    def no_memory(*_: object, **__: object) -> None:
        raise MemoryError("Unable to allocate 3.0 GiB for an array with shape (400000000,) and data type float64")

    chain = str(REPO / "examples" / "chain.mlir")
    monkeypatch.setattr(cli_inputs, "available_memory", lambda: 1 << 62)  # the estimate passes; the allocation fails
    monkeypatch.setattr(cli, "random_inputs", no_memory)
    code, _, err = run_cli(chain, "--entry", "gelu_erf", "--dim", "400000000", "-q", "--repeat", "0")
    assert_one_line_error(code, err)
    assert err == ("fusebind: error: not enough memory for the inputs of @gelu_erf (4.5 GiB to create, 1.5 GiB of "
                   "arrays): Unable to allocate 3.0 GiB for an array with shape (400000000,) and data type float64; "
                   "pick a smaller --dim or --shape\n")
    monkeypatch.undo()
    monkeypatch.setattr(dialect, "interpret", no_memory)  # the reference run of the check
    code, _, err = run_cli(chain, "--entry", "gelu_erf", "--dim", "64", "-q", "--repeat", "0")
    assert_one_line_error(code, err)
    assert err == ("fusebind: error: not enough memory to run this program with these shapes (Unable to allocate "
                   "3.0 GiB for an array with shape (400000000,) and data type float64); pick a smaller --dim or "
                   "--shape\n")


def test_no_arguments_prints_help_and_exits_2() -> None:
    code, _, err = run_cli()
    assert code == 2 and "usage: fusebind" in err


# ----------------------------------------------------------------- the console script
def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=600)


def test_console_script_progress_and_exit_code() -> None:
    script = str(Path(sys.executable).with_name("fusebind"))
    if not os.path.exists(script):
        pytest.skip("the fusebind console script is not installed beside this interpreter")
    proc = _run([script, "examples/chain.mlir", "--entry", "chain", "--repeat", "1"])
    assert proc.returncode == 0, proc.stderr
    assert "parse examples/chain.mlir" in proc.stderr
    assert "compile region @" in proc.stderr and "adopted as id" in proc.stderr
    assert "result: PASS" in proc.stdout
    # a second run in a fresh process finds every kernel in the object cache, and says so
    again = _run([script, "examples/chain.mlir", "--entry", "chain", "--repeat", "1"])
    assert again.returncode == 0, again.stderr
    kernel_lines = [ln for ln in again.stderr.splitlines() if "adopted as id" in ln]
    assert kernel_lines and all("loaded from the object cache" in ln for ln in kernel_lines), again.stderr
    bad = _run([script, "missing.mlir"])
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines()[-1] == (
        "fusebind: error: cannot read program file 'missing.mlir': No such file or directory")
