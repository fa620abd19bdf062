"""The ONNX models bench/bench_onnx.py times: builders (onnx.helper, deterministic weights) and inputs.

Owns: `MODELS` (name -> `OnnxModel`: how to build the proto at full or quick size, and its
inputs), the transformer block of ONNX (1/2) (`transformer_block`: embedding Gather plus a
position table, LayerNormalization, causal multi-head attention with Trilu/Where, Gelu MLP, two
residuals; the same construction as test/onnx/transformer_block_model.py, written again here
because bench/ does not import from test/, which is not a package), a BERT-style encoder layer
(`bert_layer`: MatMul+Add Q/K/V, 12-head attention with Softmax, residual + LayerNormalization,
Erf-GELU FFN as exporters write it, residual + LayerNormalization), and the `light` CNNs shipped
in the onnx wheel (`light_model`: resnet50, squeezenet; input 1x3x224x224 f32, BackendTest's
`dummy_inputs`; `with_logits` adds the final Softmax's input as an output, what the bench checks).

Must not: import fusebind or onnxruntime, or time anything.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 21


@dataclass(frozen=True)
class OnnxModel:
    """One benchmarked model: `build(quick)` -> ModelProto, `inputs(model)` -> feeds by input name."""

    name: str
    kind: str  # "transformer" or "cnn"
    describe: str  # at full size; `quick` says what --quick builds instead
    quick: str
    build: Callable[[bool], onnx.ModelProto]
    inputs: Callable[[onnx.ModelProto], dict[str, np.ndarray]]


class _Weights:
    """Deterministic random initializers (float32 normal * scale) and int/float constants."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.inits: list[onnx.TensorProto] = []

    def w(self, name: str, *shape: int, scale: float) -> str:
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def ones(self, name: str, n: int, value: float) -> str:
        self.inits.append(numpy_helper.from_array(np.full(n, value, np.float32), name))
        return name

    def c(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name


def transformer_block(batch: int = 1, seq: int = 128, dim: int = 512, heads: int = 8, vocab: int = 1000,
                      seed: int = 0) -> onnx.ModelProto:
    """ONNX (1/2)'s transformer block (input `tokens` int64 [batch, seq], output `y` [batch, seq, dim])."""
    hd = dim // heads
    p = _Weights(seed)
    s = 1.0 / np.sqrt(dim)  # weight scale that keeps activations O(1) at every width
    n = helper.make_node
    nodes = [
        n("Gather", [p.w("emb", vocab, dim, scale=1.0), "tokens"], ["tok"], axis=0),
        n("Add", ["tok", p.w("pos", seq, dim, scale=0.3)], ["x0"]),
        n("LayerNormalization", ["x0", p.ones("ln1_s", dim, 1.0), p.w("ln1_b", dim, scale=0.1)], ["h1"],
          axis=-1, epsilon=1e-5),
    ]
    for q in "qkv":
        nodes += [n("MatMul", ["h1", p.w(f"W{q}", dim, dim, scale=s)], [f"{q}0"]),
                  n("Add", [f"{q}0", p.w(f"b{q}", dim, scale=0.1)], [f"{q}1"]),
                  n("Reshape", [f"{q}1", p.c(f"shape_{q}", np.array([batch, seq, heads, hd], np.int64))], [f"{q}2"]),
                  n("Transpose", [f"{q}2"], [f"{q}h"], perm=[0, 2, 3, 1] if q == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["qh", "kh"], ["s0"]),
        n("Mul", ["s0", p.c("scale", np.array(1.0 / np.sqrt(hd), np.float32))], ["s1"]),
        n("Trilu", [p.c("ones", np.ones((seq, seq), np.float32))], ["tri"], upper=0),
        n("Cast", ["tri"], ["causal"], to=TensorProto.BOOL),
        n("Where", ["causal", "s1", p.c("neg", np.array(-1e9, np.float32))], ["s2"]),
        n("Softmax", ["s2"], ["pr"], axis=-1),
        n("MatMul", ["pr", "vh"], ["o0"]),
        n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o1", p.c("shape_o", np.array([batch, seq, dim], np.int64))], ["o2"]),
        n("MatMul", ["o2", p.w("Wo", dim, dim, scale=s)], ["o3"]),
        n("Add", ["o3", p.w("bo", dim, scale=0.1)], ["o4"]),
        n("Add", ["x0", "o4"], ["x1"]),
        n("LayerNormalization", ["x1", p.ones("ln2_s", dim, 1.0), p.w("ln2_b", dim, scale=0.1)], ["h2"],
          axis=-1, epsilon=1e-5),
        n("MatMul", ["h2", p.w("W1", dim, 4 * dim, scale=s)], ["m0"]),
        n("Add", ["m0", p.w("b1", 4 * dim, scale=0.1)], ["m1"]),
        n("Gelu", ["m1"], ["m2"]),
        n("MatMul", ["m2", p.w("W2", 4 * dim, dim, scale=1.0 / np.sqrt(4 * dim))], ["m3"]),
        n("Add", ["m3", p.w("b2", dim, scale=0.1)], ["m4"]),
        n("Add", ["x1", "m4"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "transformer_block",
                              [helper.make_tensor_value_info("tokens", TensorProto.INT64, [batch, seq])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, dim])], p.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model


def bert_layer(batch: int = 1, seq: int = 128, dim: int = 768, heads: int = 12, ffn: int = 3072,
               seed: int = 1) -> onnx.ModelProto:
    """A BERT encoder layer as exporters write it (input `x` f32 [batch, seq, dim], output `y`): Q/K/V as
    MatMul+Add, scores Div sqrt(head dim), Softmax, output projection, residual + LayerNormalization,
    FFN with the Erf form of GELU (x * 0.5 * (1 + erf(x / sqrt 2))), residual + LayerNormalization."""
    hd = dim // heads
    p = _Weights(seed)
    s = 1.0 / np.sqrt(dim)
    n = helper.make_node
    nodes = []
    for q in "qkv":
        nodes += [n("MatMul", ["x", p.w(f"W{q}", dim, dim, scale=s)], [f"{q}0"]),
                  n("Add", [f"{q}0", p.w(f"b{q}", dim, scale=0.1)], [f"{q}1"]),
                  n("Reshape", [f"{q}1", p.c(f"shape_{q}", np.array([batch, seq, heads, hd], np.int64))], [f"{q}2"]),
                  n("Transpose", [f"{q}2"], [f"{q}h"], perm=[0, 2, 3, 1] if q == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["qh", "kh"], ["s0"]),
        n("Div", ["s0", p.c("sqrt_hd", np.array(np.sqrt(hd), np.float32))], ["s1"]),
        n("Softmax", ["s1"], ["pr"], axis=-1),
        n("MatMul", ["pr", "vh"], ["o0"]),
        n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o1", p.c("shape_o", np.array([batch, seq, dim], np.int64))], ["o2"]),
        n("MatMul", ["o2", p.w("Wo", dim, dim, scale=s)], ["o3"]),
        n("Add", ["o3", p.w("bo", dim, scale=0.1)], ["o4"]),
        n("Add", ["x", "o4"], ["x1"]),
        n("LayerNormalization", ["x1", p.ones("ln1_s", dim, 1.0), p.w("ln1_b", dim, scale=0.1)], ["h1"],
          axis=-1, epsilon=1e-12),
        n("MatMul", ["h1", p.w("W1", dim, ffn, scale=s)], ["f0"]),
        n("Add", ["f0", p.w("b1", ffn, scale=0.1)], ["f1"]),
        n("Div", ["f1", p.c("sqrt2", np.array(np.sqrt(2.0), np.float32))], ["g0"]),
        n("Erf", ["g0"], ["g1"]),
        n("Add", ["g1", p.c("one", np.array(1.0, np.float32))], ["g2"]),
        n("Mul", ["f1", "g2"], ["g3"]),
        n("Mul", ["g3", p.c("half", np.array(0.5, np.float32))], ["g4"]),
        n("MatMul", ["g4", p.w("W2", ffn, dim, scale=1.0 / np.sqrt(ffn))], ["f2"]),
        n("Add", ["f2", p.w("b2", dim, scale=0.1)], ["f3"]),
        n("Add", ["h1", "f3"], ["x2"]),
        n("LayerNormalization", ["x2", p.ones("ln2_s", dim, 1.0), p.w("ln2_b", dim, scale=0.1)], ["y"],
          axis=-1, epsilon=1e-12),
    ]
    graph = helper.make_graph(nodes, "bert_layer",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, dim])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, dim])], p.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model


