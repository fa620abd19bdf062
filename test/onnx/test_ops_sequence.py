"""ONNX sequences inside a graph (fusebind/onnx/ops_sequence.py and the importer's sequence rules):
each op in a small graph whose inputs and outputs are tensors, against onnx's ReferenceEvaluator
(traced tensors, and folded when every tensor is constant); positions as constants and as graph
inputs that specialize the function; the refusals with their exact messages; and the 8 `simple`
sequence models of the backend suite by name, at the suite's tolerances. The graphs share the
(2, 3, 4) float32 inputs, so their few kernels are compiled once."""

from __future__ import annotations

import os
import unittest
import warnings

import numpy as np
import onnx
import onnx.backend.test
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import fusebind.onnx.backend as backend
from fusebind.dialect.errors import FusebindIndexError, FusebindValueError
from fusebind.onnx.importer import TARGET_OPSET, import_model
from fusebind.onnx.registry import UnsupportedModel

F32, F64, I32, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64
RNG = np.random.default_rng(16)
X, Y, Z = (RNG.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
XYZ = [("x", F32, [2, 3, 4]), ("y", F32, [2, 3, 4]), ("z", F32, [2, 3, 4])]
SEQ_BOUNDARY = ("a graph input or output of sequence type (fusebind's graph inputs and outputs are tensors; "
                "sequences only inside a graph)")


def n(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], **attrs)


def i64(name, v):
    """A position or split initializer (a scalar, or a list)."""
    return numpy_helper.from_array(np.array(v, np.int64), name)


def model(nodes, inputs, outputs, inits=(), opset=TARGET_OPSET, value_info=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], list(inits),
                          value_info=list(value_info))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def reference(m, feeds):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(m).run(None, feeds)


def check(m, feeds):
    """fusebind's outputs equal the reference evaluator's: values, dtype and shape."""
    got = import_model(m).run(*feeds.values())
    want = reference(m, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)
    return got


# --------------------------------------------------------------------------- each op against the reference


CASES = [
    ("construct_at", [n("SequenceConstruct", ["x", "y", "z"], ["s"]), n("SequenceAt", ["s", "m1"], ["a"]),
                      n("SequenceAt", ["s", "p0"], ["b"])], [i64("m1", -1), i64("p0", 0)]),
    ("empty_insert_concat", [n("SequenceEmpty", [], ["e"]), n("SequenceInsert", ["e", "x"], ["s1"]),
                             n("SequenceInsert", ["s1", "y", "p0"], ["s2"]),
                             n("SequenceInsert", ["s2", "z", "m1"], ["s3"]),
                             n("ConcatFromSequence", ["s3"], ["c"], axis=0), n("SequenceLength", ["s3"], ["len"])],
     [i64("p0", 0), i64("m1", -1)]),
    ("erase_length", [n("SequenceConstruct", ["x", "y", "z"], ["s"]), n("SequenceErase", ["s"], ["s1"]),
                      n("SequenceErase", ["s1", "p0"], ["s2"]), n("SequenceAt", ["s2", "p0"], ["a"]),
                      n("SequenceLength", ["s2"], ["len"])], [i64("p0", 0)]),
    ("split_scalar_ragged", [n("SplitToSequence", ["x", "three"], ["s"], axis=2),
                             n("SequenceAt", ["s", "m1"], ["last"]),
                             n("SequenceAt", ["s", "p0"], ["first"]), n("SequenceLength", ["s"], ["len"])],
     [i64("three", 3), i64("m1", -1), i64("p0", 0)]),
    ("split_sizes_concat_neg_axis", [n("SplitToSequence", ["x", "sizes"], ["s"], axis=-2),
                                     n("SequenceAt", ["s", "p1"], ["b"]),
                                     n("ConcatFromSequence", ["s"], ["c"], axis=-2)],
     [i64("sizes", [1, 2]), i64("p1", 1)]),
    ("split_ones_nokeepdims_stack_last", [n("SplitToSequence", ["x"], ["s"], axis=-1, keepdims=0),
                                          n("ConcatFromSequence", ["s"], ["c"], axis=-1, new_axis=1),
                                          n("SequenceAt", ["s", "p1"], ["b"])], [i64("p1", 1)]),
    ("split_ones_keepdims_stack_0", [n("SplitToSequence", ["x"], ["s"], axis=1),
                                     n("ConcatFromSequence", ["s"], ["c"], axis=0, new_axis=1)], []),
    ("stack_middle_of_three", [n("SequenceConstruct", ["x", "y", "z"], ["s"]),
                               n("ConcatFromSequence", ["s"], ["c"], axis=-2, new_axis=1)], []),
]


