"""The ONNX importer: an `onnx.ModelProto` becomes one `fb.jit` function over its graph inputs.

Owns `import_model` / `ImportedModel`: the model is loaded (a path, bytes or a proto: untrusted input,
so its external data is read from inside its directory only and its size claims, opsets and graph
structure are checked first, in Python: external_data.py, trust.py; onnx's C++ passes below then run
in a child process unless `trusted=True`: trust_worker.py), upgraded
with `onnx.version_converter` to `TARGET_OPSET` when it is older (the converter fails on some
models: they are imported at their own opset, which every handler must then cover; models newer
than the target are imported at their own opset too, never downgraded), shape-inferred, checked
(every node has a handler at its opset, every value is a tensor of an element type fusebind has,
or a sequence of them inside the graph: a graph's own inputs and outputs are tensors),
and turned into a Python function that runs the handlers node by node in topological order.
That function is wrapped in `fb.jit`, so tracing it builds one prim module of the whole graph and
fusion sees the model as it sees traced code.

Initializers: up to `CONST_LIMIT` elements they are `fb.constant`s (numpy arrays that handlers fold
when every input of a node is constant: shape arithmetic, `Constant`); larger ones are extra
arguments of the jitted function, bound once by the importer (`ImportedModel.run` passes them), so
a weight is not baked into the IR nor copied per call.

Must not: know any op's meaning (handlers in ops_*.py do), or import the backend module.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference, version_converter

import fusebind as fb
from fusebind.api.capture import ConstantArray
from fusebind.dialect.errors import FusebindError, UnsupportedOperation
from fusebind.onnx import fold
from fusebind.onnx.dtypes import numpy_dtype_of
from fusebind.onnx.external_data import read_model
from fusebind.onnx.registry import HANDLERS, NodeContext, UnsupportedModel, handler_for
from fusebind.onnx.trust import MAX_INITIALIZER_BYTES, InvalidModel, check_opsets, check_structure
from fusebind.onnx.trust_worker import onnx_passes
from fusebind.onnx.values import SequenceValue

#: the opset of the default domain older models are upgraded to (the node suite's opsets are 1..28;
#: the shipped model kinds 6..12)
TARGET_OPSET = 21
#: initializers with at most this many elements are constants of the trace; larger ones are arguments
CONST_LIMIT = 4096

#: op types whose outputs' shapes depend on data, or that are control flow: named refusals
_REFUSED = {
    "NonZero": "a data-dependent output shape", "Unique": "a data-dependent output shape",
    "Compress": "a data-dependent output shape", "If": "control flow", "Loop": "control flow",
    "Scan": "control flow",
    "Gradient": "the training op Gradient (the gradient of a graph; fusebind compiles inference)",
}
_DEFAULT_DOMAINS = ("", "ai.onnx")
#: why a sequence may not cross the jitted function's boundary: it is a Python tuple while tracing
_SEQUENCE_BOUNDARY = ("a graph input or output of sequence type (fusebind's graph inputs and outputs are "
                      "tensors; sequences only inside a graph)")


def _load(model: Any, budget: int = MAX_INITIALIZER_BYTES) -> onnx.ModelProto:
    """`model` as a ModelProto with its external data read from inside its directory and every
    tensor's size claim checked (external_data.py, trust.py)."""
    if isinstance(model, (onnx.ModelProto, bytes, bytearray, str, os.PathLike)):
        return read_model(model, budget)
    raise UnsupportedModel(f"fusebind.onnx: a model is an onnx.ModelProto, a path or bytes, not "
                           f"{type(model).__name__}")


def model_opset(model: onnx.ModelProto) -> int:
    """The model's opset of the default domain (1 when it names none)."""
    for imp in model.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return 1


def upgrade(model: onnx.ModelProto, target: int = TARGET_OPSET) -> onnx.ModelProto:
    """`model` converted to `target` when it is older and the converter manages; else `model`."""
    if model_opset(model) >= target:
        return model
    try:
        converted = version_converter.convert_version(model, target)
        onnx.checker.check_model(converted)
        return converted
    except Exception:  # the converter has no adapter for some ops: import at the model's own opset
        return model


