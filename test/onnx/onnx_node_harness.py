"""Run one ONNX node through its fusebind handler (fusebind/onnx/ops_*.py) and through
onnx's ReferenceEvaluator, without the importer: the handler's NodeContext is built here from
`onnx.helper.make_node`, the traced inputs become the arguments of an `fb.jit` function and
the constant ones (shapes, axes, pads) are passed as numpy arrays, as the importer passes
initializers and folded shape arithmetic."""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import pytest

import fusebind as fb
from fusebind.onnx import ops_nn, ops_shape  # noqa: F401  (registers the handlers)
from fusebind.onnx.registry import NodeContext, handler_for


def attrs_of(node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode() for s in v]
        out[a.name] = v
    return out


def context(node: Any, opset: int) -> NodeContext:
    return NodeContext(node=node, attrs=attrs_of(node), opset=opset, input_names=list(node.input))


def run_fusebind(node: Any, inputs: Sequence[Any], const: Sequence[int] = (), opset: int = 18,
                 jit: bool = True) -> tuple[np.ndarray, ...]:
    """The node's outputs from its handler: inputs at positions `const` (and None ones) are passed
    as numpy arrays, the others traced (jit=True) or as numpy too (jit=False: the handler folds)."""
    ctx = context(node, opset)
    fn = handler_for(ctx).fn
    traced = [i for i, x in enumerate(inputs) if x is not None and i not in const and jit]

    consts = [fb.constant(np.asarray(x)) if x is not None and i in const else x for i, x in enumerate(inputs)]

    def call(*args: Any) -> Any:
        full = list(consts)
        for i, a in zip(traced, args):
            full[i] = a
        out = fn(ctx, *full)
        return out if isinstance(out, tuple) else (out,)

    if not traced:
        return tuple(np.asarray(o) for o in call())
    out = fb.jit(call)(*[inputs[i] for i in traced])
    return out if isinstance(out, tuple) else (out,)


def run_reference(node: Any, inputs: Sequence[Any], opset: int = 18, ref: str = "onnx") -> list[np.ndarray]:
    """The node's outputs by onnx's ReferenceEvaluator (ref="onnx") or onnxruntime ("ort": where
    the reference evaluator does not implement an old opset's meaning)."""
    feeds = {n: np.asarray(x) for n, x in zip(node.input, inputs) if n and x is not None}
    model = model_of(node, feeds, opset)
    if ref == "ort":
        import onnxruntime as ort

        inferred = onnx.shape_inference.infer_shapes(model)
        known = {vi.name: vi for vi in inferred.graph.value_info}
        for out in model.graph.output:
            if out.name in known:
                out.CopyFrom(known[out.name])
            else:  # (inference leaves a graph output's type as given: the first input's element type)
                out.type.tensor_type.elem_type = model.graph.input[0].type.tensor_type.elem_type

        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    return ReferenceEvaluator(model).run(None, feeds)


def model_of(node: Any, feeds: dict[str, np.ndarray], opset: int = 18) -> Any:
    """A one-node model over `feeds` (name -> array) at `opset`."""
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
           for n, x in feeds.items()]
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in node.output if n]
    graph = helper.make_graph([node], "one_node", ins, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(node: Any, inputs: Sequence[Any], const: Sequence[int] = (), opset: int = 18, rtol: float = 1e-5,
          atol: float = 1e-6, jit: bool = True, ref: str = "onnx") -> tuple[np.ndarray, ...]:
    """fusebind's outputs equal the reference's: values (within rtol/atol for floats), dtype, shape."""
    got = run_fusebind(node, inputs, const, opset, jit)
    want = run_reference(node, inputs, opset, ref)
    named = [g for g, name in zip(got, node.output) if name]  # (an omitted output has no reference value)
    assert len(named) == len(want), (len(got), node.output)
    for g, w in zip(named, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (node.op_type, g.shape, w.shape)
        assert g.dtype == w.dtype, (node.op_type, g.dtype, w.dtype)
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def node(op: str, inputs: Sequence[str], outputs: Sequence[str] = ("y",), **attrs: Any) -> Any:
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


#: FUSEBIND_LONG=1 runs every case traced too (the default suite: the representative ones)
LONG = os.environ.get("FUSEBIND_LONG", "").strip().lower() in ("1", "true", "yes", "on")


def with_modes(cases: Sequence[tuple[Any, ...]], traced: set[str]) -> list[Any]:
    """Each case twice, with a last parameter `jit`: on numpy (the handler folds: every case, fast)
    and inside fb.jit (each compiles its kernels: the names in `traced` by default, all under
    FUSEBIND_LONG=1)."""
    unknown = traced - {c[0] for c in cases}
    assert not unknown, unknown
    out = []
    for case in cases:
        out.append(pytest.param(*case, False, id=f"{case[0]}-numpy"))
        marks = () if LONG or case[0] in traced else (
            pytest.mark.skip(reason="traced variant of a folded case: FUSEBIND_LONG=1 runs it"),)
        out.append(pytest.param(*case, True, id=f"{case[0]}-traced", marks=marks))
    return out
