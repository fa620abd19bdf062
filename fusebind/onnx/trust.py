"""What fusebind checks in an ONNX model before anything else reads it: ONNX files are untrusted input.

Owns the refusals of a model that is not valid ONNX (`InvalidModel`, a ValueError: a cycle, an
undefined input, a name produced twice, a tensor whose dims do not match its data) or that claims
more memory than the budget (`ModelTooLarge`), and the checks that raise them: `check_sizes` (every
tensor's dims and element type against the bytes it holds, and the total against
`MAX_INITIALIZER_BYTES`, before numpy or onnx allocate anything), `check_opsets` (opsets newer than
`MAX_OPSET`) and `check_structure` (the main graph: names, producers, order, domains, each node's
input and output count against its op's schema). They are
pure Python over the protobuf message, so they run before onnx's C++ passes (version converter,
checker, shape inference), which trust their input (trust_worker.py runs those in a child process).
External data (tensors stored in other files) is external_data.py's.

Must not: import the importer or any handler (they call this), or call onnx's C++ passes.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from onnx import TensorProto, defs, numpy_helper

from fusebind.dialect.errors import FusebindValueError
from fusebind.onnx.registry import UnsupportedModel


class InvalidModel(FusebindValueError):
    """A model that is not valid ONNX, or whose claims do not hold: a graph with a cycle, an input no
    node, initializer or graph input produces, a name produced twice, a tensor whose dims and type
    do not match the data it holds, undecodable bytes. The message names the node or tensor."""


class ExternalDataRefused(InvalidModel):
    """A tensor's external data that fusebind will not read: a location outside the model's
    directory (`..`, an absolute path, a symlink leaving it), not a regular file, or a model given
    as bytes or a ModelProto (no directory to read from). The message names tensor and location."""


class ModelTooLarge(InvalidModel):
    """The model's tensors claim more bytes than the budget (`max_initializer_bytes`, default
    `MAX_INITIALIZER_BYTES`); refused before any of them is read or allocated."""


#: the default budget for the bytes of every tensor a model holds (initializers, Constant values,
#: external data), summed over their declared dims and types: `import_model(max_initializer_bytes=)`
MAX_INITIALIZER_BYTES = 4 << 30
#: the newest opset per domain fusebind's handlers were checked against (onnx 1.23's node suite
#: goes to 28); a newer one may have changed an op's meaning, so it is refused, not guessed at
MAX_OPSET = {"": 28, "ai.onnx": 28, "ai.onnx.preview.training": 1}

_T = TensorProto
#: element type -> bits per element (packed types are stored ceil(n * bits / 8) bytes)
_BITS = {_T.FLOAT: 32, _T.UINT8: 8, _T.INT8: 8, _T.UINT16: 16, _T.INT16: 16, _T.INT32: 32, _T.INT64: 64,
         _T.BOOL: 8, _T.FLOAT16: 16, _T.DOUBLE: 64, _T.UINT32: 32, _T.UINT64: 64, _T.COMPLEX64: 64,
         _T.COMPLEX128: 128, _T.BFLOAT16: 16, _T.FLOAT8E4M3FN: 8, _T.FLOAT8E4M3FNUZ: 8, _T.FLOAT8E5M2: 8,
         _T.FLOAT8E5M2FNUZ: 8, _T.FLOAT8E8M0: 8, _T.UINT4: 4, _T.INT4: 4, _T.FLOAT4E2M1: 4}
#: typed field -> element type -> values stored per element (complex: 2; the 4-bit types: packed two per value)
_FIELDS: dict[str, dict[int, float]] = {
    "float_data": {_T.FLOAT: 1, _T.COMPLEX64: 2},
    "int32_data": {**{t: 1 for t in (_T.INT32, _T.INT16, _T.INT8, _T.UINT16, _T.UINT8, _T.BOOL, _T.FLOAT16,
                                     _T.BFLOAT16, _T.FLOAT8E4M3FN, _T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2,
                                     _T.FLOAT8E5M2FNUZ, _T.FLOAT8E8M0)},
                   **{t: 0.5 for t in (_T.UINT4, _T.INT4, _T.FLOAT4E2M1)}},
    "int64_data": {_T.INT64: 1},
    "double_data": {_T.DOUBLE: 1, _T.COMPLEX128: 2},
    "uint64_data": {_T.UINT32: 1, _T.UINT64: 1},
    "string_data": {_T.STRING: 1},
}
_DEFAULT_DOMAINS = ("", "ai.onnx")
_SINGLE = defs.OpSchema.FormalParameterOption.Single


def type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return str(elem_type)


def tensors(graph: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """(how messages name it, TensorProto) for every tensor `graph` holds: initializers, sparse
    initializers' values and indices, tensor attributes of its nodes, and those of subgraphs."""
    inside = f" of {where}" if where else ""
    for t in graph.initializer:
        yield f"initializer {t.name!r}{inside}", t
    for s in graph.sparse_initializer:
        yield f"sparse initializer {s.values.name!r} (values){inside}", s.values
        yield f"sparse initializer {s.values.name!r} (indices){inside}", s.indices
    for node in graph.node:
        label = f"node {node.name or (node.output[0] if node.output else '?')!r} ({node.op_type})"
        for a in node.attribute:
            here = f"attribute {a.name!r} of {label}{inside}"
            if a.HasField("t"):
                yield here, a.t
            for t in a.tensors:
                yield here, t
            if a.HasField("sparse_tensor"):
                yield here, a.sparse_tensor.values
                yield here, a.sparse_tensor.indices
            if a.HasField("g"):
                yield from tensors(a.g, label)
            for g in a.graphs:
                yield from tensors(g, label)