@pytest.mark.parametrize("folded", [False, True], ids=["traced", "folded"])
@pytest.mark.parametrize("name, nodes, inits", CASES, ids=[c[0] for c in CASES])
def test_each_op_against_the_reference(name, nodes, inits, folded):
    """Traced: x, y, z are graph inputs; folded: they are (small) initializers, so every sequence holds
    constants and the ops run on numpy at import."""
    outs = [o for node in nodes for o in node.output if node.op_type not in
            ("SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase", "SplitToSequence")]
    feeds = {"x": X, "y": Y, "z": Z}
    if folded:
        inits = list(inits) + [numpy_helper.from_array(v, k) for k, v in feeds.items()]
        m, feeds = model(nodes, [], [(o, TensorProto.UNDEFINED, None) for o in outs], inits), {}
    else:
        m = model(nodes, XYZ, [(o, TensorProto.UNDEFINED, None) for o in outs], inits)
    check(m, feeds)


def test_folded_when_every_tensor_is_constant():
    """Constant tensors (small initializers) fold through the sequence ops into numpy constants."""
    nodes = [n("SplitToSequence", ["w", "sizes"], ["s"], axis=0), n("SequenceInsert", ["s", "w"], ["s1"]),
             n("ConcatFromSequence", ["s1"], ["c"], axis=0), n("SequenceAt", ["s1", "p1"], ["b"]),
             n("Add", ["c", "c"], ["cc"])]
    w = numpy_helper.from_array(np.arange(12, dtype=np.int32).reshape(3, 4), "w")
    m = model(nodes, [], [("cc", I32, None), ("b", I32, None)], [w, i64("sizes", [2, 1]), i64("p1", 1)])
    cc, b = check(m, {})
    np.testing.assert_array_equal(b, [[8, 9, 10, 11]])


def test_float64_and_int32_sequences_keep_their_dtype():
    nodes = [n("SplitToSequence", ["d"], ["s"], axis=0, keepdims=0), n("SequenceAt", ["s", "p1"], ["a"]),
             n("Cast", ["d"], ["k"], to=I32), n("SequenceConstruct", ["k", "k"], ["t"]),
             n("ConcatFromSequence", ["t"], ["c"], axis=1)]
    m = model(nodes, [("d", F64, [2, 3, 4])], [("a", F64, None), ("c", I32, None)], [i64("p1", 1)])
    a, c = check(m, {"d": (X * 10).astype(np.float64)})
    assert a.shape == (3, 4) and c.shape == (2, 6, 4)


def test_a_position_given_as_a_graph_input_specializes_the_function():
    nodes = [n("SequenceConstruct", ["x", "y", "z"], ["s"]), n("SequenceErase", ["s", "pe"], ["s1"]),
             n("SequenceAt", ["s1", "pa"], ["a"])]
    m = model(nodes, XYZ + [("pe", I64, []), ("pa", I32, [])], [("a", F32, [2, 3, 4])])
    imported = import_model(m)
    assert imported.params == {"pe", "pa"}
    for pe, pa, want in ((0, 0, Y), (0, -1, Z), (2, 1, Y), (1, 1, Z)):
        (a,) = imported.run(X, Y, Z, np.array(pe, np.int64), np.array(pa, np.int32))
        np.testing.assert_array_equal(a, want)
    assert len(imported._fns) == 4  # one function per distinct (pe, pa)


def test_split_sizes_as_a_graph_input_of_a_dynamic_input():
    """test_sequence_model8's shape: a symbolic dim and the split sizes a graph input."""
    nodes = [n("SplitToSequence", ["v", "sizes"], ["s"]), n("SequenceLength", ["s"], ["len"]),
             n("SequenceAt", ["s", "m1"], ["last"])]
    m = model(nodes, [("v", F32, ["n"]), ("sizes", I64, [None])], [("len", I64, []), ("last", F32, None)],
              [i64("m1", -1)])
    imported = import_model(m)
    assert imported.params == {"sizes"} and imported.dynamic
    v = np.arange(5, dtype=np.float32)
    for sizes in ([1, 4], [2, 2, 1], [5]):
        length, last = imported.run(v, np.array(sizes, np.int64))
        assert length.dtype == np.int64 and length.shape == () and int(length) == len(sizes)
        np.testing.assert_array_equal(last, v[5 - sizes[-1]:])


def test_insert_at_the_end_position_appends_as_the_spec_says():
    """SequenceInsert's position may be len(seq): it appends (the reference evaluator's modulo puts
    the tensor first there, against the spec's [-n, n] range)."""
    nodes = [n("SequenceConstruct", ["x", "y"], ["s"]), n("SequenceInsert", ["s", "z", "two"], ["s1"]),
             n("SequenceAt", ["s1", "two"], ["a"])]
    (a,) = import_model(model(nodes, XYZ, [("a", F32, None)], [i64("two", 2)])).run(X, Y, Z)
    np.testing.assert_array_equal(a, Z)


