"""The convolutional handlers (fusebind/onnx/ops_conv.py) against onnx's ReferenceEvaluator: Conv,
MaxPool (with its Indices), AveragePool, LpPool, the global poolings and LRN, each folded on numpy
and (the representative ones) traced through fb.jit; the refusals with their exact messages."""

from __future__ import annotations

import re

import numpy as np
import pytest

from onnx_node_harness import check, node, run_fusebind, with_modes

from fusebind.onnx import ops_conv  # noqa: F401  (registers the handlers)
from fusebind.onnx.registry import UnsupportedModel

RNG = np.random.default_rng(16)
X = RNG.standard_normal((1, 2, 5, 6)).astype(np.float32)
W = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)
W2 = RNG.standard_normal((3, 2, 2, 2)).astype(np.float32)
XG = RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)
WG = RNG.standard_normal((6, 2, 2, 3)).astype(np.float32)
X1 = RNG.standard_normal((2, 3, 9)).astype(np.float32)
W1 = RNG.standard_normal((4, 3, 3)).astype(np.float32)
X3 = RNG.standard_normal((1, 2, 4, 3, 5)).astype(np.float32)
W3 = RNG.standard_normal((2, 2, 2, 2, 3)).astype(np.float32)
TIES = np.round(RNG.standard_normal((2, 2, 5, 5)) * 1.5).astype(np.float32)  # (equal maxima in most windows)

CONV = [
    ("conv_pads_strides_bias", node("Conv", ["x", "w", "b"], pads=[1, 0, 2, 1], strides=[2, 1]), [X, W, B], 11),
    ("conv_kernel_shape_given", node("Conv", ["x", "w"], kernel_shape=[3, 3]), [X, W], 11),
    ("conv_same_upper", node("Conv", ["x", "w", "b"], auto_pad="SAME_UPPER"), [X, W2, B], 11),
    ("conv_same_lower_strided", node("Conv", ["x", "w"], auto_pad="SAME_LOWER", strides=[2, 2]), [X, W2], 11),
    ("conv_valid", node("Conv", ["x", "w"], auto_pad="VALID", strides=[1, 2]), [X, W], 11),
    ("conv_group_dilation", node("Conv", ["x", "w"], group=2, dilations=[2, 1], pads=[1, 1, 1, 1]), [XG, WG], 11),
    ("conv_depthwise", node("Conv", ["x", "w"], group=4, pads=[1, 1, 1, 1]),
     [XG, RNG.standard_normal((4, 1, 3, 3)).astype(np.float32)], 11),
    ("conv_1d", node("Conv", ["x", "w", "b"], pads=[2, 1], strides=[2], dilations=[2]), [X1, W1, B[:1].repeat(4)], 1),
    ("conv_3d", node("Conv", ["x", "w"], pads=[1, 0, 1, 0, 1, 1], strides=[1, 2, 2]), [X3, W3], 11),
    ("conv_float64", node("Conv", ["x", "w", "b"], pads=[1, 1, 1, 1]),
     [X.astype(np.float64), W.astype(np.float64), B.astype(np.float64)], 11),
]

XU8 = RNG.integers(0, 255, (1, 2, 5, 6)).astype(np.uint8)
WI8 = RNG.integers(-128, 127, (3, 2, 3, 3)).astype(np.int8)
WU8 = RNG.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8)
U8 = lambda v: np.array(v, np.uint8)  # noqa: E731
F32 = lambda v: np.array(v, np.float32)  # noqa: E731