def element_count(t: Any, where: str) -> int:
    """The product of `t`'s dims (exact: Python ints do not overflow); InvalidModel for a negative dim."""
    neg = [int(d) for d in t.dims if d < 0]
    if neg:
        raise InvalidModel(f"fusebind.onnx: {where} declares the negative dim {neg[0]} (dims {list(t.dims)})")
    return math.prod(int(d) for d in t.dims)


def declared_bytes(t: Any, where: str) -> int:
    """The bytes `t`'s dims and element type need (strings: the bytes they hold)."""
    n = element_count(t, where)
    if t.data_type == _T.STRING:
        return sum(len(s) for s in t.string_data)
    bits = _BITS.get(t.data_type)
    return (n * bits + 7) // 8 if bits else n  # a type without a table entry: refused later by its name


def is_external(t: Any) -> bool:
    return t.HasField("data_location") and t.data_location == _T.EXTERNAL


def check_data(t: Any, where: str) -> None:
    """`t`'s stored values (raw_data or the typed field of its type) are exactly what its dims
    claim; InvalidModel otherwise (numpy would reshape or misread them)."""
    n = element_count(t, where)
    if t.data_type not in _BITS and t.data_type != _T.STRING:
        # the 2- and 6-bit types (packing not in the tables above; fusebind has none of them): numpy_helper
        # decides, here where its error is named (the budget bounds what it allocates)
        try:
            numpy_helper.to_array(t)
        except Exception as e:
            raise InvalidModel(f"fusebind.onnx: {where} cannot be read ({type(e).__name__}: {e})") from None
        return
    if t.HasField("raw_data"):
        need, have = declared_bytes(t, where), len(t.raw_data)
        if need != have:
            raise InvalidModel(f"fusebind.onnx: {where} declares dims {list(t.dims)} of {type_name(t.data_type)} "
                               f"({need} bytes) but holds {have} bytes of raw data")
        return
    for field, per in _FIELDS.items():
        have = len(getattr(t, field))
        if t.data_type in per:
            need = math.ceil(n * per[t.data_type])
            if have != need and (have or n):
                raise InvalidModel(f"fusebind.onnx: {where} declares dims {list(t.dims)} of "
                                   f"{type_name(t.data_type)} ({n} elements, {need} values in {field}) but "
                                   f"holds {have}")
        elif have:
            raise InvalidModel(f"fusebind.onnx: {where} is {type_name(t.data_type)} but holds its values in "
                               f"{field}")


