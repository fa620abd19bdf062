"""The issue's end-to-end check: a transformer block built with onnx.helper (embedding Gather,
LayerNormalization, causal multi-head attention with Trilu/Where, GELU MLP, residuals) loads
through `fusebind.onnx.load`, fuses (explain() shows the softmax, layernorm and GELU regions)
and matches onnxruntime within 1e-4 (normwise relative, float32)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from transformer_block_model import transformer_block

import fusebind.onnx

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def block():
    model = transformer_block()
    tokens = np.random.default_rng(1).integers(0, 32, (2, 8)).astype(np.int64)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"tokens": tokens})
    return model, fusebind.onnx.load(model), tokens, ref[0]


def test_transformer_block_matches_onnxruntime(block):
    _, f, tokens, ref = block
    y = f(tokens)
    assert y.dtype == np.float32 and y.shape == (2, 8, 16)
    assert np.max(np.abs(y - ref)) / np.max(np.abs(ref)) < 1e-4
    y2 = f(tokens=tokens)  # by name; the compiled plan is reused
    np.testing.assert_array_equal(y2, y)


def test_transformer_block_fuses_its_composites(block):
    _, f, tokens, _ = block
    text = f.explain(tokens)
    regions = re.findall(r"^region @(\S+) \(FusedOpId \d+\): \d+ ops \[(.*)\]$", text, re.M)
    chosen = re.findall(r"^  chosen: fused ", text, re.M)
    ops = [set(body.split(", ")) for _, body in regions]
    assert any({"prim.reduce_max", "prim.exp", "prim.reduce_sum", "prim.div"} <= o for o in ops), text  # softmax
    assert any({"prim.reduce_mean", "prim.sqrt"} <= o for o in ops), text  # layernorm
    assert any("prim.erf" in o for o in ops), text  # GELU (erf form)
    assert len(chosen) >= 3, text


def test_load_from_a_path_and_its_names(block, tmp_path):
    import onnx

    model, _, tokens, ref = block
    path = tmp_path / "block.onnx"
    onnx.save(model, str(path))
    f = fusebind.onnx.load(str(path))
    assert f.input_names == ["tokens"] and f.output_names == ["y"]
    assert np.max(np.abs(f(tokens) - ref)) / np.max(np.abs(ref)) < 1e-4
    assert "prim.gather" in f.mlir(tokens) or "prim.take" in f.mlir(tokens)


def test_load_refuses_wrong_inputs(block):
    _, f, tokens, _ = block
    with pytest.raises(fusebind.FusebindError, match=r"the model has no input 'tok'; its inputs are tokens"):
        f(tok=tokens)
    with pytest.raises(fusebind.FusebindError, match=r"input 'tokens' given twice"):
        f(tokens, tokens=tokens)
    with pytest.raises(fusebind.FusebindError, match=r"the model takes 1 inputs \(tokens\), 0 were given"):
        f()


@pytest.mark.skipif(not __import__("onnx_node_harness").LONG, reason="compiles a second block: FUSEBIND_LONG=1 runs it")
def test_weights_as_arguments_match_too(block):
    """Initializers above const_limit are arguments bound at load (not baked in): same answer."""
    model, _, tokens, ref = block
    f = fusebind.onnx.load(model, const_limit=64)
    assert len(f.imported.weights) >= 8
    assert np.max(np.abs(f(tokens) - ref)) / np.max(np.abs(ref)) < 1e-4
