"""ONNX shape/layout/indexing handlers (fusebind/onnx/ops_shape.py) against onnx's
ReferenceEvaluator: each case runs the handler inside fb.jit (traced data, constant shape
inputs) and, where the handler folds, on numpy alone (Shape arithmetic at import)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnx_node_harness import check, node, run_fusebind, with_modes

from fusebind.onnx.registry import UnsupportedModel

I64 = np.int64
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
X4 = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
GRID = np.random.default_rng(4).uniform(-1.7, 1.7, (2, 3, 5, 2)).astype(np.float32)  # (some outside [-1, 1])


def a(*v):
    return np.array(v, I64)


CASES = [
    ("reshape_zero_minus1", node("Reshape", ["x", "s"]), [X, a(0, -1)], [1], 18),
    ("reshape_allowzero", node("Reshape", ["x", "s"], allowzero=1), [X, a(4, 6)], [1], 18),
    ("flatten_0", node("Flatten", ["x"], axis=0), [X], [], 18),
    ("flatten_neg", node("Flatten", ["x"], axis=-1), [X], [], 18),
    ("squeeze_attr", node("Squeeze", ["x"], axes=[0]), [X[:1]], [], 11),
    ("squeeze_input", node("Squeeze", ["x", "a"]), [X[:1, :, :1], a(0, 2)], [1], 18),
    ("squeeze_all", node("Squeeze", ["x"]), [X[:1, :, :1]], [], 18),
    ("unsqueeze_attr", node("Unsqueeze", ["x"], axes=[0, 4]), [X], [], 11),
    ("unsqueeze_input", node("Unsqueeze", ["x", "a"]), [X, a(-1, 1)], [1], 18),
    ("transpose_perm", node("Transpose", ["x"], perm=[2, 0, 1]), [X], [], 18),
    ("transpose_default", node("Transpose", ["x"]), [X], [], 18),
    ("identity", node("Identity", ["x"]), [X], [], 18),
    ("expand_both_ways", node("Expand", ["x", "s"]), [X[:, :1, :], a(3, 1, 1, 1)], [1], 18),
    ("tile", node("Tile", ["x", "r"]), [X, a(1, 2, 3)], [1], 18),
    ("depth_to_space_dcr", node("DepthToSpace", ["x"], blocksize=2, mode="DCR"), [X4], [], 18),
    ("depth_to_space_crd", node("DepthToSpace", ["x"], blocksize=2, mode="CRD"), [X4], [], 18),
    ("space_to_depth", node("SpaceToDepth", ["x"], blocksize=2), [X4.reshape(2, 2, 4, 6)], [], 18),
    ("space_to_depth_crd", node("SpaceToDepth", ["x"], blocksize=2, mode="CRD"), [X4.reshape(2, 2, 4, 6)], [], 28),
    ("concat_neg_axis", node("Concat", ["x", "y"], axis=-1), [X, X[:, :, :2] * 2], [], 18),
    ("concat_const_operand", node("Concat", ["x", "y"], axis=0), [X, X[:1] + 1], [1], 18),
    ("split_attr", node("Split", ["x"], ["p", "q"], axis=2, split=[1, 3]), [X], [], 11),
    ("split_input", node("Split", ["x", "s"], ["p", "q"], axis=1), [X, a(2, 1)], [1], 13),
    ("split_equal", node("Split", ["x"], ["p", "q"], axis=-1), [X], [], 13),
    ("split_num_outputs_uneven", node("Split", ["x"], ["p", "q", "r"], axis=1, num_outputs=3), [X[:, :, :2].reshape(2, 3, 2).repeat(2, axis=1)[:, :5]], [], 18),
    ("slice_basic", node("Slice", ["x", "s", "e"]), [X, a(0, 1), a(1, 3)], [1, 2], 18),
    ("slice_clamp_neg_steps", node("Slice", ["x", "s", "e", "a", "p"]),
     [X, a(-1, 10), a(-100, 0), a(2, 1), a(-1, -2)], [1, 2, 3, 4], 18),
    ("slice_int_max", node("Slice", ["x", "s", "e", "a"]), [X, a(1), a(2**62), a(-1)], [1, 2, 3], 18),
    ("slice_neg_step_full", node("Slice", ["x", "s", "e", "a", "p"]),
     [X, a(2**62), a(-2**62), a(0), a(-1)], [1, 2, 3, 4], 18),
    ("slice_v1", node("Slice", ["x"], starts=[0, 1], ends=[1, 1000], axes=[0, 2]), [X], [], 9),
    ("gather_neg", node("Gather", ["x", "i"], axis=1), [X, a(-1, 0, 2)], [], 18),
    ("gather_scalar_index", node("Gather", ["x", "i"], axis=2), [X, np.array(-2, I64)], [], 18),
    ("gather_2d_index", node("Gather", ["x", "i"]), [X, np.array([[1, 0], [-1, -2]], np.int32)], [], 18),
    ("gather_constant_table", node("Gather", ["x", "i"]), [X, np.array([[1, 0], [-1, 1]], I64)], [0], 18),
    ("gather_nd_constant_table", node("GatherND", ["x", "i"]), [X, np.array([[0, 1], [1, -1]], I64)], [0], 18),
    ("gather_elements", node("GatherElements", ["x", "i"], axis=2), [X, np.array([[[0, -1]] * 3] * 2, I64)], [], 18),
    ("gather_nd", node("GatherND", ["x", "i"]), [X, np.array([[0, 1], [1, -1]], I64)], [], 18),
    ("gather_nd_full", node("GatherND", ["x", "i"]), [X, np.array([[0, 1, 3], [1, 2, -4]], I64)], [], 18),
    ("gather_nd_batch", node("GatherND", ["x", "i"], batch_dims=1), [X, np.array([[[2], [0]], [[1], [1]]], I64)], [], 18),
    ("scatter_elements_add", node("ScatterElements", ["x", "i", "u"], axis=1, reduction="add"),
     [X, np.array([[[0, 2, 0, -1]], [[1, 1, 2, 0]]], I64), np.ones((2, 1, 4), np.float32)], [], 18),
    ("scatter_elements_set", node("ScatterElements", ["x", "i", "u"], axis=-1),
     [X, np.array([[[3, 0]] * 3] * 2, I64), np.full((2, 3, 2), 9, np.float32)], [], 18),
    ("scatter_elements_max", node("ScatterElements", ["x", "i", "u"], axis=0, reduction="max"),
     [X, np.array([[[1, 0, 1, 0]]], I64), np.zeros((1, 1, 4), np.float32)], [], 18),
    ("scatter_nd_slices", node("ScatterND", ["x", "i", "u"]), [X, np.array([[1], [0]], I64), np.ones((2, 3, 4), np.float32)], [], 18),
    ("scatter_nd_mul", node("ScatterND", ["x", "i", "u"], reduction="mul"),
     [X, np.array([[0, 1], [0, 1], [1, -1]], I64), np.full((3, 4), 2, np.float32)], [], 18),
    ("pad_constant", node("Pad", ["x", "p", "v"]), [X, a(0, 1, 2, 1, 0, 0), np.array(3, np.float32)], [1, 2], 18),
    ("pad_traced_value", node("Pad", ["x", "p", "v"]), [X, a(0, 1, 2, 1, 0, 0), np.array(3, np.float32)], [1], 18),
    ("pad_reflect", node("Pad", ["x", "p"], mode="reflect"), [X, a(0, 2, 1, 0, 1, 3)], [1], 18),
    ("pad_edge", node("Pad", ["x", "p"], mode="edge"), [X, a(1, 0, 1, 0, 2, 1)], [1], 18),
    ("pad_wrap", node("Pad", ["x", "p"], mode="wrap"), [X, a(0, 1, 1, 0, 1, 2)], [1], 19),
    ("pad_axes", node("Pad", ["x", "p", "", "a"]), [X, a(1, 2), None, a(-1)], [1, 3], 18),
    ("pad_v2", node("Pad", ["x"], pads=[0, 0, 1, 0, 0, 1], value=2.0), [X], [], 2),
    ("trilu_upper_k", node("Trilu", ["x", "k"]), [X, np.array(1, I64)], [1], 18),
    ("trilu_lower", node("Trilu", ["x"], upper=0), [X], [], 18),
    ("trilu_lower_negk", node("Trilu", ["x", "k"], upper=0), [X, np.array(-1, I64)], [1], 18),
    ("cumsum", node("CumSum", ["x", "a"]), [X, np.array(1, I64)], [1], 18),
    ("cumsum_excl_rev", node("CumSum", ["x", "a"], exclusive=1, reverse=1), [X, np.array(-1, np.int32)], [1], 18),
    ("cumsum_int32_exclusive", node("CumSum", ["x", "a"], exclusive=1), [np.arange(12, dtype=np.int32).reshape(3, 4), np.array(0, I64)], [1], 18),
    ("cumprod_excl_rev", node("CumProd", ["x", "a"], exclusive=1, reverse=1), [X, np.array(1, I64)], [1], 18),
    ("center_crop_pad", node("CenterCropPad", ["x", "s"], axes=[1, 2]), [X, a(2, 7)], [1], 18),
    ("resize_linear_half_pixel", node("Resize", ["x", "", "s"], mode="linear"),
     [X4, None, np.array([1, 1, 1.5, 2.5], np.float32)], [2], 18),
    ("resize_cubic_sizes_axes_exclude", node("Resize", ["x", "", "", "z"], mode="cubic", axes=[2, 3], exclude_outside=1,
                                             coordinate_transformation_mode="align_corners"), [X4, None, None, a(3, 5)], [3], 18),
    ("resize_nearest_ceil_asym", node("Resize", ["x", "", "s"], nearest_mode="ceil",
                                      coordinate_transformation_mode="asymmetric"),
     [X4, None, np.array([1, 1, 2, 0.7], np.float32)], [2], 18),
    ("resize_tf_crop_extrapolate", node("Resize", ["x", "r", "", "z"], mode="linear", extrapolation_value=-3.0,
                                        coordinate_transformation_mode="tf_crop_and_resize"),
     [X4, np.array([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32), None, a(2, 8, 3, 4)], [1, 3], 18),
    ("resize_uint8_antialias", node("Resize", ["x", "", "", "z"], mode="linear", antialias=1),
     [np.arange(64, dtype=np.uint8).reshape(1, 1, 8, 8) * 3, None, None, a(1, 1, 3, 5)], [3], 18),
    ("reverse_sequence", node("ReverseSequence", ["x", "l"], time_axis=1, batch_axis=0), [X.reshape(4, 6), a(1, 6, 0, 3)],
     [], 18),
    ("tensor_scatter_circular", node("TensorScatter", ["c", "u", "w"], mode="circular"),
     [np.zeros((2, 3, 4, 2), np.float32), np.ones((2, 3, 3, 2), np.float32), a(2, 0)], [], 24),
    ("gridsample_linear_zeros", node("GridSample", ["x", "g"]), [X4, GRID], [], 20),
    ("gridsample_nearest_reflection", node("GridSample", ["x", "g"], mode="nearest", padding_mode="reflection"),
     [X4, GRID], [], 20),
    ("gridsample_cubic_border_align", node("GridSample", ["x", "g"], mode="cubic", padding_mode="border",
                                           align_corners=1), [X4, GRID], [], 20),
    ("gridsample_3d_linear_reflection", node("GridSample", ["x", "g"], padding_mode="reflection"),
     [X4.reshape(2, 2, 3, 2, 4), np.random.default_rng(5).uniform(-1.6, 1.6, (2, 2, 3, 2, 3)).astype(np.float32)],
     [], 20),
    ("affine_grid_2d", node("AffineGrid", ["t", "s"]), [np.random.default_rng(6).standard_normal((2, 2, 3)).astype(np.float32),
                                                       a(2, 3, 4, 5)], [1], 20),
    ("affine_grid_3d_align", node("AffineGrid", ["t", "s"], align_corners=1),
     [np.random.default_rng(7).standard_normal((1, 3, 4)).astype(np.float32), a(1, 1, 2, 3, 4)], [1], 20),
    ("onehot", node("OneHot", ["i", "d", "v"], axis=1), [a(0, -1, 2), np.array(4, I64), np.array([0, 5], np.float32)], [1, 2], 18),
    ("onehot_last", node("OneHot", ["i", "d", "v"]), [np.array([[1, 3], [0, -4]], np.int32), np.array(4, I64), np.array([2, 7], I64)], [1, 2], 18),
]


#: the cases also run traced by default: one per tracer path the handlers take
TRACED = {"slice_clamp_neg_steps", "gather_constant_table", "scatter_elements_add", "pad_traced_value", "onehot",
          "gridsample_nearest_reflection"}


@pytest.mark.parametrize("name,nd,inputs,const,opset,jit", with_modes(CASES, TRACED))
def test_handler_matches_reference(name, nd, inputs, const, opset, jit):
    check(nd, inputs, const, opset, jit=jit)


FOLDED = [
    ("shape", node("Shape", ["x"]), [X], 18),
    ("shape_start_end", node("Shape", ["x"], start=-2, end=10), [X], 18),
    ("size", node("Size", ["x"]), [X], 18),
    ("constant_of_shape", node("ConstantOfShape", ["s"], value=helper.make_tensor("v", 6, [1], [3])), [a(2, 3)], 18),
    ("constant_of_shape_default", node("ConstantOfShape", ["s"]), [a(4)], 18),
    ("range_float", node("Range", ["s", "l", "d"]), [np.array(1.0, np.float32), np.array(2.0, np.float32), np.array(0.3, np.float32)], 18),
    ("range_int_neg", node("Range", ["s", "l", "d"]), [np.array(10, np.int32), np.array(4, np.int32), np.array(-3, np.int32)], 18),
    ("range_empty", node("Range", ["s", "l", "d"]), [np.array(1, I64), np.array(5, I64), np.array(-1, I64)], 18),
    ("eyelike", node("EyeLike", ["x"], k=1, dtype=7), [X[0]], 18),
    ("reshape_folds", node("Reshape", ["x", "s"]), [X, a(-1)], 18),
]


@pytest.mark.parametrize("name,nd,inputs,opset", FOLDED, ids=[c[0] for c in FOLDED])
def test_constant_inputs_fold_to_numpy(name, nd, inputs, opset):
    got = check(nd, inputs, opset=opset, jit=False)
    assert all(isinstance(g, np.ndarray) for g in got)


def test_shape_of_a_traced_input_is_a_numpy_constant():
    from onnx_node_harness import context
    from fusebind.onnx import ops_shape
    import fusebind as fb

    seen = []

    @fb.jit
    def f(x):
        s = ops_shape.shape(context(node("Shape", ["x"]), 18), x)
        seen.append(s)
        return x * 2

    f(X)
    assert type(seen[0]) is np.ndarray and seen[0].tolist() == [2, 3, 4] and seen[0].dtype == I64


def test_constant_node():
    from onnx import helper
    t = helper.make_tensor("v", 1, [2], [1.5, 2.5])
    check(node("Constant", [], value=t), [], opset=18, jit=False)
    check(node("Constant", [], value_ints=[1, 2]), [], opset=18, jit=False)
    check(node("Constant", [], value_float=2.0), [], opset=18, jit=False)


def test_traced_shape_input_is_unsupported_model():
    with pytest.raises(UnsupportedModel, match=r"node 'y' \(Reshape, opset 18\): the shape input is computed"):
        run_fusebind(node("Reshape", ["x", "s"]), [X, a(4, 6)], const=[])


def test_split_that_does_not_add_up_is_unsupported_model():
    with pytest.raises(UnsupportedModel, match=r"split sizes \[1, 1\] do not add up to the dim 4"):
        run_fusebind(node("Split", ["x", "s"], ["p", "q"], axis=2), [X, a(1, 1)], const=[1])


def test_negative_pads_crop():
    # (the reference evaluator's np.pad refuses negative widths; onnxruntime crops, as the spec says)
    (got,) = run_fusebind(node("Pad", ["x", "p"]), [X, a(0, -1, 1, 0, 0, -2)], const=[1])
    np.testing.assert_array_equal(got, np.pad(X[:, 1:, :-2], ((0, 0), (0, 0), (1, 0))))


def test_range_of_delta_zero_is_unsupported_model():
    with pytest.raises(UnsupportedModel, match=r"\(Range, opset 18\): a Range delta of 0"):
        run_fusebind(node("Range", ["s", "l", "d"]), [np.array(1, I64), np.array(5, I64), np.array(0, I64)], const=[0, 1, 2], opset=18)
