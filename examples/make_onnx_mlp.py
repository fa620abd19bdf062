"""Writes examples/mlp.onnx, the README's ONNX example: an MLP block with a symbolic batch dim.

x[batch, 64] @ W1[64, 128] + b1 -> Gelu (tanh) -> @ W2[128, 64] + b2 -> + x -> LayerNormalization
-> Softmax, at opset 21, float32 weights from a fixed seed. Run: python examples/make_onnx_mlp.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weights = {"W1": rng.standard_normal((64, 128)) * 0.1, "b1": rng.standard_normal(128) * 0.1,
               "W2": rng.standard_normal((128, 64)) * 0.1, "b2": rng.standard_normal(64) * 0.1,
               "gamma": np.ones(64), "beta": np.zeros(64)}
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Gelu", ["h1"], ["h2"], approximate="tanh"),
        helper.make_node("MatMul", ["h2", "W2"], ["h3"]),
        helper.make_node("Add", ["h3", "b2"], ["h4"]),
        helper.make_node("Add", ["h4", "x"], ["h5"]),
        helper.make_node("LayerNormalization", ["h5", "gamma", "beta"], ["h6"], axis=-1, epsilon=1e-5),
        helper.make_node("Softmax", ["h6"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "mlp_block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], producer_name="fusebind-example")
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    path = Path(__file__).with_name("mlp.onnx")
    onnx.save(build(), path)
    print(f"wrote {path}")