def check_sizes(model: Any, budget: int) -> int:
    """Every tensor's dims, data and (for inline data) byte count checked, and the sum of their
    declared bytes against `budget`, before anything is allocated; returns that sum."""
    total = 0
    for where, t in tensors(model.graph):
        if t.data_type == _T.UNDEFINED or t.data_type not in _T.DataType.values():
            raise InvalidModel(f"fusebind.onnx: {where} has the element type {type_name(t.data_type)}, which is not "
                               "an ONNX tensor element type")
        total += declared_bytes(t, where)
        if total > budget:
            raise ModelTooLarge(f"fusebind.onnx: the model's tensors need more than {budget} bytes (the "
                                f"budget, max_initializer_bytes=) by {where} ({list(t.dims)} of "
                                f"{type_name(t.data_type)}); pass a larger max_initializer_bytes= for a "
                                "model you trust")
        if not is_external(t):
            check_data(t, where)
    return total


def node_label(node: Any) -> str:
    return node.name or (node.output[0] if node.output else "?")


def _opsets(model: Any) -> dict[str, int]:
    return {("" if imp.domain in _DEFAULT_DOMAINS else imp.domain): int(imp.version) for imp in model.opset_import}


def _where(node: Any, versions: dict[str, int]) -> str:
    domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
    return f"node {node_label(node)!r} ({node.op_type}, opset {versions.get(domain, 1)})"


def check_opsets(model: Any) -> None:
    """UnsupportedModel for a domain whose opset is newer than fusebind was checked against (named
    by the first node of that domain, or the model when no node uses it)."""
    versions = _opsets(model)
    for domain, version in versions.items():
        limit = MAX_OPSET.get(domain)
        if limit is None or version <= limit:
            continue
        users = [n for n in model.graph.node if ("" if n.domain in _DEFAULT_DOMAINS else n.domain) == domain]
        if not users:
            continue  # declared, never used: nothing reads it
        raise UnsupportedModel(f"fusebind.onnx: {_where(users[0], versions)}: opset {version} of the domain "
                               f"{domain or 'ai.onnx'!r} is newer than fusebind supports (up to {limit}); export "
                               f"the model at opset {limit} or older")


def check_arity(node: Any, versions: dict[str, int]) -> None:
    """`node` has the inputs and outputs its op's schema (at the model's opset) requires: no more than
    it takes, every non-optional input given. An op onnx has no schema for is handler_for's to name."""
    domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
    try:
        schema = defs.get_schema(node.op_type, versions.get(domain, 1), domain)
    except Exception:  # SchemaError: no such op at this opset
        return
    where = _where(node, versions)
    ins, outs = list(node.input), list(node.output)
    while ins and not ins[-1]:
        ins.pop()
    while outs and not outs[-1]:
        outs.pop()
    if len(ins) > schema.max_input:
        raise InvalidModel(f"fusebind.onnx: {where}: it has {len(ins)} inputs; {node.op_type} takes at most "
                           f"{schema.max_input}")
    for k, formal in enumerate(schema.inputs):
        if formal.option == _SINGLE and (k >= len(ins) or not ins[k]):
            raise InvalidModel(f"fusebind.onnx: {where}: its input {k} ({formal.name!r}) is required and not given")
    if len(outs) < schema.min_output or len(outs) > schema.max_output:
        raise InvalidModel(f"fusebind.onnx: {where}: it has {len(outs)} outputs; {node.op_type} has "
                           f"{schema.min_output}..{schema.max_output}")