# --------------------------------------------------------------------------- refusals


def _seq_vi(name, elem=F32):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def test_a_sequence_graph_input_is_refused_naming_it():
    m = helper.make_model(helper.make_graph([n("SequenceLength", ["s"], ["len"])], "g", [_seq_vi("s")],
                                            [helper.make_tensor_value_info("len", I64, [])]),
                          opset_imports=[helper.make_opsetid("", TARGET_OPSET)])
    with pytest.raises(UnsupportedModel) as e:
        import_model(m)
    assert str(e.value) == f"value 's': {SEQ_BOUNDARY}"


def test_a_sequence_graph_output_is_refused_declared_or_found_while_tracing():
    nodes = [n("SequenceConstruct", ["x", "y"], ["s"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in XYZ[:2]], [_seq_vi("s")])
    declared = helper.make_model(graph, opset_imports=[helper.make_opsetid("", TARGET_OPSET)])
    with pytest.raises(UnsupportedModel) as e:
        import_model(declared)
    assert str(e.value) == f"value 's': {SEQ_BOUNDARY}"
    undeclared = model(nodes, XYZ[:2], [("s", TensorProto.UNDEFINED, None)])
    with pytest.raises(UnsupportedModel) as e:
        import_model(undeclared).run(X, Y)
    assert str(e.value) == f"value 's': {SEQ_BOUNDARY}"


def test_optionals_and_sequences_of_sequences_are_refused():
    opt = helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(F32, [2])))
    m = helper.make_model(helper.make_graph([n("OptionalHasElement", ["o"], ["h"])], "g", [opt],
                                            [helper.make_tensor_value_info("h", TensorProto.BOOL, [])]),
                          opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(UnsupportedModel) as e:
        import_model(m)
    assert str(e.value) == ("value 'o': a value of optional type (fusebind has tensors, and sequences of tensors "
                            "inside a graph)")
    seq_seq = helper.make_value_info("t", helper.make_sequence_type_proto(
        helper.make_sequence_type_proto(helper.make_tensor_type_proto(F32, None))))
    m = model([n("SequenceConstruct", ["x"], ["s"]), n("SequenceLength", ["s"], ["len"])], XYZ[:1],
              [("len", I64, [])], value_info=[seq_seq])
    with pytest.raises(UnsupportedModel) as e:
        import_model(m)
    assert str(e.value) == "value 't': a sequence of sequence values (fusebind's sequences hold tensors)"


def test_a_sequence_given_to_a_tensor_op_is_refused_at_import_or_while_tracing(monkeypatch):
    # shape inference types the sequence: the import refuses it
    m = model([n("SequenceConstruct", ["x"], ["s"]), n("Relu", ["s"], ["r"])], XYZ[:1], [("r", F32, None)])
    message = ("node 'r' (Relu, opset 21): its input 's' is a sequence; fusebind's Relu takes tensors (sequences "
               "go to the Sequence* ops)")
    with pytest.raises(UnsupportedModel) as e:
        import_model(m)
    assert str(e.value) == message
    # inference gave up (no value_info): tracing refuses it
    from fusebind.onnx import importer

    def gives_up(*args, **kwargs):
        raise onnx.shape_inference.InferenceError("gave up")
    monkeypatch.setattr(importer.shape_inference, "infer_shapes", gives_up)
    imported = import_model(m)
    with pytest.raises(UnsupportedModel) as e:
        imported.run(X)
    assert str(e.value) == message


def test_a_traced_position_is_refused_naming_the_node():
    nodes = [n("SequenceConstruct", ["x", "y"], ["s"]), n("SequenceAt", ["s", "p"], ["a"])]
    m = model(nodes, XYZ[:2], [("a", F32, None)], [i64("p", 1)])
    with pytest.raises(UnsupportedModel) as e:  # const_limit=0: every initializer is a (traced) argument
        import_model(m, const_limit=0).run(X, Y)
    assert str(e.value) == ("node 'a' (SequenceAt, opset 21): the position input is computed from the model's inputs "
                            "(a data-dependent shape or parameter); fusebind needs it constant at import")


def test_a_position_out_of_range_is_an_index_error_naming_the_range():
    nodes = [n("SequenceConstruct", ["x", "y", "z"], ["s"]), n("SequenceAt", ["s", "p"], ["a"])]
    imported = import_model(model(nodes, XYZ + [("p", I64, [])], [("a", F32, None)]))
    for p in (3, -4):
        with pytest.raises(FusebindIndexError) as e:
            imported.run(X, Y, Z, np.array(p, np.int64))
        assert isinstance(e.value, IndexError)
        assert str(e.value) == (f"node 'a' (SequenceAt, opset 21): position {p} is out of range for a sequence of 3 "
                                "tensors (ONNX allows -3..2)")
    nodes = [n("SequenceEmpty", [], ["e"]), n("SequenceErase", ["e"], ["s"]), n("SequenceLength", ["s"], ["len"])]
    with pytest.raises(FusebindIndexError, match=r"^node 's' \(SequenceErase, opset 21\): erasing from an empty "
                                                  r"sequence$"):
        import_model(model(nodes, [], [("len", I64, [])])).run()


def test_bad_splits_dtypes_and_an_empty_concat_are_named():
    def refusal(nodes, inits=(), error=UnsupportedModel):
        with pytest.raises(error) as e:
            import_model(model(nodes, XYZ[:1], [("o", TensorProto.UNDEFINED, None)], inits)).run(X)
        return str(e.value)

    assert refusal([n("SplitToSequence", ["x", "sz"], ["s"], axis=1), n("SequenceLength", ["s"], ["o"])],
                   [i64("sz", [1, 1])]) == ("node 's' (SplitToSequence, opset 21): split sizes [1, 1] do not add up "
                                            "to the dim 3 of axis 1")
    assert refusal([n("SplitToSequence", ["x", "sz"], ["s"]), n("SequenceLength", ["s"], ["o"])],
                   [i64("sz", 0)]) == ("node 's' (SplitToSequence, opset 21): a split size of 0 (ONNX takes a "
                                       "positive size)")
    assert refusal([n("Cast", ["x"], ["k"], to=I32), n("SequenceConstruct", ["x", "k"], ["s"]),
                    n("SequenceLength", ["s"], ["o"])]) == (
        "node 's' (SequenceConstruct, opset 21): a tensor of int32 in a sequence of float32 (ONNX's sequences "
        "hold one element type)")
    assert refusal([n("SequenceEmpty", [], ["e"], dtype=I64), n("SequenceInsert", ["e", "x"], ["s"]),
                    n("SequenceLength", ["s"], ["o"])]) == (
        "node 's' (SequenceInsert, opset 21): a tensor of float32 in a sequence of int64 (ONNX's sequences hold "
        "one element type)")
    assert refusal([n("SequenceLength", ["x"], ["o"])]) == (
        "node 'o' (SequenceLength, opset 21): its input 'x' is a tensor where ONNX takes a sequence")
    assert refusal([n("SequenceEmpty", [], ["e"]), n("ConcatFromSequence", ["e"], ["o"], axis=0)],
                   error=FusebindValueError) == (
        "node 'o' (ConcatFromSequence, opset 21): an empty sequence has no tensors to concatenate")


# --------------------------------------------------------------------------- the backend suite's sequence models

SIMPLE = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "simple")


