"""fusebind.api.nn (issue 16): conv, conv_transpose, max/avg pooling and global pooling on the
window index map (prim.window), against onnx's ReferenceEvaluator: eagerly on numpy arrays (many
geometries, no compile) and traced through fb.jit (a few shapes, kernels shared), and the plan
facts: the conv is a window region (im2col), a BLAS matmul and an elementwise epilogue; a pooling
is one kernel whose prologue is the window (an index map, no window tensor)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusebind as fb
from fusebind.api import nn
from fusebind.api.errors import FusebindValueError

LONG = os.environ.get("FUSEBIND_LONG", "").strip().lower() in ("1", "true", "yes", "on")
long_only = pytest.mark.skipif(not LONG, reason="more compiled shapes; FUSEBIND_LONG=1 runs them")
RNG = np.random.default_rng(16)


def onnx_ref(op: str, arrays: list[np.ndarray], **attrs) -> np.ndarray:
    """One ONNX node over `arrays` (inputs in order; None leaves an optional input out), evaluated."""
    names = [f"i{k}" if a is not None else "" for k, a in enumerate(arrays)]
    node = helper.make_node(op, names, ["y"], **attrs)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in zip(names, arrays) if n]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(model).run(None, {n: a for n, a in zip(names, arrays) if n})[0]


def rand(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def close(got, want, rtol=2e-5, atol=2e-5) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ eager (numpy in, numpy out)
CONV_CASES = [  # x shape, w shape, strides, pads, dilations, groups
    ((2, 4, 9), (6, 2, 3), (2,), (1, 2), (1,), 2),
    ((1, 3, 7, 8), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 0, 0, 2), (1, 2), 2),
    ((1, 6, 6, 6), (6, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),  # depthwise
    ((1, 8, 5, 5), (4, 8, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1: no window
    ((1, 8, 5, 5), (4, 8, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),  # strided 1x1
    ((1, 2, 4, 5, 6), (4, 1, 2, 3, 2), (1, 2, 1), (0, 1, 1, 1, 0, 1), (2, 1, 2), 2),  # 3-D
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_eager_matches_onnx(case) -> None:
    xs, ws, s, p, d, g = case
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    got = nn.conv(x, w, b, strides=s, pads=p, dilations=d, groups=g)
    close(got, onnx_ref("Conv", [x, w, b], strides=s, pads=p, dilations=d, group=g))


TRANSPOSE_CASES = [  # x shape, w shape, strides, pads, dilations, groups, output_padding
    ((1, 2, 4, 5), (2, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (1, 0)),
    ((2, 4, 5), (4, 2, 3), (3,), (0, 0), (2,), 2, (2,)),
    ((1, 2, 3, 3), (2, 1, 2, 2), (1, 1), (2, 0, 0, 2), (1, 1), 1, (0, 0)),  # pads past the kernel: crop
    ((1, 2, 3, 3, 2), (2, 2, 2, 2, 2), (2, 1, 2), (0, 1, 0, 1, 0, 0), (1, 1, 1), 1, (1, 0, 0)),  # 3-D
]


def transpose_ref(x, w, b, g, **attrs) -> np.ndarray:
    """ONNX ConvTranspose; grouped as one ungrouped node per group (onnx 1.x's reference evaluator
    fails on group > 1: it writes each group's output into one channel)."""
    if g == 1:
        return onnx_ref("ConvTranspose", [x, w, b], **attrs)
    cg, fg = x.shape[1] // g, w.shape[1]
    return np.concatenate([onnx_ref("ConvTranspose", [x[:, i * cg:(i + 1) * cg], w[i * cg:(i + 1) * cg],
                                                      b[i * fg:(i + 1) * fg]], **attrs) for i in range(g)], axis=1)


@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv_transpose_eager_matches_onnx(case) -> None:
    xs, ws, s, p, d, g, op = case
    x, w, b = rand(*xs), rand(*ws), rand(ws[1] * g)
    got = nn.conv_transpose(x, w, b, strides=s, pads=p, dilations=d, groups=g, output_padding=op)
    close(got, transpose_ref(x, w, b, g, strides=s, pads=p, dilations=d, output_padding=op))


POOL_CASES = [  # x shape, kernel, strides, pads, dilations, ceil_mode
    ((1, 2, 9), (3,), (2,), (1, 1), (1,), 1),
    ((2, 3, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 0),
    ((2, 3, 7, 8), (3, 2), (2, 3), (1, 0, 1, 1), (1, 1), 1),
    ((1, 2, 8, 8), (2, 2), (1, 1), (0, 0, 0, 0), (2, 2), 0),
    ((1, 2, 5, 6, 7), (2, 3, 2), (2, 2, 1), (0, 1, 1, 1, 0, 0), (1, 1, 1), 1),  # 3-D
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_eager_matches_onnx(case) -> None:
    xs, k, s, p, d, ceil = case
    x = rand(*xs)
    got = nn.max_pool(x, k, strides=s, pads=p, dilations=d, ceil_mode=bool(ceil))
    close(got, onnx_ref("MaxPool", [x], kernel_shape=k, strides=s, pads=p, dilations=d, ceil_mode=ceil), 0, 0)


@pytest.mark.parametrize("include", [0, 1])
@pytest.mark.parametrize("case", [c for c in POOL_CASES if c[4] == (1,) * len(c[1])])
def test_avg_pool_eager_matches_onnx(case, include) -> None:
    xs, k, s, p, d, ceil = case
    x = rand(*xs)
    got = nn.avg_pool(x, k, strides=s, pads=p, ceil_mode=bool(ceil), count_include_pad=bool(include))
    close(got, onnx_ref("AveragePool", [x], kernel_shape=k, strides=s, pads=p, ceil_mode=ceil,
                        count_include_pad=include))


def test_global_pooling_matches_onnx() -> None:
    x = rand(2, 3, 4, 5)
    close(nn.global_avg_pool(x), onnx_ref("GlobalAveragePool", [x]))
    close(nn.global_max_pool(x), onnx_ref("GlobalMaxPool", [x]), 0, 0)


def test_integer_max_pool_pads_with_the_minimum() -> None:
    x = (np.iinfo(np.int32).min + 11 - np.arange(12)).astype(np.int32).reshape(1, 1, 12)  # near the minimum
    got = nn.max_pool(x, (3,), strides=(3,), pads=(2, 0))
    assert got.dtype == np.int32 and got.tolist() == [[[x[0, 0, 0], x[0, 0, 1], x[0, 0, 4], x[0, 0, 7]]]]


@pytest.mark.parametrize("call, message", [
    (lambda: nn.conv(rand(1, 4, 5, 5), rand(3, 2, 3, 3), groups=2),
     "conv: 4 input channels, weight (3, 2, 3, 3) and groups=2 do not agree (the weight is (F, C / groups, "
     "*kernel), F a multiple of groups)"),
    (lambda: nn.conv(rand(1, 2, 3, 3), rand(1, 2, 5, 2)),
     "conv: spatial dim 0: the (dilated) kernel spans 5 elements, more than the 3 of the padded input; pad the "
     "input or use a smaller kernel"),
    (lambda: nn.conv(rand(1, 2, 3, 3), rand(1, 2, 1, 1), strides=(0, 1)),
     "conv strides: entries must be >= 1, got [0, 1]"),
    (lambda: nn.conv(rand(1, 2, 3, 3), rand(1, 2, 1, 1), pads=(0, -1, 0, 0)),
     "conv: pads must be >= 0, got [0, -1, 0, 0]"),
    (lambda: nn.max_pool(rand(2, 3), (2,)),
     "max_pool: the input must be (N, C, *spatial) with at least one spatial dim, got shape (2, 3)"),
    (lambda: nn.avg_pool(rand(1, 1, 4, 4), (2,)), "avg_pool kernel: expected 2 entries, got 1"),
    (lambda: nn.conv_transpose(rand(1, 2, 3), rand(3, 1, 2)),
     "conv_transpose: 2 input channels, weight (3, 1, 2) and groups=1 do not agree (the weight is (C, F / groups, "
     "*kernel), C a multiple of groups)"),
])
def test_refusals_name_what_was_asked(call, message) -> None:
    with pytest.raises(FusebindValueError) as err:
        call()
    assert str(err.value) == message


# ------------------------------------------------------------------ traced (fb.jit)
X2 = rand(2, 4, 9, 8)


def _explain(fn, *args) -> str:
    return fn.explain(*args)


def test_conv_bias_relu_jit_matches_onnx_and_is_window_matmul_epilogue() -> None:
    w, b = rand(6, 2, 3, 3), rand(6)
    kw = dict(strides=(2, 1), pads=(1, 1, 0, 2), dilations=(1, 2), groups=2)
    f = fb.jit(lambda x, w, b: np.maximum(nn.conv(x, w, b, **kw), 0))
    want = np.maximum(onnx_ref("Conv", [X2, w, b], strides=kw["strides"], pads=kw["pads"],
                               dilations=kw["dilations"], group=2), 0)
    close(f(X2, w, b), want)
    text = _explain(f, X2, w, b)
    assert "region @ew_window (" in text and "[prim.window]" in text  # the im2col loop
    assert "prologue: window x k [3, 3] strides [2, 1] dilations [1, 2] pads [1, 1, 0, 2] fill 0" in text
    regions = [line for line in text.splitlines() if line.startswith("region @")]
    assert any(line.endswith("[prim.constant, prim.add, prim.max]") for line in regions), regions  # bias + relu: one kernel


def test_conv_bias_relu_past_half_a_million_elements() -> None:
    """Regression: the bias added as a (1, F, 1, 1) operand of the add, then relu, gave wrong values
    from ~512K elements (the region got a kernel compiled for dynamic shapes, which read the bias as
    full-shaped; compiler/splitting.py)."""
    x, w, b = rand(1, 8, 96, 96), rand(64, 8, 1, 1), rand(64)
    f = fb.jit(lambda x, w, b: np.maximum(nn.conv(x, w, b), 0))
    close(f(x, w, b), np.maximum(onnx_ref("Conv", [x, w, b]), 0))


def test_max_and_avg_pool_jit_match_onnx_in_one_kernel_each() -> None:
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    mp = fb.jit(lambda x: nn.max_pool(x, (3, 3), ceil_mode=True, **kw))
    close(mp(X2), onnx_ref("MaxPool", [X2], kernel_shape=(3, 3), ceil_mode=1, **kw), 0, 0)
    text = _explain(mp, X2)
    assert "region @fused_window_reduce_max (" in text and ": 2 ops [prim.window, prim.reduce_max]" in text
    assert "prologue: window x k [3, 3] strides [2, 2] pads [1, 1, 1, 2] fill -inf (index map, no copy)" in text
    assert text.count("region @") == 1
    ap = fb.jit(lambda x: nn.avg_pool(x, (3, 3), ceil_mode=True, **kw))
    close(ap(X2), onnx_ref("AveragePool", [X2], kernel_shape=(3, 3), ceil_mode=1, **kw))
    text = _explain(ap, X2)
    assert "[prim.constant, prim.window, prim.reduce_sum, prim.div]" in text and text.count("region @") == 1
    assert "prologue: window x k [3, 3] strides [2, 2] pads [1, 1, 1, 2] fill 0 (index map, no copy)" in text


def test_avg_pool_with_its_count_as_a_kernel_input() -> None:
    """Regression: the window's table block arguments were named like the kernel's input tensors
    (%t1: here the per-position count, too large to clone into the region), which failed to parse."""
    x = rand(1, 2, 32, 32)
    f = fb.jit(lambda x: nn.avg_pool(x, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1)))
    close(f(x), onnx_ref("AveragePool", [x], kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)))
    text = _explain(f, x)
    assert "region @fused_window_reduce_sum_div (FusedOpId" in text and "compile failed" not in text


def test_conv_transpose_jit_matches_onnx() -> None:
    x, w, b = rand(1, 2, 4, 5), rand(2, 3, 3, 3), rand(3)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 0))
    f = fb.jit(lambda x, w, b: nn.conv_transpose(x, w, b, **kw))
    close(f(x, w, b), onnx_ref("ConvTranspose", [x, w, b], strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 0)))
    assert "lhs_dilation [2, 2] pads [1, 1, 2, 1]" in _explain(f, x, w, b)