def _type_info(vtype: Any, where: str, *,
               inside: bool = False) -> tuple[tuple[int | None, ...] | None, np.dtype | None]:
    """(shape, dtype) of a value's TypeProto; UnsupportedModel for maps, optionals, strings, and for
    sequences except sequences of tensors inside the graph (`inside`: not a graph input or output),
    which are (None, None) here (a SequenceValue while tracing: ops_sequence.py)."""
    kind = vtype.WhichOneof("value")
    if kind is None:
        return None, None
    if kind == "sequence_type":
        if not inside:
            raise UnsupportedModel(f"{where}: {_SEQUENCE_BOUNDARY}")
        elem = vtype.sequence_type.elem_type
        elem_kind = elem.WhichOneof("value")
        if elem_kind not in (None, "tensor_type"):
            raise UnsupportedModel(f"{where}: a sequence of {elem_kind.replace('_type', '')} values (fusebind's "
                                   "sequences hold tensors)")
        if elem_kind and elem.tensor_type.elem_type:
            numpy_dtype_of(elem.tensor_type.elem_type, where)
        return None, None
    if kind != "tensor_type":
        raise UnsupportedModel(f"{where}: a value of {kind.replace('_type', '')} type (fusebind has tensors, and "
                               "sequences of tensors inside a graph)")
    tt = vtype.tensor_type
    dtype = numpy_dtype_of(tt.elem_type, where) if tt.elem_type else None
    if not tt.HasField("shape"):
        return None, dtype
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim), dtype


def _attrs(node: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            raise UnsupportedModel(f"{where}: a subgraph attribute {a.name!r} (control flow)")
        if a.type in (onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS):
            raise UnsupportedModel(f"{where}: a sparse tensor attribute {a.name!r}")
        if a.ref_attr_name:
            raise UnsupportedModel(f"{where}: a reference attribute {a.name!r} (function bodies)")
        try:
            v = helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode("utf-8")
            elif isinstance(v, onnx.TensorProto):
                v = numpy_helper.to_array(v)
            elif isinstance(v, list):
                v = [x.decode("utf-8") if isinstance(x, bytes) else
                     numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x for x in v]
        except (ValueError, TypeError, KeyError, IndexError) as e:  # a hostile attribute (trust.py checked sizes)
            raise InvalidModel(f"fusebind.onnx: {where}: its attribute {a.name!r} cannot be read "
                               f"({type(e).__name__}: {e})") from None
        out[a.name] = v
    return out


def _to_array(t: Any, where: str) -> np.ndarray:
    """numpy_helper.to_array, its failures on hostile tensors (trust.py checked the sizes) InvalidModel."""
    try:
        return numpy_helper.to_array(t)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise InvalidModel(f"fusebind.onnx: {where} cannot be read ({type(e).__name__}: {e})") from None


def topological(nodes: Sequence[Any], available: set[str]) -> list[Any]:
    """`nodes` in an order where every input is produced before it is read (ONNX requires the graph's
    order to be one; sorting anyway costs nothing and names a cycle or a missing value)."""
    ready = set(available) | {""}
    pending = list(nodes)
    order: list[Any] = []
    while pending:
        rest = [n for n in pending if not all(i in ready for i in n.input)]
        done = [n for n in pending if all(i in ready for i in n.input)]
        if not done:
            n = rest[0]
            missing = [i for i in n.input if i not in ready]
            raise UnsupportedModel(f"node {n.name or n.output[0]!r} ({n.op_type}): its inputs {missing} are "
                                   "produced by no node, initializer or graph input (or the graph has a cycle)")
        for n in done:
            order.append(n)
            ready.update(n.output)
        pending = rest
    return order


#: op type -> the input positions that are parameters of the op, not data: a handler needs their
#: values (a shape, axes, pads, a count) to build the program. A graph input feeding one (directly
#: or through ops on it other than Shape/Size) specializes the function on its value.
PARAM_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,),
    "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3), "Trilu": (1,), "CumSum": (1,), "CumProd": (1,), "TopK": (1,),
    "Range": (0, 1, 2), "ConstantOfShape": (0,), "OneHot": (1,), "Resize": (1, 2, 3), "Upsample": (1,),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,),
    "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSum": (1,), "ReduceLogSumExp": (1,),
    "ReduceSumSquare": (1,), "CenterCropPad": (1,), "Col2Im": (1, 2), "DFT": (1, 2), "STFT": (1, 3),
    "Adagrad": (1,), "Adam": (1,), "Momentum": (1,), "AffineGrid": (1,),
    "HannWindow": (0,), "HammingWindow": (0,), "BlackmanWindow": (0,), "MelWeightMatrix": (0, 1, 2, 3, 4),
    "SequenceInsert": (2,), "SequenceErase": (1,), "SequenceAt": (1,), "SplitToSequence": (1,),
    "MaxUnpool": (2,),
}
#: producers whose output values are known from shapes or lengths alone (param_inputs stops there)
_STATIC_VALUED = ("Shape", "Size", "SequenceLength")


