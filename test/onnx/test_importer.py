"""The ONNX importer (fusebind/onnx/importer.py), the math handlers (ops_math.py) and the backend
module (backend.py): values against the ONNX meaning (the reference evaluator or hand-written
numpy where ONNX and numpy differ), refusals with node, op and opset, and the prepare contract.
Shapes and dtypes are shared across tests so the kernels are compiled once."""

from __future__ import annotations

import os
import unittest
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.runner import BackendIsNotSupposedToImplementIt
from onnx.reference import ReferenceEvaluator

import fusebind.onnx.backend as backend
from fusebind.onnx.importer import TARGET_OPSET, import_model
from fusebind.onnx.registry import HANDLERS, UnsupportedModel

F32, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
LONG = os.environ.get("FUSEBIND_LONG", "").strip().lower() in ("1", "true", "yes", "on")
#: tests whose ops the conformance slice (or its FUSEBIND_LONG=1 run) covers too: long runs only
long_only = pytest.mark.skipif(not LONG, reason="compiles kernels the conformance run covers; FUSEBIND_LONG=1 runs it")


def model(nodes, inputs, outputs, opset=TARGET_OPSET, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def reference(m, *arrays):
    names = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(m).run(None, dict(zip(names, arrays)))


def check(m, *arrays, rtol=1e-6):
    got = backend.prepare(m).run(list(arrays))
    want = reference(m, *arrays)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=0)
    return got


A = np.array([[7, -7, 7, -7, 0, 5], [9, -9, -1, 1, 6, -6]], dtype=np.int32)
B = np.array([[2, 2, -2, -2, 3, 4], [4, 4, 3, -3, -4, 5]], dtype=np.int32)
X = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)


def test_integer_div_truncates_toward_zero():
    m = model([helper.make_node("Div", ["a", "b"], ["y"])], [("a", I32, [2, 6]), ("b", I32, [2, 6])],
              [("y", I32, [2, 6])])
    (y,) = check(m, A, B)
    assert y.tolist() == (np.trunc(A / B)).astype(np.int32).tolist()  # -7 / 2 is -3 (numpy's // gives -4)


@pytest.mark.parametrize("fmod", [0, 1])  # the remainder kernels of int32
def test_mod_follows_fmod(fmod):
    m = model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], [("a", I32, [2, 6]), ("b", I32, [2, 6])],
              [("y", I32, [2, 6])])
    (y,) = check(m, A, B)
    assert y.tolist() == (np.fmod(A, B) if fmod else np.remainder(A, B)).tolist()


def test_reduction_axes_given_as_an_input_specialize_the_function():
    m = model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
              [("x", F32, [2, 6]), ("axes", I64, [1])], [("y", F32, None)])
    rep = backend.prepare(m)
    for axis in (0, 1, 0):
        (y,) = rep.run([X, np.array([axis], np.int64)])
        np.testing.assert_allclose(y, X.sum(axis=axis), rtol=1e-6)
    assert rep.imported.params == {"axes"} and len(rep.imported._fns) == 2  # one trace per axes value


def test_argmax_select_last_index_and_reductions_keep_the_dtype():
    t = np.array([[1, 3, 3, 0, 3, 1], [2, 2, 0, 1, 0, 2]], dtype=np.int32)
    m = model([helper.make_node("ArgMax", ["x"], ["i"], axis=1, select_last_index=1),
               helper.make_node("ReduceMean", ["x"], ["mean"], keepdims=1),
               helper.make_node("ReduceProd", ["x"], ["prod"], keepdims=0)],
              [("x", I32, [2, 6])], [("i", I64, None), ("mean", I32, None), ("prod", I32, None)])
    i, mean, prod = check(m, t)
    assert i.ravel().tolist() == [4, 5] and mean.dtype == np.int32 and prod.dtype == np.int32


def test_gemm_attributes_and_a_large_initializer_is_an_argument():
    w = np.random.default_rng(1).standard_normal((6, 800)).astype(np.float32)  # 4800 elements > CONST_LIMIT
    c = np.arange(800, dtype=np.float32)
    m = model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], alpha=0.5, beta=2.0)],
              [("x", F32, [2, 6])], [("y", F32, [2, 800])],
              inits=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")])
    imported = import_model(m)
    assert imported.weight_names == ["w"] and set(imported.constants) == {"c"}
    check(m, X, rtol=1e-5)