def _tensors(directory, prefix):
    out = []
    for i in range(len([f for f in os.listdir(directory) if f.startswith(prefix)])):
        t = onnx.TensorProto()
        with open(os.path.join(directory, f"{prefix}_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        out.append(numpy_helper.to_array(t))
    return out


@pytest.mark.parametrize("case", [f"test_sequence_model{i}" for i in range(1, 9)])
def test_the_simple_sequence_models(case):
    """The backend suite's case, its way: prepare, run its data set, compare at rtol 1e-3 / atol 1e-7."""
    try:
        rep = backend.prepare(onnx.load(os.path.join(SIMPLE, case, "model.onnx")))
    except unittest.SkipTest as e:  # (what prepare said before sequences: a skip here is a failure)
        pytest.fail(f"{case} is skipped: {e}")
    data = os.path.join(SIMPLE, case, "test_data_set_0")
    got = rep.run(_tensors(data, "input"))
    want = _tensors(data, "output")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-7)


def test_a_sequence_stays_a_python_tuple_of_the_trace():
    """Sequence ops build no IR of their own: a construct/at round trip is the tensor program it selects."""
    nodes = [n("SequenceConstruct", ["x", "y"], ["s"]), n("SequenceAt", ["s", "p1"], ["a"]),
             n("Add", ["a", "x"], ["o"])]
    imported = import_model(model(nodes, XYZ[:2], [("o", F32, None)], [i64("p1", 1)]))
    (o,) = imported.run(X, Y)
    np.testing.assert_array_equal(o, Y + X)
    text = str(imported.mlir(X, Y))
    assert text.count("prim.") == 1 and "prim.add %args_1, %args " in text, text  # y + x, nothing else