def light_path(name: str) -> str:
    """The path of onnx's shipped `light_<name>.onnx` (the `real` model kind's models)."""
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    found = glob.glob(os.path.join(root, f"light_{name}.onnx"))
    if not found:
        raise FileNotFoundError(f"no light_{name}.onnx under {root} (this onnx wheel does not ship it)")
    return found[0]


def light_model(name: str) -> onnx.ModelProto:
    return onnx.load(light_path(name))


def random_weights(model: onnx.ModelProto, seed: int = 11) -> onnx.ModelProto:
    """A copy of a light model whose ConstantOfShape weights (every one 0.02) are deterministic random
    initializers: filters and matrices He-normal (std sqrt(2 / fan_in)), vectors (biases, BN
    statistics and scales) uniform in [0.5, 1.5] (a valid variance). With constant weights every
    filter of a Conv is the same, which fusebind computes once and broadcasts (exact, and what
    squeezenet-light's equal logits need), so a timing of the shipped weights would not measure a
    real convolution; the architecture and shapes are the light model's."""
    rng = np.random.default_rng(seed)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    keep, made = [], []
    for node in copy.graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            shape = tuple(int(d) for d in inits[node.input[0]])
            if len(shape) >= 2:
                value = rng.standard_normal(shape) * np.sqrt(2.0 / max(1, int(np.prod(shape[1:]))))
            else:
                value = rng.uniform(0.5, 1.5, shape)
            made.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
        else:
            keep.append(node)
    del copy.graph.node[:]
    copy.graph.node.extend(keep)
    copy.graph.initializer.extend(made)
    return copy