@long_only
def test_cast_pow_clip_where_against_the_reference():
    m = model([helper.make_node("Cast", ["a"], ["af"], to=F32),
               helper.make_node("Pow", ["x", "a"], ["p"]),
               helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
               helper.make_node("Greater", ["x", "af"], ["g"]),
               helper.make_node("Where", ["g", "x", "af"], ["w"])],
              [("x", F32, [2, 6]), ("a", I32, [2, 6])],
              [("af", F32, None), ("p", F32, None), ("c", F32, None), ("g", TensorProto.BOOL, None),
               ("w", F32, None)],
              inits=[numpy_helper.from_array(np.float32(-0.5), "lo"), numpy_helper.from_array(np.float32(0.5), "hi")])
    check(m, X, A, rtol=1e-5)


def test_an_old_model_is_upgraded_to_the_target_opset():
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])],
              [("x", F32, [2, 6])], [("y", F32, [2, 6])], opset=9)
    rep = backend.prepare(m)
    assert rep.imported.opset == TARGET_OPSET
    np.testing.assert_allclose(rep.run([X])[0], 1 / (1 + np.exp(-np.maximum(X, 0))), rtol=1e-6)


def test_a_rep_compiles_once_and_runs_many_times():
    m = model([helper.make_node("Abs", ["x"], ["y"])], [("x", F32, [2, 6])], [("y", F32, [2, 6])])
    rep = backend.prepare(m)
    for _ in range(3):
        np.testing.assert_array_equal(rep.run([X])[0], np.abs(X))
    (fn,) = rep.imported._fns.values()
    assert fn.stats.traces == 1 and fn.stats.calls == 4  # prepare's compile on zeros, then three runs


def test_an_unsupported_op_is_a_skip_naming_node_op_and_opset():
    m = model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", F32, [2, 6])], [("y", I64, None)])
    with pytest.raises(UnsupportedModel, match=r"node 'nz' \(NonZero, opset 21\): a data-dependent output shape"):
        import_model(m)
    with pytest.raises(unittest.SkipTest) as e:
        backend.prepare(m)
    assert not isinstance(e.value, BackendIsNotSupposedToImplementIt)
    m = model([helper.make_node("Hardmax2", ["x"], ["y"], name="h")], [("x", F32, [2, 6])], [("y", F32, None)])
    with pytest.raises(unittest.SkipTest, match=r"node 'h' \(Hardmax2, opset 21\): fusebind does not implement"):
        backend.prepare(m)


def test_a_string_input_is_a_skip_naming_the_type():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [("x", TensorProto.STRING, [2])],
              [("y", TensorProto.STRING, [2])])
    with pytest.raises(unittest.SkipTest, match="the element type STRING is not one fusebind has"):
        backend.prepare(m)


def test_backend_module_surface():
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    m = model([helper.make_node("Neg", ["x"], ["y"])], [("x", F32, [2, 6])], [("y", F32, [2, 6])])
    assert backend.is_compatible(m)
    np.testing.assert_array_equal(backend.run_model(m, [X])[0], -X)
    np.testing.assert_array_equal(backend.run_node(helper.make_node("Neg", ["x"], ["y"]), [X])[0], -X)


def test_the_coverage_doc_claims_what_the_registry_has():
    from pathlib import Path

    from fusebind.onnx.coverage import claim_table, doc_claim_section

    doc = Path(__file__).resolve().parents[2] / "docs" / "ONNX-COVERAGE.md"
    assert doc_claim_section(doc.read_text()) == claim_table(), \
        "regenerate: python -m fusebind.onnx.coverage --claims-only --write docs/ONNX-COVERAGE.md"
    assert f"| Gemm | {HANDLERS[('', 'Gemm')][0].since}.. |" in claim_table()


