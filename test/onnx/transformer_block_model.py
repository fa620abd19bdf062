"""A transformer block as an ONNX model built with onnx.helper (the issue's check): token
embedding (Gather) plus a learned position table, LayerNormalization, causal multi-head
self-attention whose mask is Trilu of ones selected by Where, a GELU MLP, two residuals."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def transformer_block(batch: int = 2, seq: int = 8, dim: int = 16, heads: int = 2, vocab: int = 32,
                      seed: int = 0, opset: int = 21) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    hd = dim // heads
    inits: list[onnx.TensorProto] = []

    def w(name: str, *shape: int, scale: float = 0.3) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def c(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    n = helper.make_node
    nodes = [
        n("Gather", [w("emb", vocab, dim, scale=1.0), "tokens"], ["tok"], axis=0),
        n("Add", ["tok", w("pos", seq, dim)], ["x0"]),
        n("LayerNormalization", ["x0", w("ln1_s", dim), w("ln1_b", dim)], ["h1"], axis=-1, epsilon=1e-5),
    ]
    for p in "qkv":
        nodes += [n("MatMul", ["h1", w(f"W{p}", dim, dim)], [f"{p}0"]),
                  n("Add", [f"{p}0", w(f"b{p}", dim)], [f"{p}1"]),
                  n("Reshape", [f"{p}1", c(f"shape_{p}", np.array([batch, seq, heads, hd], np.int64))], [f"{p}2"]),
                  n("Transpose", [f"{p}2"], [f"{p}h"], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["qh", "kh"], ["s0"]),
        n("Mul", ["s0", c("scale", np.array(1.0 / np.sqrt(hd), np.float32))], ["s1"]),
        n("Trilu", [c("ones", np.ones((seq, seq), np.float32))], ["tri"], upper=0),
        n("Cast", ["tri"], ["causal"], to=TensorProto.BOOL),
        n("Where", ["causal", "s1", c("neg", np.array(-1e9, np.float32))], ["s2"]),
        n("Softmax", ["s2"], ["p"], axis=-1),
        n("MatMul", ["p", "vh"], ["o0"]),
        n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o1", c("shape_o", np.array([batch, seq, dim], np.int64))], ["o2"]),
        n("MatMul", ["o2", w("Wo", dim, dim)], ["o3"]),
        n("Add", ["o3", w("bo", dim)], ["o4"]),
        n("Add", ["x0", "o4"], ["x1"]),
        n("LayerNormalization", ["x1", w("ln2_s", dim), w("ln2_b", dim)], ["h2"], axis=-1, epsilon=1e-5),
        n("MatMul", ["h2", w("W1", dim, 4 * dim)], ["m0"]),
        n("Add", ["m0", w("b1", 4 * dim)], ["m1"]),
        n("Gelu", ["m1"], ["m2"]),
        n("MatMul", ["m2", w("W2", 4 * dim, dim)], ["m3"]),
        n("Add", ["m3", w("b2", dim)], ["m4"]),
        n("Add", ["x1", "m4"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "transformer_block",
                              [helper.make_tensor_value_info("tokens", TensorProto.INT64, [batch, seq])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, dim])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model