QUANT = [
    ("convinteger_pads_strides", node("ConvInteger", ["x", "w", "xz", "wz"], pads=[1, 1, 1, 1], strides=[2, 1]),
     [XU8, WU8, U8(128), U8(7)], 10),
    ("convinteger_int8_weight_per_channel_zero", node("ConvInteger", ["x", "w", "xz", "wz"], auto_pad="SAME_UPPER"),
     [XU8, WI8, U8(3), np.array([1, -2, 5], np.int8)], 10),
    ("convinteger_no_zero_points", node("ConvInteger", ["x", "w"], dilations=[2, 1]), [XU8, WU8], 10),
    ("qlinearconv_per_channel_bias", node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                                          pads=[1, 0, 1, 0]),
     [XU8, F32(0.02), U8(120), WU8, F32([0.003, 0.004, 0.002]), U8(128), F32(0.05), U8(100),
      np.array([-500, 0, 700], np.int32)], 10),
    ("qlinearconv_int8_out", node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], strides=[2, 2]),
     [XU8.astype(np.int8), F32(0.1), np.array(-3, np.int8), WI8, F32(0.01), np.array(0, np.int8), F32(0.3),
      np.array(5, np.int8)], 10),
]

XD = RNG.standard_normal((2, 4, 5, 5)).astype(np.float32)
WD = RNG.standard_normal((2, 2, 2, 2)).astype(np.float32)

DEFORM = [
    ("deform_pads_strides_bias", node("DeformConv", ["x", "w", "o", "b"], pads=[1, 0, 1, 1], strides=[2, 1]),
     [XD, RNG.standard_normal((2, 4, 2, 2)).astype(np.float32),
      (RNG.standard_normal((2, 8, 3, 5)) * 1.5).astype(np.float32), B[:2]], 19),
    ("deform_groups_offset_groups_mask", node("DeformConv", ["x", "w", "o", "", "m"], group=2, offset_group=2,
                                              dilations=[1, 2]),
     [XD, WD, (RNG.standard_normal((2, 16, 4, 3)) * 2).astype(np.float32), None,
      RNG.uniform(0, 1, (2, 8, 4, 3)).astype(np.float32)], 19),
]

XT = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
WT = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
XTG = RNG.standard_normal((1, 4, 3, 3)).astype(np.float32)
WTG = RNG.standard_normal((4, 1, 2, 2)).astype(np.float32)

CONV_TRANSPOSE = [
    ("convt_bias", node("ConvTranspose", ["x", "w", "b"]), [XT, WT, B], 11),
    ("convt_strides_output_padding_pads", node("ConvTranspose", ["x", "w", "b"], strides=[2, 2], output_padding=[1, 0],
                                               pads=[1, 0, 0, 1]), [XT, WT, B], 11),
    ("convt_output_shape_longer", node("ConvTranspose", ["x", "w", "b"], strides=[3, 2], output_shape=[10, 10]),
     [XT, WT, B], 11),
    ("convt_output_shape_shorter", node("ConvTranspose", ["x", "w"], strides=[2, 2], output_shape=[5, 7]),
     [XT, WT], 11),
    ("convt_same_upper", node("ConvTranspose", ["x", "w"], strides=[2, 2], auto_pad="SAME_UPPER"), [XT, WT], 11),
    ("convt_same_lower", node("ConvTranspose", ["x", "w"], strides=[2, 2], auto_pad="SAME_LOWER"), [XT, WT], 11),
    ("convt_valid_kernel_shape", node("ConvTranspose", ["x", "w"], kernel_shape=[3, 3], auto_pad="VALID",
                                      strides=[2, 1]), [XT, WT], 11),
    ("convt_group_dilations", node("ConvTranspose", ["x", "w"], group=2, dilations=[2, 1], strides=[1, 2]),
     [XTG, WTG], 11),
    ("convt_group_bias", node("ConvTranspose", ["x", "w", "b"], group=2), [XTG, WTG, B[:2]], 11),
    ("convt_1d", node("ConvTranspose", ["x", "w"], strides=[2], pads=[1, 2], dilations=[2]),
     [X1[:, :2, :5], RNG.standard_normal((2, 3, 3)).astype(np.float32)], 11),
    ("convt_3d", node("ConvTranspose", ["x", "w"], strides=[1, 2, 1], pads=[0, 1, 0, 0, 0, 1]),
     [X3[:, :, :2, :, :2], RNG.standard_normal((2, 2, 2, 2, 3)).astype(np.float32)], 11),
]
#: onnxruntime checks these: the reference evaluator refuses an output_shape shorter than the full
#: transposed convolution and fails on group > 1
CONVT_ORT = {"convt_output_shape_shorter", "convt_group_dilations", "convt_group_bias"}