@long_only
def test_floor_ceil_round_are_numpys():
    x = np.array([[-2.5, -1.5, -0.5, -0.0, 0.5, 1.5], [2.5, 0.49999997, -0.3, 1e30, np.inf, np.nan]], np.float32)
    m = model([helper.make_node("Floor", ["x"], ["f"]), helper.make_node("Ceil", ["x"], ["c"]),
               helper.make_node("Round", ["x"], ["r"])],
              [("x", F32, [2, 6])], [("f", F32, [2, 6]), ("c", F32, [2, 6]), ("r", F32, [2, 6])])
    f, c, r = backend.prepare(m).run([x])
    for got, want in ((f, np.floor(x)), (c, np.ceil(x)), (r, np.rint(x))):  # half to even; -0.0 kept
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want)).all()


@long_only
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_losses_against_the_reference(reduction):
    t = np.array([[0, 2, 5, 1, 3, 4], [5, 1, 0, 2, 2, 3]], np.int64)
    w = np.linspace(0.5, 1.5, 6).astype(np.float32)
    logits = np.random.default_rng(2).standard_normal((2, 6, 6)).astype(np.float32)
    m = model([helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["l", "logp"], reduction=reduction,
                                ignore_index=2),
               helper.make_node("NegativeLogLikelihoodLoss", ["logp", "t"], ["n"], reduction=reduction)],
              [("x", F32, [2, 6, 6]), ("t", I64, [2, 6]), ("w", F32, [6])],
              [("l", F32, None), ("logp", F32, None), ("n", F32, None)])
    check(m, logits, t, w, rtol=1e-5)


def test_quantize_saturates_and_dequantize_per_axis():
    from fusebind.api.capture import SUPPORTED
    if np.dtype(np.uint8) not in SUPPORTED:
        pytest.skip("uint8 is not on (the element table's int_widths family)")
    x = np.array([[-300.0, -1.5, -0.5, 0.5, 2.5, 300.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]], np.float32)
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
               helper.make_node("DequantizeLinear", ["q", "sa", "zp"], ["d"], axis=0)],
              [("x", F32, [2, 6])], [("q", TensorProto.UINT8, [2, 6]), ("d", F32, [2, 6])],
              inits=[numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.uint8(100), "zp"),
                     numpy_helper.from_array(np.array([0.5, 2.0], np.float32), "sa")])
    q, d = check(m, x)
    assert q[0].tolist() == [0, 97, 99, 101, 105, 255]  # rint half to even, then saturation to uint8


@pytest.mark.parametrize("attrs", [dict(mode="cubic", antialias=1),
                                   pytest.param(dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                                                     extrapolation_value=10.0), marks=long_only),
                                   pytest.param(dict(mode="nearest", nearest_mode="ceil"), marks=long_only)])
def test_resize_matches_the_reference(attrs):
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    roi = np.array([0, 0, 0.2, -0.3, 1, 1, 0.9, 1.2], np.float32)
    m = model([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], **attrs)], [("x", F32, [1, 2, 3, 4])],
              [("y", F32, None)], inits=[numpy_helper.from_array(roi, "roi"),
                                         numpy_helper.from_array(np.array([1, 1, 0.7, 1.6], np.float32), "scales")])
    check(m, x, rtol=1e-5)


def test_dft_and_a_window_against_the_reference():
    sig = np.random.default_rng(3).standard_normal((2, 6, 1)).astype(np.float32)
    m = model([helper.make_node("DFT", ["x", "", "axis"], ["y"], onesided=1),
               helper.make_node("HannWindow", ["n"], ["w"], periodic=0)],
              [("x", F32, [2, 6, 1]), ("n", I64, [])], [("y", F32, None), ("w", F32, None)],
              inits=[numpy_helper.from_array(np.array(1, np.int64), "axis")])
    y, w = check(m, sig, np.array(5, np.int64), rtol=1e-5)
    assert y.shape == (2, 4, 2) and w.shape == (5,)


@pytest.mark.parametrize("largest", [1, pytest.param(0, marks=long_only)])
def test_topk_sorted_ties_to_the_lower_index(largest):
    x = np.array([[3, 1, 3, 2, 1, 3], [0, 5, 5, 1, 0, 2]], np.int32)
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)],
              [("x", I32, [2, 6])], [("v", I32, None), ("i", I64, None)],
              inits=[numpy_helper.from_array(np.array([4], np.int64), "k")])
    v, i = check(m, x)
    assert i[0].tolist() == ([0, 2, 5, 3] if largest else [1, 4, 3, 0])
