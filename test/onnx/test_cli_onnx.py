"""The ONNX front doors of the `fusebind` command: `fusebind run model.onnx` (drawn or file
inputs, checked against onnxruntime), `fusebind import model.onnx -o model.mlir` (prim IR that
`fusebind run` and fb.compile read back), `fusebind explain model.onnx`, and one-line errors
(exit 2) for models or inputs fusebind cannot take."""

from __future__ import annotations

import io
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from transformer_block_model import transformer_block

import fusebind as fb
from fusebind.cli import main

pytest.importorskip("onnxruntime")


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def one_line_error(code: int, err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("fusebind: error: "), (code, err)
    for f in fragments:
        assert f in lines[0], (f, lines[0])


@pytest.fixture(scope="module")
def block_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "block.onnx"
    onnx.save(transformer_block(), str(path))
    return path


def _save(tmp_path, nodes, inputs, outputs, name="m.onnx", inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_run_checks_against_onnxruntime(block_path):
    code, out, err = run_cli("run", str(block_path), "--repeat", "2", "-q")
    assert code == 0, err
    assert "inputs: tokens: int64[2,8]" in out
    assert "check vs onnxruntime: PASS" in out and "result: PASS" in out
    assert "onnxruntime " in out.split("time per call")[1]
    assert "fused regions: " in out and "arm: fused" in out


def test_run_json_and_input_files(block_path, tmp_path):
    tokens = np.arange(16, dtype=np.int64).reshape(2, 8) % 32
    np.save(tmp_path / "tokens.npy", tokens)
    code, out, err = run_cli("run", str(block_path), "--input", f"tokens={tmp_path / 'tokens.npy'}", "--repeat", "0",
                             "-q", "--json")
    assert code == 0, err
    (rep,) = json.loads(out)
    assert rep["passed"] and rep["reference"] == "onnxruntime" and rep["inputs"] == ["tokens: int64[2,8] (file)"]
    pb = tmp_path / "input_0.pb"
    pb.write_bytes(numpy_helper.from_array(tokens, "tokens").SerializeToString())
    code, out, err = run_cli("run", str(block_path), "--input", str(pb), "--repeat", "0", "-q")
    assert code == 0 and "tokens: int64[2,8] (file)" in out, err


def test_import_writes_prim_ir_that_runs(block_path, tmp_path):
    mlir = tmp_path / "block.mlir"
    code, _, err = run_cli("import", str(block_path), "-o", str(mlir), "-q")
    assert code == 0, err
    text = mlir.read_text()
    assert "func.func @transformer_block(%args: tensor<2x8xi64>) -> tensor<2x8x16xf32>" in text
    tokens = np.random.default_rng(3).integers(0, 32, (2, 8)).astype(np.int64)
    got = fb.compile(text)(tokens)
    import fusebind.onnx

    want = fusebind.onnx.load(str(block_path))(tokens)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_explain_shows_regions(block_path):
    code, out, err = run_cli("explain", str(block_path), "-q")
    assert code == 0, err
    assert "fusebind plan for 'transformer_block'" in out and "chosen: fused" in out


def test_symbolic_dims_from_dim_and_shape(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    path = _save(tmp_path, [helper.make_node("Softmax", ["x"], ["y"])], [x], [y])
    code, out, err = run_cli("run", path, "--dim", "3", "--repeat", "0", "-q")
    assert code == 0 and "x: float32[3,4]" in out, err
    code, out, err = run_cli("run", path, "--shape", "x=5x4", "--repeat", "0", "-q")
    assert code == 0 and "x: float32[5,4]" in out, err
    code, _, err = run_cli("run", path, "--shape", "x=5x3", "-q")
    one_line_error(code, err, "--shape x=5x3 does not fit input 'x', declared [?,4]")


def test_unsupported_model_is_bad_input_naming_node_op_opset(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    path = _save(tmp_path, [helper.make_node("NonZero", ["x"], ["y"], name="nz")], [x], [y])
    code, _, err = run_cli("run", path, "-q")
    one_line_error(code, err, "node 'nz' (NonZero, opset", "data-dependent")


def test_parameter_input_must_come_from_a_file(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    path = _save(tmp_path, [helper.make_node("Reshape", ["x", "s"], ["y"])], [x, s], [y])
    code, _, err = run_cli("run", path, "-q")
    one_line_error(code, err, "input 's' is a parameter of an op", "--input s=FILE.npy")
    np.save(tmp_path / "s.npy", np.array([3, 4], np.int64))
    code, out, err = run_cli("run", path, "--input", f"s={tmp_path / 's.npy'}", "--repeat", "0", "-q")
    assert code == 0 and "result: PASS" in out, err


def test_bad_files_and_names_are_one_line_errors(tmp_path, block_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not a model")
    one_line_error(*run_cli("run", str(bad), "-q")[::2], f"the file '{bad}' cannot be read as an ONNX model (protobuf: ")
    one_line_error(*run_cli("run", str(tmp_path / "missing.onnx"), "-q")[::2], "cannot read model file")
    one_line_error(*run_cli("run", str(block_path), "--input", "toks=x.npy", "-q")[::2],
                   "the model has no input 'toks'; its inputs are tokens")
    one_line_error(*run_cli("run", str(block_path), "--input", str(tmp_path / "none.npy"), "-q")[::2],
                   "cannot read input file")
    one_line_error(*run_cli("import", str(tmp_path / "x.mlir"), "-q")[::2],
                   "fusebind import reads an ONNX model (a .onnx file)")
