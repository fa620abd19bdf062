"""fb.vmap's batching rules: how each prim op is re-emitted with a batch dim.

Owns `batching_rule(cls)` (the rule of an op class, or a `NoBatchingRule`
saying why it has none) and `emit_batched(graph, op, operands, size)`, the
one entry point vmap.py calls per op of the per-example trace; and how the
per-example trace's call-time checks become the caller's (`caller_check`;
`unguard` for an op whose check the caller cannot run); and the plumbing of
re-emission: `look` (a per-example value's caller value), `route` (ops numpy
puts in an enclosing graph go to the per-example trace), `drop_dead`.

The convention: a batched value has its batch dim at axis 0 (shape
`(B, *per_example_shape)`); an unbatched value is the per-example value
itself, shared by every example. An op none of whose operands is batched is
re-emitted as it is (it computes the same value for every example), so a
rule only ever sees at least one batched operand, and its result is batched.

Rules are chosen by the op's facts, so an op stays one class:
- elementwise (`ElementwiseOp`: every unary/binary op, compare, select,
  cast, the division family and user ops): a batched operand of lower rank
  than the result gets size-1 dims after its batch dim, so numpy's
  right-aligned broadcasting keeps pairing per-example dims; unbatched
  operands are left alone (they broadcast over the batch dim for free);
- reductions (`ReductionOp`): the axes shift by one;
- by KIND: transpose, reshape, broadcast_to, slice, matmul, concat, gather,
  take_along, scatter (and constant, which has no operand to batch).
An op with no rule is listed in `_REFUSED` with its reason: the test walks
`registered_ops()` and fails on an op that has neither, so a new op cannot
silently lack one.

Must not: trace a Python function (vmap.py does) or run anything.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any, Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import BlockArgument

from fusebind.api.errors import UnsupportedOperation
from fusebind.api.numpy_kernels import argument_of
from fusebind.api.tracer import Graph, Tracer
from fusebind.dialect import prim
from fusebind.dialect.errors import FusebindError, FusebindInternalError
from fusebind.dialect.prim_base import PrimOp, int_list
from fusebind.dialect.prim_gather import TakeAlongOp
from fusebind.dialect.prim_elementwise import ElementwiseOp
from fusebind.dialect.prim_structured import ReductionOp
from fusebind.dialect.registry import is_user_op
from fusebind.dialect.types import elem_of, shape_of, tensor_type

#: an operand as a rule sees it: the outer value, and whether its axis 0 is the batch dim
Operand = tuple[Tracer, bool]
#: (graph, the per-example op, its operands in the caller's graph, batch size) -> the batched result
Rule = Callable[[Graph, Any, Sequence[Operand], int], Tracer]


class NoBatchingRule:
    """An op class that has no batching rule, and why (shown in the UnsupportedOperation)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"NoBatchingRule({self.reason!r})"


def _reshape(graph: Graph, t: Tracer, shape: Sequence[int]) -> Tracer:
    """`t` reshaped (row-major); a reshape of a reshape reads the first one's operand, so the size-1
    dims a rule adds and the next rule drops (a matmul's rows, say) leave no op behind."""
    shape = tuple(int(d) for d in shape)
    if shape == t.shape:
        return t
    owner = t.value.owner
    if isinstance(owner, prim.ReshapeOp):
        t = Tracer(graph, owner.operands[0])
        if t.shape == shape:
            return t
    return graph.add(prim.ReshapeOp(t.value, shape))


def _lift(graph: Graph, t: Tracer, rank: int) -> Tracer:
    """A batched `t` (B, *s) as (B, 1, ..., 1, *s) of per-example rank `rank`: numpy broadcasting
    aligns dims from the right, so the batch dim must stay left of every per-example dim."""
    k = t.ndim - 1
    return t if k >= rank else _reshape(graph, t, (t.shape[0], *([1] * (rank - k)), *t.shape[1:]))