def check_structure(model: Any, domains: set[str]) -> None:
    """The main graph is one ONNX allows: every name produced once (graph inputs, initializers, node
    outputs), every node input and graph output produced, no cycle, every node's domain one fusebind
    implements. InvalidModel / UnsupportedModel naming the node; subgraphs are control flow, which
    the importer refuses by name."""
    graph = model.graph
    versions = _opsets(model)
    defined: dict[str, str] = {}
    for vi in graph.input:
        if vi.name in defined:
            raise InvalidModel(f"fusebind.onnx: the graph input {vi.name!r} is declared twice")
        defined[vi.name] = "the graph input"
    inits: set[str] = set()
    for t in graph.initializer:
        if t.name in inits:
            raise InvalidModel(f"fusebind.onnx: the initializer {t.name!r} is declared twice")
        inits.add(t.name)
        defined.setdefault(t.name, "an initializer")  # an initializer may also be a graph input (IR < 4)
    for s in graph.sparse_initializer:
        defined.setdefault(s.values.name, "a sparse initializer")
    producer: dict[str, Any] = {}
    for node in graph.node:
        domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
        if domain and domain not in domains:
            raise UnsupportedModel(f"{_where(node, versions)}: the op domain {node.domain!r} is not one fusebind "
                                   "implements")
        check_arity(node, versions)
        for out in node.output:
            if not out:
                continue
            if out in producer or out in defined:
                other = producer.get(out)
                what = f"node {node_label(other)!r} ({other.op_type})" if other is not None else defined[out]
                raise InvalidModel(f"fusebind.onnx: {_where(node, versions)}: its output {out!r} is already "
                                   f"produced by {what} (ONNX names each value once)")
            producer[out] = node
    for node in graph.node:
        missing = [i for i in node.input if i and i not in producer and i not in defined]
        if missing:
            raise InvalidModel(f"fusebind.onnx: {_where(node, versions)}: its input {missing[0]!r} is produced by "
                               "no node, initializer or graph input")
    seen: set[str] = set()
    for vi in graph.output:
        if vi.name in seen:
            raise InvalidModel(f"fusebind.onnx: the graph output {vi.name!r} is listed twice")
        seen.add(vi.name)
        if vi.name not in producer and vi.name not in defined:
            raise InvalidModel(f"fusebind.onnx: the graph output {vi.name!r} is produced by no node, initializer "
                               "or graph input")
    _check_acyclic(graph.node, producer, versions)


def _check_acyclic(nodes: Any, producer: dict[str, Any], versions: dict[str, int]) -> None:
    """InvalidModel naming a node on a cycle and the cycle's values (Kahn's order, linear)."""
    index = {id(n): k for k, n in enumerate(nodes)}
    waiting = [0] * len(nodes)
    readers: dict[int, list[int]] = {}
    for k, n in enumerate(nodes):
        deps = {index[id(producer[i])] for i in n.input if i in producer}
        waiting[k] = len(deps)
        for d in deps:
            readers.setdefault(d, []).append(k)
    ready = [k for k, w in enumerate(waiting) if w == 0]
    done = 0
    while ready:
        k = ready.pop()
        done += 1
        for r in readers.get(k, ()):
            waiting[r] -= 1
            if waiting[r] == 0:
                ready.append(r)
    if done == len(nodes):
        return
    # walk back from a stuck node through stuck producers until a node repeats: that is a cycle
    k = next(k for k, w in enumerate(waiting) if w)
    path: list[int] = []
    while k not in path:
        path.append(k)
        k = next(index[id(producer[i])] for i in nodes[k].input if i in producer and waiting[index[id(producer[i])]])
    cycle = path[path.index(k):]  # each the producer of the one before: data flows the other way
    flow = cycle[:1] + cycle[1:][::-1]
    names = [node_label(nodes[j]) for j in flow]
    raise InvalidModel(f"fusebind.onnx: {_where(nodes[k], versions)}: the graph has a cycle through the nodes "
                       f"{' -> '.join(map(repr, names + names[:1]))}")


def check_model(model: Any, domains: set[str], budget: int) -> None:
    """Every check of this module on `model` (after its external data is read: external_data.py)."""
    check_sizes(model, budget)
    check_opsets(model)
    check_structure(model, domains)


__all__ = ["ExternalDataRefused", "InvalidModel", "MAX_INITIALIZER_BYTES", "MAX_OPSET", "ModelTooLarge",
           "check_data", "check_model", "check_opsets", "check_sizes", "check_structure", "declared_bytes",
           "element_count", "is_external", "tensors"]
