"""The matcher side of a pattern: find a `patterns.Pattern` in a dataflow graph.

`match_pattern(state, pattern, root)` tries to match `pattern` with its root
at the op `root` and returns the ops it covers (constants excluded: the
region builder clones them in), or None. A pattern `Node` matches a free
in-block op of the same `KIND` with as many operands and the stated
properties (`axes=LAST`: one axis, its operand's last; `keepdims`); an
`Input` matches any value, the same value wherever it recurs; a shared node
matches one op; a `Const` matches an in-block splat `prim.constant` within
its tolerance. The operands of a commutative op (its `Commutative` trait,
or `is_commutative()` for an op whose predicate decides, like compare eq)
are tried in both orders, with backtracking, so a commuted graph matches.
Shapes, once every value is bound: the root has the X input's shape, each
other X input too, and each ROW input is 1-d as long as X's last axis.

`pattern_rule(name, static_id, pattern)` turns a pattern into a `Rule`
(roots are tried from the block's end; matches never share an op). It
proposes candidates only: it does not price, gate or rewrite.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from xdsl.ir import Operation, SSAValue
from xdsl.traits import Commutative

from fusebind.compiler.matching import Candidate, MatchState, Rule, in_block_order, op_kind
from fusebind.compiler.patterns import LAST, ROW, X, Const, Input, Node, Pattern, Term
from fusebind.dialect.prim import ConstantOp
from fusebind.dialect.types import shape_of

Binding = dict[int, SSAValue]  # id(term) -> the value it matched

_COMMUTATIVE: dict[type, bool] = {}


def is_commutative(op: Operation) -> bool:
    """Operand order does not matter: the op class's `Commutative` trait, or its own
    `is_commutative()` when the predicate decides (compare eq/ne)."""
    decides = getattr(op, "is_commutative", None)
    if callable(decides):
        return bool(decides())
    cls = type(op)
    known = _COMMUTATIVE.get(cls)
    if known is None:
        known = _COMMUTATIVE[cls] = cls.has_trait(Commutative)
    return known


def splat_value(state: MatchState, value: SSAValue) -> float | None:
    """The value of an in-block splat/scalar `prim.constant` defining `value`, else None."""
    op = state.graph.producer(value)
    if not isinstance(op, ConstantOp):
        return None
    values = op.value.get_values()
    if len(values) == 0 or any(v != values[0] for v in values):
        return None
    return float(values[0])


def _props_hold(op: Operation, node: Node) -> bool:
    for key, want in node.props:
        if key == "axes":
            axes_list = getattr(op, "axes_list", None)
            if axes_list is None:
                return False
            expected = (len(shape_of(op.operands[0].type)) - 1,) if want == LAST else tuple(want)
            if axes_list() != expected:
                return False
        elif key == "keepdims":
            if (getattr(op, "keepdims", None) is not None) != want:
                return False
    return True


def _match(state: MatchState, term: Term, value: SSAValue, bound: Binding) -> Iterator[Binding]:
    """Every way the op node `term` matches `value` extending `bound` (a fresh dict per way;
    leaves are matched inline by `_match_all`, the hot path)."""
    op = state.graph.producer(value)
    if (op is None or getattr(op, "KIND", None) != term.kind or op in state.claimed  # type: ignore[union-attr]
            or len(op.operands) != len(term.operands) or (term.props and not _props_hold(op, term))):  # type: ignore[union-attr]
        return
    bound = {**bound, id(term): value}
    operands = tuple(op.operands)
    yield from _match_all(state, term.operands, operands, bound)
    if len(operands) == 2 and operands[0] is not operands[1] and is_commutative(op):
        yield from _match_all(state, term.operands, operands[::-1], bound)


def _match_all(state: MatchState, terms: tuple[Term, ...], values: tuple[SSAValue, ...],
               bound: Binding, i: int = 0) -> Iterator[Binding]:
    """Every way terms[i:] match values[i:]. An input binds (the same value where it recurs), a
    shared node must be the value it already matched, a constant must be its splat."""
    while i < len(terms):
        term, value = terms[i], values[i]
        known = bound.get(id(term))
        if known is not None:
            if known is not value:
                return
        elif isinstance(term, Input):
            bound = {**bound, id(term): value}
        elif isinstance(term, Const):
            got = splat_value(state, value)
            if got is None or not term.accepts(got):
                return
        else:
            for extended in _match(state, term, value, bound):
                yield from _match_all(state, terms, values, extended, i + 1)
            return
        i += 1
    yield bound


def _shapes_hold(pattern: Pattern, bound: Binding) -> bool:
    x_shape = shape_of(bound[id(pattern.inputs[0])].type)
    if shape_of(bound[id(pattern.root)].type) != x_shape:
        return False
    for inp in pattern.inputs[1:]:
        shape = shape_of(bound[id(inp)].type)
        if inp.role == X and shape != x_shape:
            return False
        if inp.role == ROW and not (len(x_shape) >= 1 and shape == x_shape[-1:]):
            return False
    return True


def match_pattern(state: MatchState, pattern: Pattern, root: Operation) -> list[Operation] | None:
    """The ops of `pattern` matched with its root at `root`, or None."""
    if op_kind(root) != pattern.root.kind or not state.free(root) or len(root.results) != 1:
        return None
    for bound in _match_all(state, (pattern.root,), (root.results[0],), {}):
        if _shapes_hold(pattern, bound):
            ops: list[Any] = [state.graph.producer(bound[id(n)]) for n in pattern.ops()]
            return ops
    return None


def pattern_rule(name: str, static_id: int | None, pattern: Pattern) -> Rule:
    """The rule finding `pattern`: candidates named `name`, tied to `static_id`."""

    root_kind = pattern.root.kind

    def match(state: MatchState) -> list[Candidate]:
        out: list[Candidate] = []
        taken: set[Operation] = set()
        for op in reversed(state.graph.ops):  # roots are last: match from the end
            if getattr(op, "KIND", None) != root_kind or op in taken or not state.free(op):
                continue
            ops = match_pattern(state, pattern, op)
            if ops is None or taken.intersection(ops):
                continue
            taken.update(ops)
            out.append(Candidate(name, name, in_block_order(state, ops), static_id))
        return list(reversed(out))

    return Rule(name, static_id, match)