@long_only
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_jit_every_geometry(case) -> None:
    xs, ws, s, p, d, g = case
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    f = fb.jit(lambda x, w, b: nn.conv(x, w, b, strides=s, pads=p, dilations=d, groups=g))
    close(f(x, w, b), onnx_ref("Conv", [x, w, b], strides=s, pads=p, dilations=d, group=g))


@long_only
@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv_transpose_jit_every_geometry(case) -> None:
    xs, ws, s, p, d, g, op = case
    x, w, b = rand(*xs), rand(*ws), rand(ws[1] * g)
    f = fb.jit(lambda x, w, b: nn.conv_transpose(x, w, b, strides=s, pads=p, dilations=d, groups=g,
                                                 output_padding=op))
    close(f(x, w, b), transpose_ref(x, w, b, g, strides=s, pads=p, dilations=d, output_padding=op))


@long_only
@pytest.mark.parametrize("include", [0, 1])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pools_jit_every_geometry(case, include) -> None:
    xs, k, s, p, d, ceil = case
    x = rand(*xs)
    mp = fb.jit(lambda x: nn.max_pool(x, k, strides=s, pads=p, dilations=d, ceil_mode=bool(ceil)))
    close(mp(x), onnx_ref("MaxPool", [x], kernel_shape=k, strides=s, pads=p, dilations=d, ceil_mode=ceil), 0, 0)
    if d == (1,) * len(k):
        ap = fb.jit(lambda x: nn.avg_pool(x, k, strides=s, pads=p, ceil_mode=bool(ceil),
                                          count_include_pad=bool(include)))
        close(ap(x), onnx_ref("AveragePool", [x], kernel_shape=k, strides=s, pads=p, ceil_mode=ceil,
                              count_include_pad=include))