def _create(graph: Graph, op: Any, operands: Sequence[Tracer], shape: Sequence[int],
            props: dict[str, Any] | None = None) -> Tracer:
    """`op`'s class again, on `operands`, with result `shape` (its element type kept) and `props`
    (default: op's own): the generic re-emission, so an op's properties need no rule of their own."""
    new = type(op).create(operands=[t.value for t in operands],
                          result_types=[tensor_type(tuple(shape), elem_of(op.results[0].type))],
                          properties=dict(op.properties) if props is None else props,
                          attributes=dict(op.attributes))
    return graph.add(new)


def _per_example(op: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in shape_of(op.results[0].type))


# ---------------------------------------------------------------- the rules
def _elementwise(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    out = _per_example(op)
    operands = [_lift(graph, t, len(out)) if batched else t for t, batched in ins]
    return _create(graph, op, operands, (size, *out))


def _reduction(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    ((x, _),) = ins
    props = dict(op.properties)
    props["axes"] = int_list([a + 1 for a in op.axes_list()])
    return _create(graph, op, [x], (size, *_per_example(op)), props)


def _transpose(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    ((x, _),) = ins
    return graph.add(prim.TransposeOp(x.value, (0, *(p + 1 for p in op.perm_list()))))


def _reshape_rule(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    ((x, _),) = ins
    return _reshape(graph, x, (size, *_per_example(op)))


def _broadcast_to(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    ((x, _),) = ins
    out = _per_example(op)
    x = _lift(graph, x, len(out))
    return graph.add(prim.BroadcastToOp(x.value, (size, *out)))


def _slice(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    ((x, _),) = ins
    return graph.add(prim.SliceOp(x.value, (0, *op.starts_list()), (size, *op.limits_list()),
                                  (1, *op.strides_list())))


def _matmul(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    (a, ba), (b, bb) = ins
    ra, rb = a.ndim - ba, b.ndim - bb  # per-example ranks
    if ba and not bb and rb == 2:
        # a batch of rows times one matrix (an MLP layer): fold the batch into the rows, one GEMM
        lead = a.shape[:-1]
        rows = _reshape(graph, a, (math.prod(lead), a.shape[-1]))
        out = graph.add(prim.MatmulOp(rows.value, b.value))
        return _reshape(graph, out, (*lead, b.shape[-1]))
    rank = max(ra, rb)  # matmul's batch dims broadcast from the right, as an elementwise op's do
    a = _lift(graph, a, rank) if ba else a
    b = _lift(graph, b, rank) if bb else b
    return graph.add(prim.MatmulOp(a.value, b.value))


def _full(graph: Graph, t: Tracer, batched: bool, size: int) -> Tracer:
    """`t` batched: an unbatched one broadcast along a new batch dim (for ops that do not broadcast)."""
    return t if batched else graph.add(prim.BroadcastToOp(t.value, (size, *t.shape)))


def _with_axis(op: Any, axis: int) -> dict[str, Any]:
    props = dict(op.properties)
    props["axis"] = IntegerAttr(axis, i64)
    return props


def _concat(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    xs = [_full(graph, t, batched, size) for t, batched in ins]
    return _create(graph, op, xs, (size, *_per_example(op)), _with_axis(op, op.axis_value() + 1))


def _scan(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    """cumsum / cumprod per example: the same scan, one axis further."""
    ((x, batched),) = ins
    x = _full(graph, x, batched, size)
    return _create(graph, op, [x], (size, *_per_example(op)), _with_axis(op, op.axis_value() + 1))


def _gather(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    """np.take(x, idx, axis) per example."""
    (x, bx), (idx, bi) = ins
    axis = op.axis_value()
    out = _per_example(op)
    if not bi:  # one index array for every example: the same gather, one axis further
        return _create(graph, op, [x, idx], (size, *out), _with_axis(op, axis + 1))
    if not bx:  # one x, a batch of index arrays: the batch dim lands at `axis`; move it to 0
        shape = (*x.shape[:axis], *idx.shape, *x.shape[axis + 1:])
        return _move_to_front(graph, _create(graph, op, [x, idx], shape), axis)
    # both batched: per example, a take_along of the flattened indices (their other dims size 1)
    rank = x.ndim - 1
    flat = _reshape(graph, idx, (size, *([1] * axis), math.prod(idx.shape[1:]), *([1] * (rank - axis - 1))))
    props = _with_axis(op, axis + 1)
    picked_shape = (size, *x.shape[1:axis + 1], flat.shape[axis + 1], *x.shape[axis + 2:])
    picked = graph.add(TakeAlongOp.create(operands=[x.value, flat.value],
                                          result_types=[tensor_type(picked_shape, elem_of(op.results[0].type))],
                                          properties=props))
    return _reshape(graph, picked, (size, *out))


def _take_along(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    """np.take_along_axis per example: both operands one rank up (an unbatched one with a size-1
    batch dim, which take_along broadcasts as numpy does), the axis one further."""
    (x, bx), (idx, bi) = ins
    x = x if bx else _reshape(graph, x, (1, *x.shape))
    idx = idx if bi else _reshape(graph, idx, (1, *idx.shape))
    return _create(graph, op, [x, idx], (size, *_per_example(op)), _with_axis(op, op.axis_value() + 1))


def _scatter(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    """put_along_axis-form scatter per example, the axis one further: x with the batch dim (each
    example updates its own copy); idx with it or size 1 (idx broadcasts off the axis); v lifted
    like an elementwise operand (it broadcasts to the update shape from the right). An update's
    batch coordinate is not the axis, so it stays in its example, and each example's updates keep
    their order."""
    (x, bx), (idx, bi), (v, bv) = ins
    rank = len(_per_example(op))
    x = _full(graph, x, bx, size)
    idx = idx if bi else _reshape(graph, idx, (1, *idx.shape))
    v = _lift(graph, v, rank) if bv else v
    return _create(graph, op, [x, idx, v], (size, *_per_example(op)), _with_axis(op, op.axis_value() + 1))


def _window(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    """prim.window slides over x's last d dims: a batch dim in front is one more leading dim."""
    ((x, _),) = ins
    return _create(graph, op, [x], (size, *_per_example(op)))


def _move_to_front(graph: Graph, t: Tracer, axis: int) -> Tracer:
    if axis == 0:
        return t
    perm = [axis] + [i for i in range(t.ndim) if i != axis]
    return graph.add(prim.TransposeOp(t.value, perm))


#: rules by KIND (checked before the class facts: a KIND names one op exactly). The ops of modules
#: other helpers own (prim_layout, prim_gather, prim_scatter) get their rules here, by KIND.
_BY_KIND: dict[str, Rule] = {
    "transpose": _transpose, "reshape": _reshape_rule, "broadcast_to": _broadcast_to, "slice": _slice,
    "matmul": _matmul, "concat": _concat, "gather": _gather, "take_along": _take_along, "scatter": _scatter,
    "scan": _scan, "window": _window,
}

#: ops with no batching rule, by KIND, and why (an UnsupportedOperation says so when one is batched).
#: `constant` needs none: it has no operand, so it is never batched (re-emitted as it is).
_REFUSED: dict[str, str] = {}

#: ops that are never batched because they have no operands
_NO_OPERANDS = frozenset({"constant"})


def batching_rule(cls: type[PrimOp]) -> Rule | NoBatchingRule | None:
    """The batching rule of an op class; a NoBatchingRule (and its reason) for one refused on
    purpose; None for an op nobody has decided about (the registry test fails on those)."""
    kind = getattr(cls, "KIND", None)
    if kind in _BY_KIND:
        return _BY_KIND[kind]
    if kind in _NO_OPERANDS:
        return _unbatched_only
    if issubclass(cls, ElementwiseOp):
        return _elementwise
    if issubclass(cls, ReductionOp):
        return _reduction
    if kind in _REFUSED:
        return NoBatchingRule(_REFUSED[kind])
    if is_user_op(cls):
        return NoBatchingRule("a user op that is not elementwise (a UnaryOp/BinaryOp): vmap knows no rule for "
                              "its dims")
    return None


def _unbatched_only(graph: Graph, op: Any, ins: Sequence[Operand], size: int) -> Tracer:
    raise FusebindInternalError(f"fusebind internal error: fb.vmap: {op.name} has no operands, so none of them "
                                "can be batched; please report it")


def emit_unbatched(graph: Graph, op: Any, operands: Sequence[Tracer]) -> Tracer:
    """`op` re-emitted as it is, on the caller's values (none of them batched)."""
    return _create(graph, op, operands, _per_example(op))


def emit_batched(graph: Graph, op: Any, ins: Sequence[Operand], size: int, fn_name: str) -> tuple[Tracer, bool]:
    """`op` of the per-example trace re-emitted into `graph`: (its value, batched?)."""
    if not any(batched for _, batched in ins):
        return emit_unbatched(graph, op, [t for t, _ in ins]), False
    rule = batching_rule(type(op))
    if rule is None or isinstance(rule, NoBatchingRule):
        reason = rule.reason if isinstance(rule, NoBatchingRule) else "no rule was written for it"
        raise UnsupportedOperation(
            f"fusebind.vmap: in '{fn_name}': {op.name} has no batching rule yet ({reason}), and one of its "
            "operands depends on a mapped argument; compute it per example in a Python loop and np.stack "
            "the results, or keep that operand unmapped (in_axes None)")
    return rule(graph, op, ins, size), True


# ---------------------------------------------------------------- re-emission into the caller's graph
def drop_dead(graph: Graph, marker: Any, keep: set[Any]) -> None:
    """Erase the re-emitted ops nothing reads (a rule's reshape that the next rule folded away), so
    plans and explain() show only what runs; the results are kept even before anything reads them."""
    ops = []
    op = graph.block.first_op if marker is None else marker.next_op
    while op is not None:
        ops.append(op)
        op = op.next_op
    for op in reversed(ops):
        if not any(r.uses for r in op.results) and not any(r in keep for r in op.results):
            graph.block.erase_op(op)


class _Routing(threading.local):
    #: the per-example traces in progress in this thread, outermost first
    inner: list[Graph]
    #: id(graph) -> how many vmaps route its ops now
    counts: dict[int, int]

    def __init__(self) -> None:
        self.inner = []
        self.counts = {}


ROUTING = _Routing()


def _routed_add(graph: Graph, op: Any) -> Tracer:
    """`graph.add` while a per-example trace runs inside it. numpy's operators put an op in the graph
    of their first traced operand, so `w * x`, with w a tracer of the enclosing trace that fn closes
    over and x a per-example value, would land in the enclosing graph; it goes to the innermost
    per-example trace that owns one of its operands instead (where it is batched with the rest)."""
    if ROUTING.inner and op.operands:
        blocks = {v.owner if isinstance(v, BlockArgument) else v.owner.parent for v in op.operands}
        for g in reversed(ROUTING.inner):
            if g.block in blocks:
                return g.add_here(op)
    return graph.add_here(op)


def route(graph: Graph, step: int) -> None:
    """Install (+1) or remove (-1) `_routed_add` as `graph.router` (nested vmaps may share a caller:
    counted per graph, in this thread's ROUTING)."""
    n = ROUTING.counts.get(id(graph), 0) + step
    ROUTING.counts[id(graph)] = n
    if n == 1 and step > 0:
        graph.router = functools.partial(_routed_add, graph)
    elif n == 0:
        ROUTING.counts.pop(id(graph), None)
        graph.router = None


def look(env: dict[Any, tuple[Tracer, bool]], graph: Graph, value: Any) -> tuple[Tracer, bool]:
    """The caller's value for a value of the per-example trace. One the trace did not make is a
    caller's value fn closed over (a tracer of an enclosing trace, as in `vmap(lambda x: x * w)`
    inside a jitted function of w): the same for every example, so unmapped."""
    hit = env.get(value)
    return hit if hit is not None else (Tracer(graph, value), False)


# ---------------------------------------------------------------- call-time checks
#: the module whose call-time checks read only weak scalars' recipes (valid in the caller's trace)
_WEAK_CHECKS = "fusebind.api.weak"


class _Read(FusebindError):
    """Raised by `_Probe` when a check reads a position it has no stand-in for."""


class _Probe:
    """A stand-in for a call's arguments: records each position a check reads and gives it zeros of
    that argument's per-example shape and dtype (in range for an index check, so it reads on)."""

    def __init__(self, values: Sequence[tuple[Tracer, bool]]) -> None:
        self.values = values
        self.read: list[int] = []

    def __getitem__(self, i: int) -> Any:
        self.read.append(i)
        if not 0 <= i < len(self.values):
            raise _Read  # a captured array's position: the caller has no argument for it
        t, batched = self.values[i]
        return np.zeros(t.shape[1:] if batched else t.shape, t.dtype)


class _Remap:
    """The caller's arguments, read at the per-example trace's positions (`mapping`: its -> caller's)."""

    __slots__ = ("args", "mapping")

    def __init__(self, args: Sequence[Any], mapping: dict[int, int]) -> None:
        self.args, self.mapping = args, mapping

    def __getitem__(self, i: int) -> Any:
        q = self.mapping.get(i)
        if q is None:  # the check read a position at call time that it did not read when probed
            raise FusebindInternalError(f"fusebind internal error: fb.vmap: a call-time check read argument #{i} of "
                                        "the per-example trace, which it did not read when mapped; please report it")
        return self.args[q]


def caller_check(graph: Graph, check: Callable[[Sequence[Any]], None],
                  values: Sequence[tuple[Tracer, bool]]) -> tuple[Callable[[Sequence[Any]], None] | None, list[int]]:
    """A call-time check of the per-example trace as a check of the caller's, or (None, the
    per-example positions it reads) when it cannot be one. A weak scalar's check reads the
    caller's arguments already (its recipe is the caller's). A range check of traced indices
    (take, take_along_axis, choose, fb.at by an index argument) reads argument #p of the
    per-example trace: it then reads the caller's argument that value is (all examples at once:
    every index is checked); when the value is computed in the caller, there is none."""
    if getattr(check, "__module__", None) == _WEAK_CHECKS:
        return check, []
    probe = _Probe(values)
    try:
        check(probe)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - it stopped reading (a position with no stand-in, or zeros it refuses)
        pass
    mapping = {}
    for p in dict.fromkeys(probe.read):
        q = argument_of(graph, values[p][0]) if p < len(values) else None
        if q is None:
            return None, probe.read
        mapping[p] = q
    if not probe.read:
        return None, []
    return (lambda args: check(_Remap(args, mapping))), []  # type: ignore[arg-type]


def unguard(inner: Graph, op: Any, unchecked: dict[int, bool]) -> None:
    """An op promising its indices were checked before the call (`in_bounds`) by a check that the
    caller cannot run: the promise is dropped, so the op checks them itself (in the kernel, or
    its reference on arm 0: fb.IndexOutOfBounds either way)."""
    idx = getattr(op, "idx", None)
    if idx is None or "in_bounds" not in op.properties:
        return
    p = argument_of(inner, Tracer(inner, idx))
    if p in unchecked:
        del op.properties["in_bounds"]  # (the per-example trace is vmap's own, thrown away after)
        unchecked[p] = True
