"""Optimize-time rewrites of the ONNX graph (fusebind/onnx/fold.py) and the shape arithmetic the
handlers fold while tracing (ops_shape.py).

BatchNormalization folding: the folded model has no BatchNormalization, passes onnx.checker and
gives onnxruntime's outputs of the unfolded model (graph optimizations off, so onnxruntime does
not fold it itself); Gemm and MatMul ones also run through fusebind. A BN that is not exactly
foldable (training mode, a producer output used twice or returned, statistics that are inputs,
a Mul that broadcasts along another axis) is left as it is. Shape folding: a PyTorch-style
Flatten (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) and a view with -1 trace to IR with no
shape op and no kernel for one."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fusebind.onnx import fold
from fusebind.onnx.importer import TARGET_OPSET, import_model

ort = pytest.importorskip("onnxruntime")

F32 = TensorProto.FLOAT
RNG = np.random.default_rng(16)
C = 6  # channels


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _bn_params(prefix="bn", c=C, dtype=np.float32, uniform=False):
    if uniform:  # the `light` models' statistics: one value everywhere
        return [_init(f"{prefix}_{k}", np.full(c, 0.02, dtype)) for k in ("scale", "b", "mean", "var")]
    r = np.random.default_rng(len(prefix) + c)
    return [_init(f"{prefix}_scale", r.uniform(0.5, 2.0, c).astype(dtype)),
            _init(f"{prefix}_b", r.standard_normal(c).astype(dtype)),
            _init(f"{prefix}_mean", r.standard_normal(c).astype(dtype)),
            _init(f"{prefix}_var", r.uniform(0.2, 3.0, c).astype(dtype))]


def _bn(x, y, prefix="bn", **attrs):
    return helper.make_node("BatchNormalization", [x] + [f"{prefix}_{k}" for k in ("scale", "b", "mean", "var")],
                            [y], epsilon=1e-3, **attrs)


def _model(nodes, inputs, outputs, inits, opset=TARGET_OPSET, ir_version=None):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F32, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, F32, s) for n, s in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        m.ir_version = ir_version
    return m


def _ort(m, *arrays):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    return s.run(None, dict(zip(names, arrays)))


def _ops(m):
    return collections.Counter(n.op_type for n in m.graph.node)


def _folded(m, *arrays, rtol=2e-5, atol=2e-5):
    """fold.rewrite(m): valid, no BatchNormalization, onnxruntime's outputs of `m`."""
    before = m.SerializeToString()
    r = fold.rewrite(m)
    assert m.SerializeToString() == before  # (the caller's model is never mutated)
    onnx.checker.check_model(r)
    assert _ops(r)["BatchNormalization"] == 0
    for got, want in zip(_ort(r, *arrays), _ort(m, *arrays)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return r


X4 = RNG.standard_normal((2, 4, 5, 5)).astype(np.float32)
X2 = RNG.standard_normal((3, 8)).astype(np.float32)


def _conv_model(bias=True, group=1, relu=True, weights_as="init", uniform_bn=False):
    w = RNG.standard_normal((C, 4 // group, 3, 3)).astype(np.float32)
    inits = _bn_params(uniform=uniform_bn) + [_init("b", RNG.standard_normal(C).astype(np.float32))] * bias
    nodes = []
    if weights_as == "constant_of_shape":  # the `light` models' way of making a weight
        inits.append(_init("w_shape", np.array(w.shape, np.int64)))
        nodes.append(helper.make_node("ConstantOfShape", ["w_shape"], ["w"],
                                      value=helper.make_tensor("v", F32, [1], [0.05])))
    else:
        inits.append(_init("w", w))
    nodes.append(helper.make_node("Conv", ["x", "w"] + ["b"] * bias, ["c"], pads=[1, 1, 1, 1], group=group))
    nodes.append(_bn("c", "n" if relu else "y"))
    if relu:
        nodes.append(helper.make_node("Relu", ["n"], ["y"]))
    return _model(nodes, [("x", [2, 4, 5, 5])], [("y", [2, C, 5, 5])], inits)


@pytest.mark.parametrize("bias,group", [(True, 1), (False, 2)])
def test_bn_folds_into_conv(bias, group):
    m = _conv_model(bias, group)
    r = _folded(m, X4)
    assert _ops(r) == {"Conv": 1, "Relu": 1}
    (conv,) = [n for n in r.graph.node if n.op_type == "Conv"]
    assert len(conv.input) == 3 and conv.output[0] == "n"
    # the old weight and the BN's parameters are gone, not left as dead values
    assert {t.name for t in r.graph.initializer} == set(conv.input[1:])


def test_light_model_weights_fold_and_stay_constant_of_shape():
    # a ConstantOfShape weight and one-valued statistics (the `light` models): the folded weight
    # is one value too, so it stays a ConstantOfShape (a numpy constant of the trace, whose equal
    # filters the Conv handler computes once), and the old one is gone
    m = _conv_model(bias=False, weights_as="constant_of_shape", uniform_bn=True)
    r = _folded(m, X4)
    assert _ops(r) == {"ConstantOfShape": 2, "Conv": 1, "Relu": 1}  # (the weight's and the bias's)
    (conv,) = [n for n in r.graph.node if n.op_type == "Conv"]
    made = {n.output[0]: n for n in r.graph.node if n.op_type == "ConstantOfShape"}
    assert set(conv.input[1:]) == set(made)
    assert {t.name for t in r.graph.initializer} == {n.input[0] for n in made.values()}
    # equal filters with channels the BN scales differently: folding would make F distinct
    # filters (F times the conv's work), so the BN stays
    _unchanged(_conv_model(bias=False, weights_as="constant_of_shape"))


def test_bn_fold_rounds_once_from_float64():
    m = _conv_model(bias=True, relu=False)
    r = fold.rewrite(m)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    new = {t.name: numpy_helper.to_array(t) for t in r.graph.initializer}
    (conv,) = r.graph.node
    scale, beta, mean, var = (inits[f"bn_{k}"].astype(np.float64) for k in ("scale", "b", "mean", "var"))
    s = scale / np.sqrt(var + np.float32(1e-3).astype(np.float64))
    w_want = (inits["w"].astype(np.float64) * s[:, None, None, None]).astype(np.float32)
    b_want = ((inits["b"].astype(np.float64) - mean) * s + beta).astype(np.float32)
    assert new[conv.input[1]].dtype == np.float32
    assert list(conv.input) == ["x", "w", "b"]  # (each replaced in place: the weight keeps its name)
    np.testing.assert_array_equal(new[conv.input[1]], w_want)
    np.testing.assert_array_equal(new[conv.input[2]], b_want)


def test_bn_folds_into_conv_transpose_with_groups():
    w = RNG.standard_normal((4, C // 2, 3, 3)).astype(np.float32)  # (C_in, C_out / group, k, k)
    m = _model([helper.make_node("ConvTranspose", ["x", "w"], ["c"], group=2), _bn("c", "y")],
               [("x", [2, 4, 5, 5])], [("y", [2, C, 7, 7])], _bn_params() + [_init("w", w)])
    r = _folded(m, X4)
    assert _ops(r) == {"ConvTranspose": 1}


def _gemm_model(trans_b=1, alpha=0.5, beta=2.0, c_shape=(C,)):
    w = RNG.standard_normal((C, 8) if trans_b else (8, C)).astype(np.float32)
    inits = _bn_params() + [_init("w", w)]
    ins = ["x", "w"]
    if c_shape is not None:
        inits.append(_init("c0", RNG.standard_normal(c_shape).astype(np.float32)))
        ins.append("c0")
    nodes = [helper.make_node("Gemm", ins, ["g"], transB=trans_b, alpha=alpha, beta=beta), _bn("g", "y")]
    return _model(nodes, [("x", [3, 8])], [("y", [3, C])], inits)


@pytest.mark.parametrize("trans_b,alpha,beta,c_shape", [(1, 0.5, 2.0, (C,)), (0, 1.0, 1.0, None),
                                                        (0, 1.5, 0.5, (3, 1))])
def test_bn_folds_into_gemm(trans_b, alpha, beta, c_shape):
    m = _gemm_model(trans_b, alpha, beta, c_shape)
    r = _folded(m, X2)
    assert _ops(r) == {"Gemm": 1}


def test_folded_gemm_through_fusebind_matches_unfolded():
    m = _gemm_model()
    want = _ort(m, X2)[0]
    got = import_model(m).run(X2)[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_bn_folds_into_matmul_and_its_bias_add():
    w = RNG.standard_normal((8, C)).astype(np.float32)
    inits = _bn_params() + [_init("w", w), _init("bias", RNG.standard_normal(C).astype(np.float32))]
    with_add = _model([helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["bias", "mm"], ["a"]),
                       _bn("a", "y")], [("x", [3, 8])], [("y", [3, C])], inits)
    bare = _model([helper.make_node("MatMul", ["x", "w"], ["mm"]), _bn("mm", "y")],
                  [("x", [3, 8])], [("y", [3, C])], inits[:-1])
    assert _ops(_folded(with_add, X2)) == {"MatMul": 1, "Add": 1}
    assert _ops(_folded(bare, X2)) == {"MatMul": 1, "Add": 1}


def test_bn_mul_add_chain_absorbed_then_folded():
    # densenet / inception-v2 (opset 9): BN -> Mul(Unsqueeze(w)) -> Add(Unsqueeze(b)), w and b
    # per-channel constants made by ConstantOfShape
    def per_channel(name, value):
        return [helper.make_node("ConstantOfShape", [f"{name}_shape"], [f"{name}_vec"],
                                 value=helper.make_tensor("v", F32, [1], [value])),
                helper.make_node("Unsqueeze", [f"{name}_vec"], [name], axes=[1, 2])]
    w = RNG.standard_normal((C, 4, 1, 1)).astype(np.float32)
    inits = _bn_params() + [_init("w", w), _init("m_shape", np.array([C], np.int64)),
                            _init("a_shape", np.array([C], np.int64))]
    nodes = ([helper.make_node("Conv", ["x", "w"], ["c"])] + per_channel("m", 1.5) + per_channel("a", -0.25)
             + [_bn("c", "n"), helper.make_node("Mul", ["n", "m"], ["p"]), helper.make_node("Add", ["p", "a"], ["y"])])
    m = _model(nodes, [("x", [2, 4, 5, 5])], [("y", [2, C, 5, 5])], inits, opset=9, ir_version=3)
    for i in inits:  # (IR 3: every initializer is also a graph input)
        m.graph.input.append(helper.make_tensor_value_info(i.name, i.data_type, i.dims))
    r = _folded(m, X4)
    assert _ops(r) == {"Conv": 1}
    assert {i.name for i in r.graph.input} == {"x"} | {t.name for t in r.graph.initializer}


def test_bn_chain_without_producer_becomes_one_mul_and_add():
    inits = _bn_params() + [_init("m", np.full((C, 1, 1), 1.5, np.float32)), _init("a", np.float32(0.5))]
    m = _model([_bn("x", "n"), helper.make_node("Mul", ["m", "n"], ["p"]), helper.make_node("Add", ["p", "a"], ["y"])],
               [("x", [2, 4 + 2, 5, 5])], [("y", [2, C, 5, 5])], inits)
    x = RNG.standard_normal((2, C, 5, 5)).astype(np.float32)
    assert _ops(_folded(m, x)) == {"Mul": 1, "Add": 1}


def _unchanged(m):
    assert fold.rewrite(m) is m


def test_unfoldable_bn_is_left_alone():
    # a lone BN on an input: nothing to fold it into
    _unchanged(_model([_bn("x", "y")], [("x", [2, C, 5, 5])], [("y", [2, C, 5, 5])], _bn_params()))
    # the conv's output is used twice / is a graph output
    m = _conv_model(relu=False)
    m.graph.node.append(helper.make_node("Relu", ["c"], ["z"]))
    m.graph.output.append(helper.make_tensor_value_info("z", F32, [2, C, 5, 5]))
    _unchanged(m)
    m = _conv_model(relu=False)
    m.graph.output.append(helper.make_tensor_value_info("c", F32, [2, C, 5, 5]))
    _unchanged(m)
    # the statistics are a graph input (not a constant)
    m = _conv_model(relu=False)
    var = [i for i in m.graph.initializer if i.name == "bn_var"][0]
    m.graph.initializer.remove(var)
    m.graph.input.append(helper.make_tensor_value_info("bn_var", F32, [C]))
    _unchanged(m)
    # training mode (with its running-statistics outputs)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "bn_scale", "bn_b", "bn_mean", "bn_var"],
                              ["y", "rm", "rv"], training_mode=1)]
    w = _init("w", RNG.standard_normal((C, 4, 1, 1)).astype(np.float32))
    _unchanged(_model(nodes, [("x", [2, 4, 5, 5])], [("y", None), ("rm", None), ("rv", None)], _bn_params() + [w]))


def test_chain_stops_at_a_mul_along_another_axis():
    # a (1, 1, 1, 5) multiplier scales the width axis, not the channels: not part of the BN
    inits = _bn_params() + [_init("m", RNG.standard_normal((1, 1, 1, 5)).astype(np.float32)),
                            _init("w", RNG.standard_normal((C, 4, 1, 1)).astype(np.float32))]
    m = _model([helper.make_node("Conv", ["x", "w"], ["c"]), _bn("c", "n"), helper.make_node("Mul", ["n", "m"], ["y"])],
               [("x", [2, 4, 5, 5])], [("y", [2, C, 5, 5])], inits)
    r = _folded(m, X4)
    assert _ops(r) == {"Conv": 1, "Mul": 1}


# --------------------------------------------------------------------------- shape subgraphs


def _i64(name, values):
    return helper.make_node("Constant", [], [name],
                            value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values))


def _shape_ops_gone(m, x):
    imported = import_model(m)
    text = str(imported.mlir(x))
    for op in ("prim.gather", "prim.concat", "prim.slice", "prim.cast", "prim.broadcast"):
        assert op not in text
    return imported, text


def test_pytorch_flatten_folds_to_one_reshape():
    # torch.flatten(x, 1) as the exporter writes it, and the batch size Cast to float and used
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             _i64("ax", [0]), helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             _i64("m1", [-1]), helper.make_node("Concat", ["n1", "m1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y0"]),
             helper.make_node("Cast", ["n"], ["nf"], to=F32),
             helper.make_node("Mul", ["y0", "nf"], ["y"])]
    m = _model(nodes, [("x", ["N", 4, 5, 5])], [("y", None)], [])
    imported, text = _shape_ops_gone(m, X4)
    assert "prim.reshape" in text and "tensor<2x100xf32>" in text
    assert "dense<2.0" in text  # the batch size is a constant of the trace
    np.testing.assert_array_equal(imported.run(X4)[0], X4.reshape(2, -1) * 2)
    np.testing.assert_array_equal(imported.run(X4[:1])[0], X4[:1].reshape(1, -1))  # (retraced: N is 1 now)
    explained = str(imported.explain(X4))
    assert "no fused regions" in explained and "prim.reshape: shape-only op" in explained


def test_view_from_sliced_shape_and_constant_of_shape_fold():
    # x.view(x.shape[:2] + (-1,)) + zeros(x.shape[2:]-style): Slice of a Shape, Concat, a
    # ConstantOfShape from a computed shape
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             _i64("st", [0]), _i64("en", [2]), helper.make_node("Slice", ["s", "st", "en"], ["s2"]),
             _i64("m1", [-1]), helper.make_node("Concat", ["s2", "m1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["v"]),
             helper.make_node("Shape", ["v"], ["vs"]),
             helper.make_node("ConstantOfShape", ["vs"], ["ones"], value=helper.make_tensor("o", F32, [1], [1.0])),
             helper.make_node("Add", ["v", "ones"], ["y"])]
    m = _model(nodes, [("x", [2, 4, 5, 5])], [("y", None)], [])
    imported, text = _shape_ops_gone(m, X4)
    np.testing.assert_array_equal(imported.run(X4)[0], X4.reshape(2, 4, -1) + 1)


def test_gemm_alpha_and_beta_fold_into_constant_operands():
    m = _gemm_model(trans_b=1, alpha=0.5, beta=2.0, c_shape=(C,))
    m.graph.node.remove(m.graph.node[1])  # the Gemm alone (no BN)
    m.graph.node[0].output[0] = "y"
    r = fold.rewrite(m)
    onnx.checker.check_model(r)
    (gemm,) = r.graph.node
    assert {a.name for a in gemm.attribute} == {"transB"}
    np.testing.assert_allclose(_ort(r, X2)[0], _ort(m, X2)[0], rtol=2e-6, atol=2e-6)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    new = {t.name: numpy_helper.to_array(t) for t in r.graph.initializer}
    np.testing.assert_array_equal(new[gemm.input[1]], (inits["w"].astype(np.float64) * 0.5).astype(np.float32))
    # alpha with both matrices traced stays the Gemm's (the handler's epilogue multiply)
    m2 = _model([helper.make_node("Gemm", ["x", "w"], ["y"], alpha=0.5)], [("x", [3, 8]), ("w", [8, C])],
                [("y", [3, C])], [])
    _unchanged(m2)


def test_folded_conv_through_fusebind_matches_the_unfolded_model():
    m = _conv_model(bias=True, group=1)
    want = _ort(m, X4)[0]
    got = import_model(m).run(X4)[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_multi_head_view_with_shape_arithmetic_folds():
    # x.view(B, S, H, D // H).transpose(1, 2) + arange(S)[:, None], as an exporter writes it: Gather
    # of dims, an integer Div, Concat, a Where(Equal(t, 0)) guard on the target, Range, Cast
    def k(name, v):
        dims = [len(v)] if isinstance(v, list) else []
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(
            name, TensorProto.INT64, dims, v if isinstance(v, list) else [v]))
    nodes = [k("i0", 0), k("i1", 1), k("i2", 2), k("h", [4]), k("hs", 4), k("ax0", [0]), k("ax1", [1]),
             k("zero", [0]), k("one", [1]), helper.make_node("Shape", ["x"], ["s"])]
    nodes += [helper.make_node("Gather", ["s", i], [o], axis=0) for i, o in (("i0", "b"), ("i1", "sq"), ("i2", "d"))]
    nodes += [helper.make_node("Div", ["d", "hs"], ["dh"])]
    nodes += [helper.make_node("Unsqueeze", [i, "ax0"], [i + "1"]) for i in ("b", "sq", "dh")]
    nodes += [helper.make_node("Concat", ["b1", "sq1", "h", "dh1"], ["t"], axis=0),
              helper.make_node("Equal", ["t", "zero"], ["isz"]), helper.make_node("Where", ["isz", "one", "t"], ["t2"]),
              helper.make_node("Reshape", ["x", "t2"], ["v"]), helper.make_node("Transpose", ["v"], ["vt"], perm=[0, 2, 1, 3]),
              helper.make_node("Range", ["i0", "sq", "i1"], ["pos"]), helper.make_node("Cast", ["pos"], ["pf"], to=F32),
              helper.make_node("Unsqueeze", ["pf", "ax1"], ["pu"]), helper.make_node("Add", ["vt", "pu"], ["y"])]
    m = _model(nodes, [("x", ["B", "S", 16])], [("y", ["B", 4, "S", 4])], [])
    x = RNG.standard_normal((2, 3, 16)).astype(np.float32)
    imported, text = _shape_ops_gone(m, x)
    assert "i64" not in text  # no shape value is computed at run time
    ops = [line.split("=")[1].split()[0] for line in text.splitlines() if " = prim." in line]
    assert ops == ["prim.reshape", "prim.transpose", "prim.constant", "prim.add"]
    want = x.reshape(2, 3, 4, 4).transpose(0, 2, 1, 3) + np.arange(3, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(imported.run(x)[0], want)
