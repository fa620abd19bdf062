"""ONNX composite and activation handlers (fusebind/onnx/ops_nn.py) against onnx's
ReferenceEvaluator, each run inside fb.jit on one small float32 shape (shared kernels)."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_node_harness import check, node, run_fusebind, with_modes

from fusebind.onnx.registry import UnsupportedModel

RNG = np.random.default_rng(0)
X = (RNG.standard_normal((2, 3, 4)) * 2).astype(np.float32)
X4 = RNG.standard_normal((2, 3, 2, 2)).astype(np.float32)
W = RNG.standard_normal(4).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
C3 = RNG.standard_normal(3).astype(np.float32)
VAR3 = RNG.uniform(0.5, 2, 3).astype(np.float32)

CASES = [
    ("softmax", node("Softmax", ["x"]), [X], 13),
    ("softmax_axis1", node("Softmax", ["x"], axis=1), [X], 13),
    ("softmax_v11_coerced", node("Softmax", ["x"], axis=1), [X], 11),
    ("softmax_v11_default", node("Softmax", ["x"]), [X], 11),
    ("logsoftmax", node("LogSoftmax", ["x"], axis=-1), [X], 13),
    ("logsoftmax_v11_axis0", node("LogSoftmax", ["x"], axis=0), [X], 11),
    ("hardmax", node("Hardmax", ["x"], axis=1), [X], 13),
    ("layernorm", node("LayerNormalization", ["x", "w", "b"], ["y", "m", "r"]), [X, W, B], 17),
    ("layernorm_axis1_noB", node("LayerNormalization", ["x", "w"], ["y"], axis=1, epsilon=1e-3),
     [X, X[0] * 0 + 1.5], 17),
    ("rmsnorm", node("RMSNormalization", ["x", "w"], epsilon=1e-4), [X, W], 23),
    ("mvn", node("MeanVarianceNormalization", ["x"]), [X4], 13),
    ("mvn_axes", node("MeanVarianceNormalization", ["x"], axes=[1]), [X4], 13),
    ("lpnorm_p1", node("LpNormalization", ["x"], axis=1, p=1), [X], 1),
    ("lpnorm_p2_zero_row", node("LpNormalization", ["x"]), [np.concatenate([X, 0 * X[:, :, :1]], axis=2)], 1),
    ("instancenorm", node("InstanceNormalization", ["x", "s", "b"]), [X4, C3, C3 * 2], 6),
    ("groupnorm", node("GroupNormalization", ["x", "s", "b"], num_groups=2), [X4[:, :2], C3[:2], C3[:2]], 21),
    ("batchnorm", node("BatchNormalization", ["x", "s", "b", "m", "v"]), [X4, C3, C3 * 2, C3, VAR3], 15),
    ("gelu", node("Gelu", ["x"]), [X], 20),
    ("gelu_tanh", node("Gelu", ["x"], approximate="tanh"), [X], 20),
    ("hardsigmoid", node("HardSigmoid", ["x"], alpha=0.3, beta=0.4), [X], 6),
    ("hardswish", node("HardSwish", ["x"]), [X], 14),
    ("softplus", node("Softplus", ["x"]), [X], 1),
    ("mish", node("Mish", ["x"]), [X], 18),
    ("softsign", node("Softsign", ["x"]), [X], 1),
    ("elu", node("Elu", ["x"], alpha=0.7), [X], 6),
    ("selu", node("Selu", ["x"]), [X], 6),
    ("celu", node("Celu", ["x"], alpha=2.0), [X], 12),
    ("leakyrelu", node("LeakyRelu", ["x"], alpha=0.1), [X], 16),
    ("prelu", node("PRelu", ["x", "s"]), [X, W], 16),
    ("prelu_v6_per_channel", node("PRelu", ["x", "s"]), [X, C3], 6),
    ("thresholdedrelu", node("ThresholdedRelu", ["x"], alpha=0.5), [X], 10),
    ("shrink", node("Shrink", ["x"], lambd=1.0, bias=0.5), [X], 9),
    ("swish", node("Swish", ["x"], alpha=0.5), [X], 24),
    ("swiglu", node("SwiGLU", ["a", "b"], alpha=1.5), [X, X[::-1].copy()], 28),
    ("causal_conv_silu_past", node("CausalConvWithState", ["x", "w", "b", "p"], ["y", "state"], activation="silu"),
     [X4.reshape(2, 3, 4), RNG.standard_normal((3, 1, 3)).astype(np.float32), C3, X4[:, :, 0, :]], 27),
    ("dropout_mask", node("Dropout", ["x"], ["y", "mask"]), [X], 13),
    ("einsum_bmm", node("Einsum", ["x", "y"], equation="bij, bjk -> bik"), [X, np.swapaxes(X, 1, 2)], 12),
    ("einsum_transpose_sum", node("Einsum", ["x"], equation="ijk->kj"), [X], 12),
]


#: onnxruntime checks these: the reference evaluator gives opset 13's Softmax meaning at every opset,
#: and its L1 norm sums x (not |x|)
ORT_CHECKED = {"softmax_v11_coerced", "softmax_v11_default", "logsoftmax_v11_axis0", "lpnorm_p1"}


#: the cases also run traced by default (the rest under FUSEBIND_LONG=1)
#: (softmax, layernorm and GELU also run traced and fused in test_transformer_block.py)
TRACED = {"gelu", "einsum_bmm", "selu", "hardmax", "causal_conv_silu_past"}


@pytest.mark.parametrize("name,nd,inputs,opset,jit", with_modes(CASES, TRACED))
def test_handler_matches_reference(name, nd, inputs, opset, jit):
    check(nd, inputs, opset=opset, rtol=1e-5, atol=1e-5, ref="ort" if name in ORT_CHECKED else "onnx", jit=jit)


def _rotary_inputs(interleaved):
    x = RNG.standard_normal((1, 3, 2 * 4)).astype(np.float32)  # batch 1, seq 3, 2 heads of 4
    pos = np.array([[0, 2, 1]], np.int64)
    ang = RNG.uniform(0, 3, (4, 2)).astype(np.float32)
    return [x, np.cos(ang), np.sin(ang), pos]


@pytest.mark.parametrize("name,interleaved,jit", with_modes([("rotary", 0), ("rotary_interleaved", 1)], set()))
def test_rotary_embedding(name, interleaved, jit):
    nd = node("RotaryEmbedding", ["x", "c", "s", "p"], interleaved=interleaved, num_heads=2)
    check(nd, _rotary_inputs(interleaved), const=[1, 2], opset=23, rtol=1e-5, atol=1e-5, jit=jit)


def test_training_dropout_with_ratio_zero_is_the_identity():
    y, mask = run_fusebind(node("Dropout", ["x", "r", "t"], ["y", "m"]), [X, np.array(0.0, np.float32), np.array(True)],
                           const=[1, 2], opset=13)
    np.testing.assert_array_equal(y, X)
    assert mask.dtype == bool and mask.shape == X.shape and mask.all()


def test_training_dropout_is_unsupported_model():
    with pytest.raises(UnsupportedModel, match=r"\(Dropout, opset 13\): training-mode Dropout"):
        run_fusebind(node("Dropout", ["x", "r", "t"]), [X, np.array(0.5, np.float32), np.array(True)],
                     const=[1, 2], opset=13)


def test_training_batchnorm_is_unsupported_model():
    with pytest.raises(UnsupportedModel, match=r"training-mode BatchNormalization"):
        run_fusebind(node("BatchNormalization", ["x", "s", "b", "m", "v"], training_mode=1),
                     [X4, C3, C3, C3, VAR3], opset=15)


def _qkv(b=1, hq=4, hkv=2, sq=3, skv=5, d=4, rank3=False):
    q = RNG.standard_normal((b, hq, sq, d)).astype(np.float32)
    k = RNG.standard_normal((b, hkv, skv, d)).astype(np.float32)
    v = RNG.standard_normal((b, hkv, skv, d)).astype(np.float32)
    if rank3:
        q, k, v = (np.reshape(np.transpose(t, (0, 2, 1, 3)), (b, t.shape[2], -1)) for t in (q, k, v))
    return q, k, v


ATTENTION = [
    ("gqa_causal_3d", node("Attention", ["q", "k", "v"], ["y"], is_causal=1, q_num_heads=4, kv_num_heads=2),
     list(_qkv(rank3=True)), 23),
    ("bool_mask_fully_masked_row_softcap",
     node("Attention", ["q", "k", "v", "m"], ["y", "", "", "qk"], softcap=2.0, qk_matmul_output_mode=3, scale=0.3),
     [*_qkv(hkv=4), np.array([[True, False, True, False, False], [False] * 5, [True] * 5])], 23),
    ("past_present_float_mask_causal",
     node("Attention", ["q", "k", "v", "m", "pk", "pv"], ["y", "ok", "ov"], is_causal=1),
     [*_qkv(hkv=4, skv=3), RNG.standard_normal((3, 5)).astype(np.float32),
      RNG.standard_normal((1, 4, 2, 4)).astype(np.float32), RNG.standard_normal((1, 4, 2, 4)).astype(np.float32)], 23),
]


@pytest.mark.parametrize("name,nd,inputs,opset,jit", with_modes(ATTENTION, {"past_present_float_mask_causal"}))
def test_attention_matches_reference(name, nd, inputs, opset, jit):
    check(nd, inputs, opset=opset, rtol=1e-5, atol=1e-5, jit=jit)


def _linear_attention_inputs(rule):
    b, t, hq, hkv, d = 1, 3, 4, 2, 2
    q = RNG.standard_normal((b, t, hq * d)).astype(np.float32)
    k = RNG.standard_normal((b, t, hkv * d)).astype(np.float32) * 0.5
    v = RNG.standard_normal((b, t, hkv * d)).astype(np.float32)
    past = RNG.standard_normal((b, hkv, d, d)).astype(np.float32)
    decay = -RNG.uniform(0.1, 1, (b, t, hkv)).astype(np.float32) if "gated" in rule else None
    beta = RNG.uniform(0, 1, (b, t, 1)).astype(np.float32) if "delta" in rule else None
    return [q, k, v, past, decay, beta]


@pytest.mark.parametrize("name,rule,jit", with_modes([("linear", "linear"), ("gated_delta", "gated_delta")], set()))
def test_linear_attention(name, rule, jit):
    nd = node("LinearAttention", ["q", "k", "v", "p", "g" if "gated" in rule else "", "b" if "delta" in rule else ""],
              ["y", "state"], update_rule=rule, q_num_heads=4, kv_num_heads=2)
    check(nd, _linear_attention_inputs(rule), opset=27, rtol=1e-5, atol=1e-5, jit=jit)