POOL = [
    ("maxpool_pads_strides", node("MaxPool", ["x"], kernel_shape=[3, 2], pads=[1, 1, 1, 0], strides=[2, 2]), [X], 12),
    ("maxpool_ceil_dilations", node("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 2],
                                    ceil_mode=1), [X], 12),
    ("maxpool_same_lower", node("MaxPool", ["x"], kernel_shape=[2, 3], auto_pad="SAME_LOWER", strides=[2, 1]),
     [X], 12),
    ("maxpool_1d", node("MaxPool", ["x"], kernel_shape=[3], strides=[2], pads=[1, 1]), [X1], 12),
    ("maxpool_3d", node("MaxPool", ["x"], kernel_shape=[2, 2, 2], pads=[0, 1, 0, 1, 0, 1]), [X3], 12),
    ("maxpool_uint8", node("MaxPool", ["x"], kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
     [RNG.integers(0, 255, (1, 2, 5, 6)).astype(np.uint8)], 12),
    ("maxpool_int8", node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
     [RNG.integers(-128, 127, (1, 2, 5, 6)).astype(np.int8)], 12),
    ("maxpool_indices_ties_pads", node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     [TIES], 12),
    ("maxpool_indices_column_major", node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 3], strides=[2, 1],
                                          pads=[1, 0, 0, 1], storage_order=1), [TIES], 12),
    ("maxpool_indices_only", node("MaxPool", ["x"], ["", "i"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
     [TIES], 12),
    ("maxpool_indices_all_neg_inf", node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], pads=[2, 2, 2, 2],
                                         strides=[2, 2]), [np.full((1, 1, 4, 4), -np.inf, np.float32)], 12),
    ("maxunpool", node("MaxUnpool", ["x", "i"], kernel_shape=[2, 2], strides=[2, 2]),
     [X[:, :, :2, :3],
      np.array([[[[0, 3, 5], [13, 14, 23]], [[1, 2, 4], [12, 17, 22]]]], np.int64) + [[[[0]], [[24]]]]],
     12),
    ("maxunpool_pads_3d", node("MaxUnpool", ["x", "i"], kernel_shape=[2, 2, 2], pads=[0, 1, 0, 0, 1, 0]),
     [X3[:, :1, :2, :2, :2], np.array([0, 5, 8, 1, 2, 7, 3, 4], np.int64).reshape(1, 1, 2, 2, 2)], 12),
    ("avgpool_pads", node("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]), [X], 19),
    ("avgpool_count_include_pad_ceil", node("AveragePool", ["x"], kernel_shape=[2, 3], pads=[1, 1, 0, 1],
                                            strides=[2, 2], count_include_pad=1, ceil_mode=1), [X], 19),
    ("avgpool_same_upper", node("AveragePool", ["x"], kernel_shape=[3, 2], auto_pad="SAME_UPPER", strides=[2, 1]),
     [X], 19),
    ("avgpool_dilations", node("AveragePool", ["x"], kernel_shape=[2, 2], pads=[1, 0, 1, 1], dilations=[2, 1]),
     [X], 19),
    ("avgpool_3d", node("AveragePool", ["x"], kernel_shape=[2, 2, 3], strides=[2, 1, 2]), [X3], 11),
    ("lppool_p2_pads", node("LpPool", ["x"], kernel_shape=[2, 3], pads=[1, 1, 1, 1], strides=[1, 2]), [X], 18),
    ("lppool_p1", node("LpPool", ["x"], kernel_shape=[2, 2], p=1), [X], 18),
    ("lppool_p3_same_upper", node("LpPool", ["x"], kernel_shape=[3, 2], p=3, auto_pad="SAME_UPPER"), [X], 18),
    ("globalaveragepool", node("GlobalAveragePool", ["x"]), [X], 1),
    ("globalmaxpool_3d", node("GlobalMaxPool", ["x"]), [X3], 1),
    ("globallppool", node("GlobalLpPool", ["x"]), [X], 2),
    ("globallppool_p3", node("GlobalLpPool", ["x"], p=3), [X1], 2),
    ("lrn", node("LRN", ["x"], size=3, alpha=0.01, beta=0.6, bias=1.5), [XG], 13),
    ("lrn_even_size", node("LRN", ["x"], size=4), [XG], 13),
    ("lrn_3d", node("LRN", ["x"], size=5, bias=2.0), [X1], 13),
]

#: onnxruntime checks these: the reference evaluator's SAME_LOWER pooling output is floor(in / stride)
#: (the spec: ceil), its 3-D MaxPool with pads indexes out of range, its 2-D MaxPool Indices are
#: shifted where pads are given, its GlobalMaxPool keeps a spatial dim per axis, its LRN sums the
#: squares of channel 0 only (it loops over the batch) and takes 4-D inputs only, and it has no
#: GlobalLpPool
ORT_CHECKED = {"maxpool_same_lower", "maxpool_3d", "maxpool_indices_ties_pads", "globalmaxpool_3d", "globallppool",
               "globallppool_p3", "lrn"}
#: checked against `_lrn_loop` (size, alpha, beta, bias)
LRN_LOOP = {"lrn_even_size": (4, 1e-4, 0.75, 1.0), "lrn_3d": (5, 1e-4, 0.75, 2.0)}

#: traced by default (shared shapes; the rest run folded on numpy, traced under FUSEBIND_LONG=1)
TRACED_CONV = {"conv_pads_strides_bias", "conv_group_dilation"}
TRACED_POOL = {"lrn", "maxunpool"}


@pytest.mark.parametrize("name,nd,inputs,opset,jit", with_modes(CONV, TRACED_CONV))
def test_conv_matches_reference(name, nd, inputs, opset, jit):
    check(nd, inputs, opset=opset, rtol=1e-5, atol=1e-5, jit=jit)


@pytest.mark.parametrize("name,nd,inputs,opset,jit", with_modes(CONV[:1], set()))
def test_conv_constant_weight_traced_input(name, nd, inputs, opset, jit):
    """The weight and bias as import-time constants (initializers), the input traced."""
    check(nd, inputs, const=[1, 2], opset=opset, rtol=1e-5, atol=1e-5, jit=True)


@pytest.mark.parametrize("name,nd,inputs,opset,jit", with_modes(QUANT, set()))
def test_integer_conv_matches_reference(name, nd, inputs, opset, jit):
    """The zero points and scales are constants (initializers), as the quantized models have them."""
    data = (0, 1) if nd.op_type == "ConvInteger" else (0, 3)  # (x and w traced, as a model's input and weight)
    check(nd, inputs, const=[i for i in range(len(inputs)) if i not in data], opset=opset, jit=jit)


@pytest.mark.parametrize("name,nd,inputs,opset,jit", with_modes(DEFORM, set()))
def test_deform_conv_matches_reference(name, nd, inputs, opset, jit):
    """Offsets of a few pixels (samples past the border read zeros); traced under FUSEBIND_LONG=1 (its
    compile takes seconds)."""
    check(nd, inputs, opset=opset, rtol=1e-5, atol=1e-5, jit=jit)


@pytest.mark.parametrize("name,nd,inputs,opset,jit",
                         with_modes(CONV_TRANSPOSE, {"convt_strides_output_padding_pads", "convt_group_dilations"}))
def test_conv_transpose_matches_reference(name, nd, inputs, opset, jit):
    check(nd, inputs, opset=opset, rtol=1e-5, atol=1e-5, jit=jit, ref="ort" if name in CONVT_ORT else "onnx")


@pytest.mark.parametrize("name,nd,inputs,opset,jit", with_modes(POOL, TRACED_POOL))
def test_pool_matches_reference(name, nd, inputs, opset, jit):
    if name in LRN_LOOP:  # (onnxruntime refuses an even size and a 3-D input; the spec defines them)
        _assert_close(run_fusebind(nd, inputs, opset=opset, jit=jit)[0], _lrn_loop(inputs[0], *LRN_LOOP[name]))
    elif name in ORT_CHECKED and len(nd.output) > 1:
        got = run_fusebind(nd, inputs, opset=opset, jit=jit)
        for g, w in zip(got, _ort_with_indices(nd, inputs[0], opset)):
            _assert_close(g, w)
    else:
        check(nd, inputs, opset=opset, rtol=1e-5, atol=1e-5, jit=jit, ref="ort" if name in ORT_CHECKED else "onnx")


def test_maxunpool_output_shape_pads_the_end():
    """output_shape larger than the inferred shape: the inferred block at the start, zeros after (the
    reference's and the node suite's meaning), the shape a constant input."""
    nd = node("MaxUnpool", ["x", "i", "s"], kernel_shape=[2, 2], strides=[2, 2])
    inputs = [X[:1, :1, :2, :2], np.array([[[[5, 7], [13, 15]]]], np.int64), np.array([1, 1, 5, 6], np.int64)]
    got = check(nd, inputs, const=[2], opset=12)[0]
    assert got.shape == (1, 1, 5, 6) and not got[0, 0, 4].any() and not got[0, 0, :, 4:].any()


def _assert_close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _ort_with_indices(nd, x, opset):
    """MaxPool's (values, Indices) by onnxruntime, the output types declared (the harness types an
    output it cannot infer as the first input)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    outs = [helper.make_tensor_value_info(n, t, None) for n, t in zip(nd.output, (TensorProto.FLOAT, TensorProto.INT64))
            if n]
    graph = helper.make_graph([nd], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)], outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def _lrn_loop(x, size, alpha, beta, bias):
    """The spec's LRN, one channel at a time: the squares of c - floor((size-1)/2) .. c + ceil((size-1)/2)."""
    y = np.empty_like(x)
    c = x.shape[1]
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c - 1, i + -(-(size - 1) // 2))
        sq = np.sum(x[:, lo:hi + 1].astype(np.float64) ** 2, axis=1)
        y[:, i] = x[:, i] / (bias + alpha / size * sq) ** beta
    return y


def test_same_pads_count_the_dilated_kernel():
    """SAME_UPPER pads as the spec writes them, ((out - 1) * stride + dilation * (kernel - 1) + 1 - in,
    the odd unit at the end), where onnxruntime pads for the undilated kernel: the output is
    ceil(in / stride) (onnx's shape inference) and equals the explicit pads' (checked above)."""
    same = node("AveragePool", ["x"], kernel_shape=[2, 2], auto_pad="SAME_UPPER", dilations=[2, 1])
    explicit = node("AveragePool", ["x"], kernel_shape=[2, 2], pads=[1, 0, 1, 1], dilations=[2, 1])
    got = run_fusebind(same, [X], opset=19, jit=False)[0]
    assert got.shape == (1, 2, 5, 6)
    np.testing.assert_array_equal(got, run_fusebind(explicit, [X], opset=19, jit=False)[0])


@pytest.mark.parametrize("op,attrs", [("Conv", {"pads": [1, 1, 1, 1]}), ("MaxPool", {"kernel_shape": [2, 2]}),
                                      ("AveragePool", {"kernel_shape": [2, 2], "pads": [1, 0, 1, 0]})])
def test_float16(op, attrs):
    inputs = [X.astype(np.float16)] + ([W.astype(np.float16)] if op == "Conv" else [])
    check(node(op, ["x", "w"][:len(inputs)], **attrs), inputs, opset=19, rtol=2e-3, atol=2e-3, jit=False)


def _refused(nd, inputs, opset, message):
    with pytest.raises(UnsupportedModel, match=re.escape(message)):
        run_fusebind(nd, inputs, opset=opset, jit=False)


@pytest.mark.parametrize("name,nd,inputs,opset,message", [
    ("conv_int32", node("Conv", ["x", "w"]), [X.astype(np.int32), W.astype(np.int32)], 11,
     "node 'y' (Conv, opset 11): an input of element type int32 (the op takes float16, float32, float64)"),
    ("conv_kernel_shape_differs", node("Conv", ["x", "w"], kernel_shape=[2, 2]), [X, W], 11,
     "node 'y' (Conv, opset 11): kernel_shape [2, 2] differs from the weight's spatial shape [3, 3]"),
    ("conv_group_mismatch", node("Conv", ["x", "w"], group=2), [X, W], 11,
     "node 'y' (Conv, opset 11): an input of 2 channels, a weight of shape (3, 2, 3, 3) and group 2 do not agree "
     "(the weight must be (F, C / group, *kernel), F divisible by group)"),
    ("conv_auto_pad_unknown", node("Conv", ["x", "w"], auto_pad="SAME"), [X, W], 11,
     "node 'y' (Conv, opset 11): auto_pad 'SAME' (the spec has NOTSET, SAME_UPPER, SAME_LOWER, VALID)"),
    ("conv_kernel_too_large", node("Conv", ["x", "w"], dilations=[3, 1]), [X, W], 11,
     "node 'y' (Conv, opset 11): a kernel [3, 3] (dilations [3, 1]) larger than the padded input [5, 6]"),
    ("conv_strides_length", node("Conv", ["x", "w"], strides=[1]), [X, W], 11,
     "node 'y' (Conv, opset 11): strides [1]: expected 2 entries, one per spatial dim"),
    ("convt_output_padding_too_large", node("ConvTranspose", ["x", "w"], output_padding=[1, 0]), [XT, WT], 11,
     "node 'y' (ConvTranspose, opset 11): output_padding [1, 0]: expected 2 entries, each smaller than its stride "
     "or dilation"),
    ("convt_weight_channels", node("ConvTranspose", ["x", "w"]), [XT, WTG], 11,
     "node 'y' (ConvTranspose, opset 11): an input of 2 channels, a weight of shape (4, 1, 2, 2) and group 1 do not "
     "agree (the weight must be (C, F / group, *kernel), C divisible by group)"),
    ("convinteger_int32", node("ConvInteger", ["x", "w"]), [X.astype(np.int32), W.astype(np.int32)], 10,
     "node 'y' (ConvInteger, opset 10): an input of element type int32 (the op takes int8, uint8)"),
    ("maxunpool_indices_shape", node("MaxUnpool", ["x", "i"], kernel_shape=[2, 2]),
     [X, np.zeros((1, 2, 5, 5), np.int64)], 12,
     "node 'y' (MaxUnpool, opset 12): indices of int64 (1, 2, 5, 5) for an input of shape (1, 2, 5, 6) (MaxUnpool "
     "takes int64 indices of the input's shape)"),
    ("maxunpool_output_shape_small", node("MaxUnpool", ["x", "i", "s"], kernel_shape=[2, 2]),
     [X, np.zeros((1, 2, 5, 6), np.int64), np.array([1, 2, 3, 3], np.int64)], 12,
     "node 'y' (MaxUnpool, opset 12): output_shape [1, 2, 3, 3] smaller than the inferred shape [1, 2, 6, 7] (or "
     "of another batch, channels or rank)"),
    ("maxunpool_index_out_of_range", node("MaxUnpool", ["x", "i"], kernel_shape=[2, 2], strides=[2, 2]),
     [X[:, :, :2, :2], np.full((1, 2, 2, 2), 32, np.int64)], 12,
     "node 'y' (MaxUnpool, opset 12): indices outside [0, 32), the inferred shape [1, 2, 4, 4]"),
    ("deform_offset_shape", node("DeformConv", ["x", "w", "o"]),
     [XD, WD.repeat(2, 1), np.zeros((2, 8, 3, 3), np.float32)], 19,
     "node 'y' (DeformConv, opset 19): offset (2, 8, 3, 3) / mask None for offset_group 1, a 2x2 kernel and a 4x4 "
     "output"),
    ("maxpool_int8_before_12", node("MaxPool", ["x"], kernel_shape=[2, 2]), [X.astype(np.int8)], 11,
     "node 'y' (MaxPool, opset 11): an input of element type int8 (the op takes float16, float32, float64)"),
    ("maxpool_int32", node("MaxPool", ["x"], kernel_shape=[2, 2]), [X.astype(np.int32)], 12,
     "node 'y' (MaxPool, opset 12): an input of element type int32 (the op takes float16, float32, float64, "
     "int8, uint8)"),
    ("maxpool_storage_order", node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], storage_order=2), [X], 12,
     "node 'y' (MaxPool, opset 12): storage_order 2 (0: row major, 1: column major)"),
    ("maxpool_pad_as_wide_as_kernel", node("MaxPool", ["x"], kernel_shape=[2, 2], pads=[2, 0, 0, 0]), [X], 12,
     "node 'y' (MaxPool, opset 12): pads [2, 0, 0, 0] as wide as the kernel [2, 2]: a window of padding only"),
    ("avgpool_no_kernel_shape", node("AveragePool", ["x"]), [X], 19,
     "node 'y' (AveragePool, opset 19): a pooling without its kernel_shape attribute"),
    ("avgpool_negative_pads", node("AveragePool", ["x"], kernel_shape=[2, 2], pads=[-1, 0, 0, 0]), [X], 19,
     "node 'y' (AveragePool, opset 19): pads [-1, 0, 0, 0]: negative pads"),
    ("avgpool_2d_input", node("AveragePool", ["x"], kernel_shape=[2]), [X[0, 0]], 19,
     "node 'y' (AveragePool, opset 19): an input of shape (5, 6): the op needs (N, C, *spatial) with at least "
     "one spatial dim"),
    ("lppool_p0", node("LpPool", ["x"], kernel_shape=[2, 2], p=0), [X], 18,
     "node 'y' (LpPool, opset 18): p = 0 (the norm needs p > 0)"),
    ("lrn_int", node("LRN", ["x"], size=3), [X.astype(np.int64)], 13,
     "node 'y' (LRN, opset 13): an input of element type int64 (the op takes float16, float32, float64)"),
])
def test_refusals(name, nd, inputs, opset, message):
    _refused(nd, inputs, opset, message)


def test_identical_filters_give_identical_channels():
    """A constant weight whose filters are all equal (the light models' ConstantOfShape weights) is one
    filter's convolution broadcast over F: every channel bit-identical, as in exact arithmetic (a BLAS
    gemm over 128 equal rows rounds some rows differently; the light models' softmax over equal logits
    of ~1e10 turns that ulp into a wrong answer). Values as the reference's."""
    x = (np.arange(32 * 27 * 27, dtype=np.float32).reshape(1, 32, 27, 27) / 997.0).astype(np.float32)
    w = np.full((128, 32, 1, 1), 0.37, np.float32)
    nd = node("Conv", ["x", "w"])
    y = check(nd, [x, w], const=[1], opset=11, rtol=1e-5, atol=1e-5)[0]
    assert (y == y[:, :1]).all()
    check(node("Conv", ["x", "w", "b"], pads=[1, 1, 1, 1]), [x, w, np.arange(128, dtype=np.float32)], const=[1, 2],
          opset=11, rtol=1e-5, atol=1e-4, jit=False)