@pytest.mark.parametrize("dtype", [np.int32, np.float16])
def test_max_pool_jit_keeps_integer_and_half_dtypes(dtype) -> None:
    """The fill is the dtype's lowest value (int32's minimum; float16's -inf, written by its bits)."""
    x = (RNG.standard_normal((1, 2, 9, 9)) * 50).astype(dtype)
    f = fb.jit(lambda x: nn.max_pool(x, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1)))
    got, want = f(x), nn.max_pool(x, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    assert got.dtype == want.dtype == dtype and np.array_equal(got, want)
    assert np.array_equal(want, onnx_ref("MaxPool", [x.astype(np.float32)], kernel_shape=(3, 3), strides=(2, 2),
                                         pads=(1, 1, 1, 1)).astype(dtype))
    text = _explain(f, x)
    assert "region @fused_window_reduce_max (FusedOpId" in text and "compile failed" not in text


def test_vmap_over_a_max_pool_batches_the_window() -> None:
    """prim.window's batching rule (api/vmap_rules.py): a vmapped axis is one more leading dim."""
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((3, 1, 2, 5, 6), dtype=np.float32)
    f = fb.jit(fb.vmap(lambda x: nn.max_pool(x, [2, 2], strides=[1, 2], pads=[1, 0, 0, 1])))
    got = f(xs)
    want = np.stack([nn.max_pool(x, [2, 2], strides=[1, 2], pads=[1, 0, 0, 1]) for x in xs])
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_fused_arm_equals_arm_0_for_conv_and_pooling() -> None:
    """verify=True runs each region's primitives (arm 0) beside its fused kernel and raises on a
    difference: the window's lowering against its reference, inside a conv and the poolings."""
    w, b = rand(6, 2, 3, 3), rand(6)
    fns = [lambda x: np.maximum(nn.conv(x, w, b, strides=(2, 1), pads=(1, 1, 0, 2), groups=2), 0),
           lambda x: nn.max_pool(x, [3, 2], strides=[2, 1], pads=[1, 0, 1, 1], ceil_mode=True),
           lambda x: nn.avg_pool(x, [2, 3], pads=[1, 1, 0, 1], count_include_pad=False)]
    eager = [fn(X2) for fn in fns]
    for fn, want in zip(fns, eager):
        got = fb.jit(fn, verify=True)(X2)
        assert got.shape == want.shape and got.dtype == want.dtype
        close(got, want)
