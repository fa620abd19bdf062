"""The importer's table of ONNX op types: what fusebind claims, and how each is built.

Owns `OpHandler`, `HANDLERS` and the `onnx_op` decorator that fills it, and
`NodeContext`, what a handler sees of its node. A handler maps one ONNX node
to fusebind values with the ONNX meaning (the spec, not numpy, where they
differ): it receives the node's inputs as traced arrays of `fb.jit` (or numpy
arrays, for inputs that are constant at import: initializers under the size
threshold, `Constant` outputs, shape arithmetic on them) and returns one value
per node output. It writes numpy on them (`np.add(a, b)`, `np.reshape`), so
the same handler builds prim IR from a traced input and folds a constant one.

`docs/ONNX-COVERAGE.md` is generated from `HANDLERS` (the claim) and a suite run.
Must not: import the importer (`fusebind/onnx/importer.py` imports this).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from fusebind.dialect.errors import FusebindError, UnsupportedOperation


class UnsupportedModel(UnsupportedOperation):
    """A model fusebind does not run: an op type or opset it does not implement, a data-dependent
    shape, control flow, string or sequence types. The message names the node, op and opset;
    the backend turns it into `unittest.SkipTest` from `prepare`."""


@dataclass
class NodeContext:
    """One node as its handler sees it.

    `node`: the `onnx.NodeProto`; `attrs`: its attributes as Python values (ints, floats,
    strings as `str`, tensors as numpy arrays, lists); `opset`: the model's opset of the node's
    domain (after the version conversion); `input_names`: the node's input names ("" for an
    omitted optional input); `shapes`/`dtypes`: what shape inference knows of each input
    (`None` entries where it does not); `importer`: the importer itself (for subgraphs or
    shared state), opaque to handlers that do not need it."""

    node: Any
    attrs: dict[str, Any]
    opset: int
    input_names: Sequence[str]
    shapes: Sequence[tuple[int | None, ...] | None] = ()
    dtypes: Sequence[Any] = ()
    importer: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def op_type(self) -> str:
        return self.node.op_type

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def where(self) -> str:
        """`node 'name' (Op, opset N)`: how messages name this node."""
        label = self.node.name or (self.node.output[0] if self.node.output else "?")
        return f"node {label!r} ({self.node.op_type}, opset {self.opset})"

    def unsupported(self, what: str) -> UnsupportedModel:
        """The error for a case of this op the importer does not build (raise it)."""
        return UnsupportedModel(f"{self.where()}: {what}")

    def has_input(self, i: int) -> bool:
        return i < len(self.input_names) and self.input_names[i] != ""


Handler = Callable[..., Any]  # handler(ctx: NodeContext, *inputs) -> value | tuple of values


@dataclass(frozen=True)
class OpHandler:
    """The claim for one op type: `domain` ("" is ai.onnx), the opsets `since` <= opset <= `until`
    it implements (until None: every later one), and `fn`, the handler."""

    op_type: str
    fn: Handler
    since: int = 1
    until: int | None = None
    domain: str = ""

    def covers(self, opset: int) -> bool:
        return self.since <= opset and (self.until is None or opset <= self.until)


#: (domain, op_type) -> its handlers (more than one when an op's meaning changed between opsets)
HANDLERS: dict[tuple[str, str], list[OpHandler]] = {}


def onnx_op(*op_types: str, since: int = 1, until: int | None = None, domain: str = "") -> Callable[[Handler], Handler]:
    """Register `fn` as the handler of `op_types` for opsets since..until (the decorator)."""

    def register(fn: Handler) -> Handler:
        for op_type in op_types:
            HANDLERS.setdefault((domain, op_type), []).append(OpHandler(op_type, fn, since, until, domain))
        return fn

    return register


def handler_for(ctx: NodeContext, domain: str = "") -> OpHandler:
    """The handler of `ctx`'s node at its opset, or `UnsupportedModel` naming node, op and opset."""
    handlers = HANDLERS.get((domain, ctx.op_type))
    if not handlers:
        raise ctx.unsupported(f"fusebind does not implement the op type {ctx.op_type!r}"
                              + (f" of domain {domain!r}" if domain else ""))
    for h in handlers:
        if h.covers(ctx.opset):
            return h
    spans = ", ".join(f"{h.since}..{h.until or ''}" for h in handlers)
    raise ctx.unsupported(f"fusebind implements {ctx.op_type} for opsets {spans} only")


__all__ = ["HANDLERS", "Handler", "NodeContext", "OpHandler", "UnsupportedModel", "handler_for", "onnx_op",
           "FusebindError"]