def param_inputs(order: Sequence[Any], graph_inputs: set[str]) -> set[str]:
    """The graph inputs whose values are parameters of some op (PARAM_INPUTS), found by walking back
    from each parameter position through the nodes that produce it (not through Shape/Size, whose
    values are known from shapes, nor through SequenceLength, whose value is the static length)."""
    producer = {out: n for n in order for out in n.output if out}
    found: set[str] = set()
    seen: set[str] = set()
    stack = [n.input[i] for n in order for i in PARAM_INPUTS.get(n.op_type, ()) if i < len(n.input) and n.input[i]]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in graph_inputs:
            found.add(name)
        elif name in producer and producer[name].op_type not in _STATIC_VALUED:
            stack.extend(i for i in producer[name].input if i)
    return found


def _jit_accepts(option: str) -> bool:
    try:
        return option in inspect.signature(fb.JitFunction.__init__).parameters
    except (TypeError, ValueError):
        return False


@dataclass
class ImportedModel:
    """An imported model: `run(*inputs)` (the graph inputs in order, numpy arrays) -> its outputs.

    `input_names` / `output_names`: the graph's; `input_types`: (shape, dtype) per input as the model
    declares them (None dims are symbolic); `opset`: the default domain's opset it was imported at;
    `params`: the graph inputs that are parameters of an op (`PARAM_INPUTS`: a Reshape's shape, a
    reduction's axes...): their values specialize the function (one `fb.jit` per distinct value, baked
    in as constants), since the traced program depends on them; `fn_for(inputs)` is the `fb.jit`
    function a call runs (its arguments: the other inputs, then the weights)."""

    model: onnx.ModelProto
    opset: int
    input_names: list[str]
    input_types: list[tuple[tuple[int | None, ...] | None, np.dtype | None]]
    output_names: list[str]
    contexts: list[NodeContext]
    weights: list[np.ndarray]
    weight_names: list[str]
    constants: dict[str, ConstantArray]
    params: frozenset[str] = frozenset()
    jit_options: dict[str, Any] = field(default_factory=dict)
    dynamic: bool = False
    _handlers: list[Any] = field(default_factory=list)
    _fns: dict[Any, Any] = field(default_factory=dict)

    def graph_function(self, env: dict[str, Any]) -> tuple[Any, ...]:
        """The graph over `env` (every graph input, initializer and weight by name): the handlers node
        by node; the graph's outputs."""
        env = dict(env)
        for ctx, handler in zip(self.contexts, self._handlers):
            inputs = [env[name] if name else None for name in ctx.input_names]
            if not getattr(handler, "takes_sequences", False):
                seq_in = [n for n, v in zip(ctx.input_names, inputs) if isinstance(v, SequenceValue)]
                if seq_in:
                    raise UnsupportedModel(f"{ctx.where()}: its input {seq_in[0]!r} is a sequence; fusebind's "
                                           f"{ctx.op_type} takes tensors (sequences go to the Sequence* ops)")
            try:
                out = handler(ctx, *inputs)
            except UnsupportedModel:
                raise
            except (UnsupportedOperation, NotImplementedError) as e:
                # a fusebind refusal inside a claimed op (a dtype or mode it does not build): the model is
                # unsupported, named by its node, not a wrong answer
                raise UnsupportedModel(f"{ctx.where()}: {e}") from e
            except (FusebindError, MemoryError):
                raise
            except Exception as e:
                # not fusebind's own error: the node's inputs or attributes are ones the handler (or numpy
                # under it) cannot take, as a malformed or hostile model has them; named by its node (the
                # importer fuzzer's findings: None for a required input, ranks and axes that do not fit)
                raise InvalidModel(f"{ctx.where()}: its inputs or attributes are not ones fusebind's {ctx.op_type} "
                                   f"can take ({type(e).__name__}: {e}); if the model is valid ONNX, this is a "
                                   "fusebind bug: please report it") from e
            outs = out if isinstance(out, (tuple, list)) else (out,)
            names = list(ctx.node.output)
            if len(outs) < len([n for n in names if n]):
                raise UnsupportedModel(f"{ctx.where()}: the handler gave {len(outs)} outputs, the node has "
                                       f"{len(names)}")
            for name, value in zip(names, outs):
                if name:
                    env[name] = _as_value(value)
        seq_out = [n for n in self.output_names if isinstance(env[n], SequenceValue)]
        if seq_out:
            raise UnsupportedModel(f"value {seq_out[0]!r}: {_SEQUENCE_BOUNDARY}")
        return tuple(env[name] for name in self.output_names)

    def _arrays(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        if len(inputs) != len(self.input_names):
            raise fb.ArgumentError(f"fusebind.onnx: the model takes {len(self.input_names)} inputs "
                                   f"({', '.join(self.input_names)}), {len(inputs)} were given")
        arrays = [np.asarray(x) for x in inputs]
        for name, a, (shape, dtype) in zip(self.input_names, arrays, self.input_types):
            if dtype is not None and a.dtype != dtype:
                raise fb.ArgumentError(f"fusebind.onnx: input {name!r} is {dtype}, an array of {a.dtype} was given")
        return arrays

    def fn_for(self, arrays: Sequence[np.ndarray]) -> Any:
        """The `fb.jit` function for these inputs' parameter values (built once per distinct value)."""
        values = {n: a for n, a in zip(self.input_names, arrays) if n in self.params}
        key = tuple((n, a.dtype.str, a.shape, a.tobytes()) for n, a in values.items())
        fn = self._fns.get(key)
        if fn is None:
            fn = fb.jit(self._specialized({n: fb.constant(a) for n, a in values.items()}), **self.jit_options)
            self._fns[key] = fn
        return fn

    def _specialized(self, values: dict[str, ConstantArray]) -> Any:
        names = [n for n in self.input_names if n not in self.params]
        n_in = len(names)

        def graph_fn(*args: Any) -> tuple[Any, ...]:
            env: dict[str, Any] = dict(self.constants)
            env.update(values)
            env.update(zip(names, args[:n_in]))
            env.update(zip(self.weight_names, args[n_in:]))
            return self.graph_function(env)
        name = self.model.graph.name or "onnx_graph"
        ident = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
        graph_fn.__name__ = graph_fn.__qualname__ = ident if not ident[0].isdigit() else f"g_{ident}"
        return graph_fn

    def _call_args(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [a for n, a in zip(self.input_names, arrays) if n not in self.params] + list(self.weights)

    def run(self, *inputs: Any) -> list[np.ndarray]:
        """The outputs for `inputs` (numpy arrays in graph-input order), as numpy arrays."""
        arrays = self._arrays(inputs)
        out = self.fn_for(arrays)(*self._call_args(arrays))
        out = out if isinstance(out, tuple) else (out,)
        return [np.asarray(o) for o in out]

    __call__ = run

    def explain(self, *inputs: Any) -> Any:
        arrays = self._arrays(inputs)
        return self.fn_for(arrays).explain(*self._call_args(arrays))

    def mlir(self, *inputs: Any) -> Any:
        arrays = self._arrays(inputs)
        return self.fn_for(arrays).mlir(*self._call_args(arrays))


def _as_value(value: Any) -> Any:
    """A handler's output: traced values as they are; numpy values (folded constants) up to
    CONST_LIMIT elements as fb.constant, so that a later traced op bakes them in; larger ones (a
    weight in a Constant node) stay plain arrays, which a traced op captures as a hidden argument
    (passed by reference at each call) instead of writing them into the IR. A SequenceValue: its
    tensors so."""
    if isinstance(value, SequenceValue):
        return SequenceValue([_as_value(v) for v in value.items], value.dtype)
    if isinstance(value, (np.ndarray, np.generic)) and not isinstance(value, ConstantArray):
        arr = np.asarray(value)
        return fb.constant(arr) if arr.size <= CONST_LIMIT else arr
    return value


def _load_handlers() -> None:
    """Import the handler modules: importing one fills the registry (they are the claim)."""
    import fusebind.onnx.ops_math  # noqa: F401
    import fusebind.onnx.ops_quant  # noqa: F401
    import fusebind.onnx.ops_resize  # noqa: F401
    import fusebind.onnx.ops_shape  # noqa: F401
    import fusebind.onnx.ops_signal  # noqa: F401
    import fusebind.onnx.ops_train  # noqa: F401
    import fusebind.onnx.ops_nn  # noqa: F401
    import fusebind.onnx.ops_grid  # noqa: F401
    import fusebind.onnx.ops_select  # noqa: F401
    import fusebind.onnx.ops_linear_attention  # noqa: F401
    import fusebind.onnx.ops_conv  # noqa: F401
    import fusebind.onnx.ops_sequence  # noqa: F401


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # inference is advice: handlers see None where it gave up
        return model


def import_model(model: Any, *, target_opset: int = TARGET_OPSET, const_limit: int = CONST_LIMIT,
                 trusted: bool = False, max_initializer_bytes: int = MAX_INITIALIZER_BYTES,
                 **jit_options: Any) -> ImportedModel:
    """`model` (a ModelProto, path or bytes) as an `ImportedModel`; UnsupportedModel names the first node,
    op and opset fusebind does not build, or the value of a type it does not have; InvalidModel (trust.py)
    a model that is not valid ONNX or claims more than `max_initializer_bytes`. The model is untrusted
    input: onnx's C++ passes run in a child process unless `trusted=True` (trust_worker.py)."""
    _load_handlers()
    proto = _load(model, max_initializer_bytes)
    domains = {d for d, _ in HANDLERS}
    for imp in proto.opset_import:
        if imp.domain not in _DEFAULT_DOMAINS and imp.domain not in domains:
            used = any(n.domain == imp.domain for n in proto.graph.node)
            if used:
                raise UnsupportedModel(f"fusebind.onnx: the op domain {imp.domain!r} (opset {imp.version}) is not "
                                       "one fusebind implements")
    if proto.functions:
        raise UnsupportedModel("fusebind.onnx: model-local functions are not supported")
    check_opsets(proto)
    check_structure(proto, domains)
    proto = onnx_passes(proto, target_opset, trusted, upgrade, _infer)
    proto = fold.rewrite(proto)
    graph = proto.graph
    opset = model_opset(proto)

    init_names = {t.name for t in graph.initializer}
    types: dict[str, tuple[Any, Any]] = {}
    boundary = {vi.name for vi in list(graph.input) + list(graph.output)}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        types[vi.name] = _type_info(vi.type, f"value {vi.name!r}", inside=vi.name not in boundary)
    sequences = {vi.name for vi in graph.value_info if vi.type.WhichOneof("value") == "sequence_type"}

    constants: dict[str, ConstantArray] = {}
    weights: list[np.ndarray] = []
    weight_names: list[str] = []
    for t in graph.initializer:
        if t.data_type == onnx.TensorProto.STRING:
            raise UnsupportedModel(f"initializer {t.name!r}: a string tensor (fusebind has numbers only)")
        numpy_dtype_of(t.data_type, f"initializer {t.name!r}")
        arr = _to_array(t, f"initializer {t.name!r}")
        if arr.size <= const_limit:
            constants[t.name] = fb.constant(arr)
        else:
            weights.append(np.ascontiguousarray(arr))
            weight_names.append(t.name)
    if graph.sparse_initializer:
        raise UnsupportedModel("fusebind.onnx: sparse initializers are not supported")

    inputs = [vi for vi in graph.input if vi.name not in init_names]
    input_names = [vi.name for vi in inputs]
    input_types = [types[n] for n in input_names]

    contexts: list[NodeContext] = []
    handlers: list[Any] = []
    order = topological(graph.node, set(input_names) | init_names)
    imported = ImportedModel(proto, opset, input_names, input_types, [o.name for o in graph.output], contexts,
                             weights, weight_names, constants)
    versions = {imp.domain: int(imp.version) for imp in proto.opset_import}
    for node in order:
        label = node.name or (node.output[0] if node.output else "?")
        domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
        node_opset = opset if not domain else versions.get(domain, 1)
        where = f"node {label!r} ({node.op_type}, opset {node_opset})"
        if domain and domain not in domains:
            raise UnsupportedModel(f"{where}: the op domain {node.domain!r} is not one fusebind implements")
        if node.op_type in _REFUSED:
            raise UnsupportedModel(f"{where}: {_REFUSED[node.op_type]} is not supported")
        ctx = NodeContext(node=node, attrs=_attrs(node, where), opset=node_opset, input_names=list(node.input),
                          shapes=[types.get(i, (None, None))[0] for i in node.input],
                          dtypes=[types.get(i, (None, None))[1] for i in node.input], importer=imported)
        fn = handler_for(ctx, domain).fn
        seq_in = [i for i in node.input if i in sequences]
        if seq_in and not getattr(fn, "takes_sequences", False):
            raise UnsupportedModel(f"{where}: its input {seq_in[0]!r} is a sequence; fusebind's {node.op_type} "
                                   "takes tensors (sequences go to the Sequence* ops)")
        handlers.append(fn)
        contexts.append(ctx)
    imported._handlers = handlers

    imported.params = frozenset(param_inputs(order, set(input_names)))
    symbolic = any(shape is None or any(d is None for d in shape) for shape, _ in input_types)
    options = dict(jit_options)
    if symbolic and _jit_accepts("dynamic"):
        options.setdefault("dynamic", True)
        imported.dynamic = True
    imported.jit_options = options
    return imported


__all__ = ["CONST_LIMIT", "ImportedModel", "InvalidModel", "TARGET_OPSET", "import_model", "model_opset",
           "numpy_dtype_of", "topological", "upgrade", "FusebindError"]