def with_logits(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """A copy of `model` that also returns the input of its final Softmax (the logits), or None when no
    graph output is a Softmax's. The light models' weights are constants (ConstantOfShape 0.02), so
    every logit is the same number in exact arithmetic and their softmax is decided by rounding
    (onnxruntime: uniform; onnx's ReferenceEvaluator: one-hot): the logits are what can be compared."""
    outs = {o.name for o in model.graph.output}
    soft = [n for n in model.graph.node if n.op_type == "Softmax" and n.output[0] in outs]
    if not soft:
        return None
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.output.append(helper.make_tensor_value_info(soft[-1].input[0], TensorProto.FLOAT, None))
    return copy


def dummy_inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The feeds onnx's BackendTest gives the light models (`generate_dummy_data(random=False)`):
    arange(n).reshape(shape) / n, float32."""
    feeds = {}
    for vi in graph_inputs(model):
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs a caller feeds (old opsets also list every initializer as an input)."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def random_inputs(model: onnx.ModelProto, seed: int = 7) -> dict[str, np.ndarray]:
    """Deterministic feeds for every fed input: int64 token ids below the embedding's rows, floats N(0, 1)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    vocab = next((t.dims[0] for t in model.graph.initializer if t.name == "emb"), 2)
    for vi in graph_inputs(model):
        tt = vi.type.tensor_type
        shape = tuple(d.dim_value for d in tt.shape.dim)
        if tt.elem_type == TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, vocab, shape).astype(np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
    return feeds


def _block(seq: int) -> Callable[[bool], onnx.ModelProto]:
    # quick: the same graph at a size that compiles and runs in well under a second
    return lambda quick: transformer_block(seq=16, dim=64, heads=4, vocab=64) if quick else transformer_block(seq=seq)


MODELS: dict[str, OnnxModel] = {m.name: m for m in (
    OnnxModel("block-s128", "transformer", "transformer block of ONNX (1/2), S=128, D=512, 8 heads, MLP 2048, batch 1",
              "S=16, D=64, 4 heads", _block(128), random_inputs),
    OnnxModel("block-s512", "transformer", "transformer block of ONNX (1/2), S=512, D=512, 8 heads, MLP 2048, batch 1",
              "S=16, D=64, 4 heads", _block(512), random_inputs),
    OnnxModel("bert-layer", "transformer", "BERT encoder layer, S=128, D=768, 12 heads, FFN 3072 (Erf GELU), batch 1",
              "S=16, D=96, 4 heads, FFN 384",
              lambda quick: bert_layer(seq=16, dim=96, heads=4, ffn=384) if quick else bert_layer(), random_inputs),
    OnnxModel("resnet50-light", "cnn", "onnx's light_resnet50.onnx with random weights (`random_weights`), "
              "1x3x224x224 f32", "the same model", lambda quick: random_weights(light_model("resnet50")),
              random_inputs),
    OnnxModel("squeezenet-light", "cnn", "onnx's light_squeezenet.onnx with random weights (`random_weights`), "
              "1x3x224x224 f32", "the same model", lambda quick: random_weights(light_model("squeezenet")),
              random_inputs),
)}

__all__ = ["MODELS", "OnnxModel", "bert_layer", "dummy_inputs", "graph_inputs", "light_model", "light_path", "random_weights",
           "random_inputs", "transformer_block", "with_logits"]
