"""Fusion rules: pattern matchers over prim IR that propose regions.

This module owns the rules and the capability gate over them:

- static catalog ops (their ids come from `catalog.py`): `softmax`
  (max-subtract-exp-sum-div over the last axis), `layernorm` (mean, var,
  normalize, scale, shift), `gelu` (tanh form), `bias_relu` and `bias_gelu`;
- synthesized regions (their ids come from the recipe registry at match
  time): a matmul epilogue (bias, activation, residual add after a
  `prim.matmul`; the matmul itself stays outside the region, bound to BLAS,
  because the lowering would generate a slow `linalg.matmul`), an
  elementwise prologue/epilogue around a reduction, and chains of
  elementwise ops (broadcasts included).

`absorb_neighbours` grows a catalog candidate with its adjacent elementwise
ops (convex, size-bounded), so the optimizer can price a catalog pattern
against the larger cluster around it instead of splitting that cluster.

A rule proposes `Candidate`s (ops of one block, in block order) and notes
the merges it refused (`Rejection`). It does not price, gate by runtime id,
or rewrite IR: `optimize.py` does. `capability_gated_rules(has_kernel)`
returns the active rules and the static ids it gated out; synthesized rules
are always returned, since their gate is asked per region at match time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import Operation, SSAValue

from fusebind.compiler.catalog import catalog_entry
from fusebind.compiler.graph import DataflowGraph
from fusebind.dialect.prim import (
    BroadcastToOp,
    ConstantOp,
    ElementwiseOp,
    MatmulOp,
    ReductionOp,
)
from fusebind.dialect.types import shape_of


@dataclass(frozen=True)
class Candidate:
    """A proposed region: the rule, a name, its ops in block order, and the
    static catalog id when the rule is a catalog op (None: synthesized)."""

    rule: str
    name: str
    ops: tuple[Operation, ...]
    static_id: int | None = None


@dataclass(frozen=True)
class Rejection:
    """A merge a rule refused while growing a candidate."""

    verdict: str  # "illegal" or "too-big"
    rule: str
    name: str
    ops: tuple[Operation, ...]
    detail: str


@dataclass
class MatchState:
    """What a rule may read: the graph, the ops already claimed by an earlier
    rule (fused, or reserved for a gated region), and the size bound."""

    graph: DataflowGraph
    claimed: set[Operation]
    max_ops: int
    rejections: list[Rejection] = field(default_factory=list)

    def free(self, op: Operation | None) -> bool:
        return op is not None and op not in self.claimed


Matcher = Callable[[MatchState], list[Candidate]]


@dataclass(frozen=True)
class Rule:
    """A fusion rule: its name, the static id it is tied to (None when ids
    are synthesized per match) and its matcher."""

    name: str
    static_id: int | None
    match: Matcher


# --------------------------------------------------------------------------- matching helpers


def _kind(op: Operation | None) -> str | None:
    return getattr(op, "KIND", None) if op is not None else None


def _def(state: MatchState, value: SSAValue, kind: str) -> Operation | None:
    """The free in-block op of `kind` defining `value`, if any."""
    op = state.graph.producer(value)
    return op if state.free(op) and _kind(op) == kind else None


def _const_value(state: MatchState, value: SSAValue) -> float | None:
    """The value of a splat/scalar `prim.constant`, else None."""
    op = state.graph.producer(value)
    if not isinstance(op, ConstantOp):
        return None
    values = op.value.get_values()
    if len(values) == 0 or any(v != values[0] for v in values):
        return None
    return float(values[0])


def _is_const(state: MatchState, value: SSAValue, expected: float, rel: float = 1e-6) -> bool:
    got = _const_value(state, value)
    return got is not None and math.isclose(got, expected, rel_tol=rel, abs_tol=rel)


def _binary(state: MatchState, op: Operation | None, kind: str) -> tuple[SSAValue, SSAValue] | None:
    if not state.free(op) or _kind(op) != kind:
        return None
    return op.operands[0], op.operands[1]  # type: ignore[union-attr]


def _last_axis_keepdims(op: Operation) -> bool:
    if not isinstance(op, ReductionOp):
        return False
    rank = len(shape_of(op.x.type))
    return op.axes_list() == (rank - 1,) and op.keepdims is not None


def _commuted(pair: tuple[SSAValue, SSAValue]) -> list[tuple[SSAValue, SSAValue]]:
    return [pair, (pair[1], pair[0])]


def _in_order(state: MatchState, ops: Collection[Operation]) -> tuple[Operation, ...]:
    return tuple(sorted(set(ops), key=state.graph.index.__getitem__))


# --------------------------------------------------------------------------- catalog rules


def _match_gelu_at(state: MatchState, root: Operation) -> tuple[SSAValue, list[Operation]] | None:
    """0.5*x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x*x*x))), the catalog's form
    (commuted operands of add/mul accepted). Returns (x, ops)."""
    top = _binary(state, root, "mul")
    if top is None:
        return None
    for half_x, one_t in _commuted(top):
        hx = _binary(state, state.graph.producer(half_x), "mul")
        ot = _binary(state, state.graph.producer(one_t), "add")
        if hx is None or ot is None:
            continue
        for c_half, x in _commuted(hx):
            if not _is_const(state, c_half, 0.5):
                continue
            for c_one, t in _commuted(ot):
                if not _is_const(state, c_one, 1.0):
                    continue
                tanh = _def(state, t, "tanh")
                if tanh is None:
                    continue
                scaled = _binary(state, state.graph.producer(tanh.operands[0]), "mul")
                if scaled is None:
                    continue
                for c_s, inner in _commuted(scaled):
                    if not _is_const(state, c_s, math.sqrt(2.0 / math.pi)):
                        continue
                    ops = _match_gelu_inner(state, inner, x)
                    if ops is not None:
                        producers = [state.graph.producer(v) for v in (half_x, one_t, t, tanh.operands[0], inner)]
                        return x, [root, tanh, *[p for p in producers if p is not None], *ops]
    return None


def _match_gelu_inner(state: MatchState, inner: SSAValue, x: SSAValue) -> list[Operation] | None:
    add = _binary(state, state.graph.producer(inner), "add")
    if add is None:
        return None
    for xx, scaled_cube in _commuted(add):
        if xx != x:
            continue
        sc = _binary(state, state.graph.producer(scaled_cube), "mul")
        if sc is None:
            continue
        for c_k, cube in _commuted(sc):
            if not _is_const(state, c_k, 0.044715):
                continue
            cube_op = state.graph.producer(cube)
            c = _binary(state, cube_op, "mul")
            if c is None:
                continue
            for sq, x3 in _commuted(c):
                sq_op = state.graph.producer(sq)
                s = _binary(state, sq_op, "mul")
                if x3 == x and s is not None and s == (x, x):
                    return [state.graph.producer(scaled_cube), cube_op, sq_op]  # type: ignore[list-item]
    return None


def _is_row_of(state: MatchState, bias: SSAValue, x: SSAValue) -> bool:
    xs, bs = shape_of(x.type), shape_of(bias.type)
    return len(xs) >= 1 and len(bs) == 1 and bs[0] == xs[-1]


def _catalog(name: str, matcher: Callable[[MatchState, Operation], list[Operation] | None]) -> Rule:
    entry = catalog_entry(name)

    def match(state: MatchState) -> list[Candidate]:
        out: list[Candidate] = []
        taken: set[Operation] = set()
        for op in reversed(state.graph.ops):  # roots are last: match from the end
            if op in taken or not state.free(op):
                continue
            ops = matcher(state, op)
            if ops is None or taken.intersection(ops):
                continue
            taken.update(ops)
            out.append(Candidate(entry.name, entry.name, _in_order(state, ops), entry.fused_id))
        return list(reversed(out))

    return Rule(entry.name, entry.fused_id, match)


def _gelu(state: MatchState, root: Operation) -> list[Operation] | None:
    found = _match_gelu_at(state, root)
    return None if found is None else found[1]


def _bias_gelu(state: MatchState, root: Operation) -> list[Operation] | None:
    found = _match_gelu_at(state, root)
    if found is None:
        return None
    x, ops = found
    add = _def(state, x, "add")
    if add is None:
        return None
    for a, bias in _commuted((add.operands[0], add.operands[1])):
        if _is_row_of(state, bias, a) and shape_of(a.type) == shape_of(x.type):
            return [*ops, add]
    return None


def _bias_relu(state: MatchState, root: Operation) -> list[Operation] | None:
    if _kind(root) != "relu" or not state.free(root):
        return None
    add = _def(state, root.operands[0], "add")
    if add is None:
        return None
    for a, bias in _commuted((add.operands[0], add.operands[1])):
        if _is_row_of(state, bias, a) and shape_of(a.type) == shape_of(root.results[0].type):
            return [add, root]
    return None


def _softmax(state: MatchState, root: Operation) -> list[Operation] | None:
    div = _binary(state, root, "div")
    if div is None:
        return None
    ex_v, s_v = div
    s = _def(state, s_v, "reduce_sum")
    ex = _def(state, ex_v, "exp")
    if s is None or ex is None or s.operands[0] != ex_v or not _last_axis_keepdims(s):
        return None
    sub = _binary(state, state.graph.producer(ex.operands[0]), "sub")
    if sub is None:
        return None
    x, m_v = sub
    m = _def(state, m_v, "reduce_max")
    if m is None or m.operands[0] != x or not _last_axis_keepdims(m):
        return None
    return [m, state.graph.producer(ex.operands[0]), ex, s, root]  # type: ignore[list-item]


def _layernorm(state: MatchState, root: Operation) -> list[Operation] | None:
    out = _binary(state, root, "add")
    if out is None:
        return None
    for yg_v, beta in _commuted(out):
        yg_op = state.graph.producer(yg_v)
        yg = _binary(state, yg_op, "mul")
        if yg is None:
            continue
        for y_v, gamma in _commuted(yg):
            y_op = state.graph.producer(y_v)
            y = _binary(state, y_op, "mul")
            if y is None or not (_is_row_of(state, gamma, y_v) and _is_row_of(state, beta, y_v)):
                continue
            for d_v, r_v in _commuted(y):
                found = _layernorm_stats(state, d_v, r_v)
                if found is not None:
                    return [root, yg_op, y_op, *found]  # type: ignore[list-item]
    return None


def _layernorm_stats(state: MatchState, d_v: SSAValue, r_v: SSAValue) -> list[Operation] | None:
    r = _def(state, r_v, "rsqrt")
    d_op = state.graph.producer(d_v)
    d = _binary(state, d_op, "sub")
    if r is None or d is None:
        return None
    x, mean_v = d
    mean = _def(state, mean_v, "reduce_mean")
    if mean is None or mean.operands[0] != x or not _last_axis_keepdims(mean):
        return None
    eps_op = state.graph.producer(r.operands[0])
    eps = _binary(state, eps_op, "add")
    if eps is None:
        return None
    for var_v, c in _commuted(eps):
        var = _def(state, var_v, "reduce_mean")
        if var is None or not _last_axis_keepdims(var) or _const_value(state, c) is None:
            continue
        sq_op = state.graph.producer(var.operands[0])
        if _binary(state, sq_op, "mul") == (d_v, d_v):
            return [r, d_op, mean, eps_op, var, sq_op]  # type: ignore[list-item]
    return None


# --------------------------------------------------------------------------- synthesized rules


def _fusable(op: Operation) -> bool:
    """Ops a synthesized elementwise region may hold (constants are cloned in
    by the region builder instead)."""
    return isinstance(op, (ElementwiseOp, BroadcastToOp))


def _synth_name(prefix: str, ops: tuple[Operation, ...]) -> str:
    kinds = [_kind(o) or "op" for o in ops]
    head = "_".join(kinds[:4])
    return f"{prefix}{head}" + (f"_n{len(kinds)}" if len(kinds) > 4 else "")


def _matmul_epilogue(state: MatchState) -> list[Candidate]:
    """Elementwise ops after a matmul (bias, activation, residual add), along
    the chain of single-use values, up to the size bound. The matmul stays
    outside: it runs on BLAS, the region is its in-place epilogue."""
    out: list[Candidate] = []
    g = state.graph
    for mm in g.ops:
        if not isinstance(mm, MatmulOp):
            continue
        chain: list[Operation] = []
        cur: Operation = mm
        while len(chain) < state.max_ops:
            users = g.users(cur)
            if len(users) != 1 or len(list(cur.results[0].uses)) != 1:
                break
            nxt = users[0]
            if not (_fusable(nxt) and state.free(nxt)):
                break
            chain.append(nxt)
            cur = nxt
        if len(chain) >= 2:
            ops = _in_order(state, chain)
            out.append(Candidate("matmul-epilogue", _synth_name("matmul_epilogue_", ops), ops))
    return out


def _reduction_fusion(state: MatchState) -> list[Candidate]:
    """A reduction with its elementwise prologue (single-use producers of its
    input) and epilogue (single-use chain of elementwise consumers)."""
    out: list[Candidate] = []
    taken: set[Operation] = set()
    g = state.graph
    for red in g.ops:
        if not isinstance(red, ReductionOp) or not state.free(red) or red in taken:
            continue
        members: list[Operation] = [red]
        stack = [red]
        while stack and len(members) < state.max_ops:
            cur = stack.pop()
            for p in g.producers(cur):
                if (_fusable(p) and state.free(p) and p not in taken and p not in members
                        and all(u in members for u in g.users(p)) and len(members) < state.max_ops):
                    members.append(p)
                    stack.append(p)
        cur = red
        while len(members) < state.max_ops:
            users = g.users(cur)
            if len(users) != 1 or len(list(cur.results[0].uses)) != 1:
                break
            nxt = users[0]
            if not (_fusable(nxt) and state.free(nxt)) or nxt in taken:
                break
            members.append(nxt)
            cur = nxt
        if len(members) < 2:
            continue
        ops = _in_order(state, members)
        taken.update(ops)
        out.append(Candidate("reduction", _synth_name("fused_", ops), ops))
    return out


class _Groups:
    """Union-find over ops with, per group root: size, first index, and the
    ops outside the group that feed it (filtered lazily)."""

    def __init__(self, graph: DataflowGraph) -> None:
        self.graph = graph
        self.parent: dict[Operation, Operation] = {}
        self.size: dict[Operation, int] = {}
        self.lo: dict[Operation, int] = {}
        self.feeds: dict[Operation, list[Operation]] = {}

    def add(self, op: Operation) -> None:
        self.parent[op] = op
        self.size[op] = 1
        self.lo[op] = self.graph.index[op]
        self.feeds[op] = list(self.graph.producers(op))

    def find(self, op: Operation) -> Operation:
        root = op
        while self.parent[root] is not root:
            root = self.parent[root]
        while self.parent[op] is not root:
            self.parent[op], op = root, self.parent[op]
        return root

    def member(self, root: Operation) -> Callable[[Operation], bool]:
        return lambda op: op in self.parent and self.find(op) is root

    def path_between(self, a: Operation, b: Operation) -> Operation | None:
        """An op outside both groups on a path from one to the other, or None."""
        for src, dst in ((a, b), (b, a)):
            in_dst = self.member(dst)
            in_src = self.member(src)
            for u in self.feeds[dst]:
                if in_dst(u) or in_src(u):
                    continue
                if self.graph.depends_on(u, in_src, self.lo[src]):
                    return u
        return None

    def union(self, a: Operation, b: Operation) -> Operation:
        if self.size[a] < self.size[b]:
            a, b = b, a
        self.parent[b] = a
        self.size[a] += self.size[b]
        self.lo[a] = min(self.lo[a], self.lo[b])
        keep = self.member(a)
        self.feeds[a] = [u for u in (*self.feeds[a], *self.feeds.pop(b)) if not keep(u)]
        return a


def _elementwise(state: MatchState) -> list[Candidate]:
    """Maximal convex groups of elementwise ops, grown in block order: each op
    joins the groups of its elementwise producers when the union stays convex
    (checked by a bounded search) and within the size bound."""
    g = state.graph
    groups = _Groups(g)
    for v in g.ops:
        if not (_fusable(v) and state.free(v)):
            continue
        groups.add(v)
        producer_roots: list[Operation] = []
        for p in g.producers(v):
            if p in groups.parent:
                root = groups.find(p)
                if root not in producer_roots:
                    producer_roots.append(root)
        for root in sorted(producer_roots, key=groups.lo.__getitem__):
            mine = groups.find(v)
            root = groups.find(root)
            if root is mine:
                continue
            if groups.size[mine] + groups.size[root] > state.max_ops:
                state.rejections.append(Rejection(
                    "too-big", "elementwise", _synth_name("ew_", (v,)), (v,),
                    f"{groups.size[mine] + groups.size[root]} ops > max-ops {state.max_ops}"))
                continue
            via = groups.path_between(root, mine)
            if via is not None:
                state.rejections.append(Rejection(
                    "illegal", "elementwise", _synth_name("ew_", (v,)), (v,),
                    f"non-convex: a path leaves the region through {via.name} and re-enters at {v.name}"))
                continue
            groups.union(mine, root)
    members: dict[Operation, list[Operation]] = {}
    for op in groups.parent:
        members.setdefault(groups.find(op), []).append(op)
    out: list[Candidate] = []
    for ops_list in members.values():
        if len(ops_list) < 2:
            continue
        ops = _in_order(state, ops_list)
        out.append(Candidate("elementwise", _synth_name("ew_", ops), ops))
    out.sort(key=lambda c: g.index[c.ops[0]])
    return out


# --------------------------------------------------------------------------- absorbing neighbours


def absorb_neighbours(graph: DataflowGraph, ops: tuple[Operation, ...], free: Callable[[Operation], bool],
                      max_ops: int) -> tuple[Operation, ...]:
    """`ops` grown with the adjacent elementwise/broadcast ops that are
    `free` (producers and consumers, transitively, breadth-first), as long as
    the set stays convex and within `max_ops`. In block order.

    This is what keeps a catalog pattern from fragmenting a larger fusable
    cluster: `relu(a*b+c)` must not become `mul` + `bias_relu`. The optimizer
    prices the grown set against the catalog region plus its neighbours."""
    members = set(ops)
    queue = list(ops)
    head = 0
    while head < len(queue) and len(members) < max_ops:
        cur = queue[head]
        head += 1
        for nb in (*graph.producers(cur), *graph.users(cur)):
            if len(members) >= max_ops:
                break
            if nb in members or not (_fusable(nb) and free(nb)):
                continue
            members.add(nb)
            if graph.nonconvex_witness(members) is not None:
                members.discard(nb)
                continue
            queue.append(nb)
    return tuple(sorted(members, key=graph.index.__getitem__))


def merged_name(ops: tuple[Operation, ...], prefix: str | None = None) -> str:
    """The synthesized name of a region holding `ops`: `ew_...` when all are
    elementwise, `fused_...` otherwise (or an explicit prefix)."""
    if prefix is None:
        prefix = "ew_" if all(_fusable(o) for o in ops) else "fused_"
    return _synth_name(prefix, ops)


def is_fusable_elementwise(op: Operation) -> bool:
    """An op a synthesized elementwise region may hold (elementwise or broadcast)."""
    return _fusable(op)


# --------------------------------------------------------------------------- the gate


CATALOG_RULES: tuple[Rule, ...] = (
    _catalog("bias_gelu", _bias_gelu),
    _catalog("gelu", _gelu),
    _catalog("softmax", _softmax),
    _catalog("layernorm", _layernorm),
    _catalog("bias_relu", _bias_relu),
)

SYNTHESIZED_RULES: tuple[Rule, ...] = (
    Rule("matmul-epilogue", None, _matmul_epilogue),
    Rule("reduction", None, _reduction_fusion),
    Rule("elementwise", None, _elementwise),
)

ALL_RULES: tuple[Rule, ...] = CATALOG_RULES + SYNTHESIZED_RULES


def capability_gated_rules(has_kernel: Callable[[int], bool]) -> tuple[list[Rule], list[int]]:
    """The rules whose fused op has a kernel, and the static ids gated out.

    A catalog rule is active only when `has_kernel(its id)`. Synthesized rules
    are always active: their ids come from the recipe registry per match, and
    the optimizer asks `has_kernel` for each such id (gated ones go on the
    work order). Rules come in priority order.
    """
    active: list[Rule] = []
    gated: list[int] = []
    for rule in ALL_RULES:
        if rule.static_id is None or has_kernel(rule.static_id):
            active.append(rule)
        else:
            gated.append(rule.static_id)
    return active, gated


def describe_ops(ops: Collection[Operation]) -> str:
    """`prim.add, prim.relu` — for diagnostics."""
    return ", ".join(o.name for o in ops)
