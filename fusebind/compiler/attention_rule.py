"""The attention rule: `softmax(q @ kT * scale + mask) @ v` as one region, run by a tiled kernel.

This module owns the form of an attention region and its one matcher, `match_attention(mm2)`,
which reads SSA uses only, so it answers both on a function block (the rule, `attention_regions`)
and on a region body (the runtime kernel builder asks `describe_attention(region)` which operand
is q, kT, v and the mask, and the scale and fill constants).

The form, ending at the second `prim.matmul` (`mm2`):
- `s = prim.matmul(q, kT)` (q `[..., Sq, D]`, kT `[..., D, Sk]`, v `[..., Sk, Dv]`, the same
  static batch dims, no broadcasting; f32 or f64);
- optionally `s * c` / `c * s` / `s / c` with `c` a one-element constant (the scale);
- optionally a mask: `select(m, s, f)` (kept where m), `select(m, f, s)` (kept where not m), with
  `f` a one-element constant, or `s + bias` (an additive mask); m / bias broadcast to the scores
  and never broadcast the scores up;
- softmax over the last axis as the traced and the ONNX-expanded forms both spell it:
  `x - reduce_max(x, last, keepdims)`, `exp`, `reduce_sum(last, keepdims)`, `div`;
- `prim.matmul(p, v)`.
Every intermediate value is read only inside the form (the scores are never materialised by
anyone else), which is what lets the kernel skip them. Below `MIN_SCORES` scores per head the
form is left to the other rules (the unfused arm measured as fast or faster there).

The rule proposes the region; the optimizer prices and gates it like any synthesized region (its
id comes from the recipe registry; without a kernel it is queued, and the runtime binds the tiled
kernel for it: runtime/attention_bind.py). Merging an attention region with a neighbour is
refused (merge.py asks `is_attention_rule`), since the kernel computes this form and no other.

Must not: price, gate or rewrite IR; import the runtime or lowering.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fusebind.compiler.matching import Candidate, MatchState, Rule, in_block_order
from fusebind.compiler.regions import inlined_constant
from fusebind.dialect.prim import (AddOp, ConstantOp, DivOp, ExpOp, MatmulOp, MulOp, ReduceMaxOp, ReduceSumOp,
                                   SelectOp, SubOp, TransposeOp)
from fusebind.dialect.types import elem_of, is_static, shape_of

RULE_NAME = "attention"

#: element types the kernel computes (numpy's own f32 / f64 matmul, exp and reductions)
ATTENTION_ELEMENTS = ("f32", "f64")

#: the crossover: scores per head (Sq * Sk) from which the attention kernel is proposed. With the
#: native kernel (runtime/attention_native.py), measured on one pinned core (B=2, H=4, D=64, f32,
#: median of interleaved calls, process CPU time, load ~9; the unfused arm's time over the
#: kernel's): S=128 0.96x without a mask, 1.24x causal; the 2-D T=256 block 1.17x; larger S wins
#: more (the scores never leave the cache). Below 128 x 128 the per-call cost (~50-100 us) is
#: most of the work.
MIN_SCORES = 128 * 128


@dataclass(frozen=True)
class AttentionForm:
    """One matched attention: its ops (the region) and the values the kernel reads.

    mask_kind: None, "keep" (select(m, s, fill): scores kept where m), "drop" (select(m, fill, s))
    or "add" (s + mask). scale_kind: None, "mul" or "div" (s / scale). A `prim.transpose`
    feeding q, kT or v only, or reading the result only, is part of the form when the matrix it
    gives is a strided view BLAS reads as it is (the raw array's contiguous axis is one of the
    view's last two): the kernel reads and writes through the views, no copy."""

    ops: tuple[Operation, ...]
    q: SSAValue
    kt: SSAValue
    v: SSAValue
    scale: SSAValue | None
    scale_kind: str | None
    mask: SSAValue | None
    mask_kind: str | None
    fill: SSAValue | None
    elem: str
    #: transposes absorbed: q/kT/v are `raw.transpose(perm)` of the values above (None: as they
    #: are), the region's result is `o.transpose(out_perm)` of the attention `o`
    perms: tuple[tuple[int, ...] | None, tuple[int, ...] | None, tuple[int, ...] | None] = (None, None, None)
    out_perm: tuple[int, ...] | None = None


def is_attention_rule(rule: str) -> bool:
    return rule == RULE_NAME


def _uses(v: SSAValue) -> list[Operation]:
    return [u.operation for u in v.uses]


def _only_user(v: SSAValue, op: Operation) -> bool:
    users = _uses(v)
    return len(users) == 1 and users[0] is op


def _scalar_constant(v: SSAValue) -> bool:
    """A one-element `prim.constant` (cloned into a region by `build_region`, so in a region
    body it is there too)."""
    owner = v.owner
    shape = shape_of(v.type)
    return isinstance(owner, ConstantOp) and inlined_constant(owner) and all(d == 1 for d in shape)


def _last_axis_keepdims(op: Operation, rank: int) -> bool:
    return tuple(op.axes_list()) == (rank - 1,) and op.keepdims is not None  # type: ignore[attr-defined]


def _broadcasts_into(v: SSAValue, target: tuple[int, ...]) -> bool:
    s = shape_of(v.type)
    if not is_static(s) or len(s) > len(target):
        return False
    return all(d == 1 or d == t for d, t in zip(reversed(s), reversed(target)))


def _scores_source(v: SSAValue) -> tuple[MatmulOp, Operation | None] | None:
    """(mm1, scale op or None) when `v` is `q @ kT`, optionally scaled by a scalar constant."""
    owner = v.owner
    if isinstance(owner, MatmulOp):
        return owner, None
    if isinstance(owner, MulOp):
        for a, c in ((owner.lhs, owner.rhs), (owner.rhs, owner.lhs)):
            if _scalar_constant(c) and isinstance(a.owner, MatmulOp) and _only_user(a, owner):
                return a.owner, owner
    if isinstance(owner, DivOp) and _scalar_constant(owner.rhs) and isinstance(owner.lhs.owner, MatmulOp) \
            and _only_user(owner.lhs, owner):
        return owner.lhs.owner, owner
    return None


def match_attention(mm2: Operation) -> AttentionForm | None:
    """The attention form ending at `mm2`, or None (see the module doc for the form)."""
    if not isinstance(mm2, MatmulOp):
        return None
    p = mm2.lhs.owner
    if not isinstance(p, DivOp) or not _only_user(p.result, mm2):
        return None
    e, ssum = p.lhs.owner, p.rhs.owner
    if not isinstance(e, ExpOp) or not isinstance(ssum, ReduceSumOp) or ssum.operands[0] is not e.result:
        return None
    rank = len(shape_of(e.result.type))
    if rank < 2 or not _last_axis_keepdims(ssum, rank) or not _only_user(ssum.results[0], p):
        return None
    if sorted(map(id, _uses(e.result))) != sorted((id(ssum), id(p))):
        return None
    d = e.operands[0].owner
    if not isinstance(d, SubOp) or not _only_user(d.result, e):
        return None
    x, mx = d.lhs, d.rhs.owner
    if not isinstance(mx, ReduceMaxOp) or mx.operands[0] is not x or not _last_axis_keepdims(mx, rank) \
            or not _only_user(mx.results[0], d):
        return None
    if sorted(map(id, _uses(x))) != sorted((id(mx), id(d))):
        return None
    ops: list[Operation] = [mm2, p, e, ssum, d, mx]
    scores_shape = tuple(shape_of(x.type))
    mask = fill = None
    mask_kind = None
    src = _scores_source(x)
    if src is None:
        o = x.owner
        if isinstance(o, SelectOp):
            for kind, s, f in (("keep", o.lhs, o.rhs), ("drop", o.rhs, o.lhs)):
                src = _scores_source(s)
                if src is not None and _scalar_constant(f) and _only_user(s, o):
                    mask, fill, mask_kind = o.cond, f, kind
                    break
            else:
                return None
        elif isinstance(o, AddOp):
            for s, b in ((o.lhs, o.rhs), (o.rhs, o.lhs)):
                src = _scores_source(s)
                if src is not None and _only_user(s, o):
                    mask, mask_kind = b, "add"
                    break
            else:
                return None
        else:
            return None
        if tuple(shape_of(src[0].result.type)) != scores_shape or not _broadcasts_into(mask, scores_shape):
            return None
        ops.append(o)
    mm1, scale_op = src
    if scale_op is not None:
        ops.append(scale_op)
        if tuple(shape_of(scale_op.results[0].type)) != scores_shape:
            return None
    ops.append(mm1)
    q, kt, v = mm1.lhs, mm1.rhs, mm2.rhs
    shapes = [tuple(shape_of(t.type)) for t in (q, kt, v)]
    if not all(is_static(s) and len(s) == rank for s in shapes):
        return None
    (qs, ks, vs) = shapes
    if not (qs[:-2] == ks[:-2] == vs[:-2] and qs[-1] == ks[-2] and ks[-1] == vs[-2]):
        return None
    if qs[-2] * ks[-1] < MIN_SCORES:  # type: ignore[operator]
        return None
    elems = {elem_of(t.type) for t in (q, kt, v, mm2.result)}
    if len(elems) != 1 or next(iter(elems)) not in ATTENTION_ELEMENTS or 0 in (*qs, *ks, *vs):
        return None
    perms: list[tuple[int, ...] | None] = []
    raws: list[SSAValue] = []
    for value, reader in ((q, mm1), (kt, mm1), (v, mm2)):
        t = value.owner
        if isinstance(t, TransposeOp) and _only_user(value, reader) and _strided_matrix(t.perm_list()) \
                and is_static(shape_of(t.operands[0].type)):
            ops.append(t)
            perms.append(tuple(t.perm_list()))
            raws.append(t.operands[0])
        else:
            perms.append(None)
            raws.append(value)
    out_perm = None
    users = _uses(mm2.result)
    if len(users) == 1 and isinstance(users[0], TransposeOp):
        inverse = tuple(sorted(range(rank), key=users[0].perm_list().__getitem__))
        if _strided_matrix(inverse):
            ops.append(users[0])
            out_perm = tuple(users[0].perm_list())
    q, kt, v = raws
    scale = scale_kind = None
    if scale_op is not None:
        scale_kind = "div" if isinstance(scale_op, DivOp) else "mul"
        scale = scale_op.rhs if scale_kind == "div" or _scalar_constant(scale_op.rhs) else scale_op.lhs
    return AttentionForm(tuple(ops), q, kt, v, scale, scale_kind, mask, mask_kind, fill, next(iter(elems)),
                         (perms[0], perms[1], perms[2]), out_perm)


def _strided_matrix(perm: tuple[int, ...]) -> bool:
    """Does `raw.transpose(perm)` keep raw's contiguous (last) axis among the matrix axes (the
    last two), so that BLAS reads (or writes) each matrix of the view with a leading dimension?"""
    return len(perm) - 1 in perm[-2:]


def attention_regions(state: MatchState) -> list[Candidate]:
    """Every free attention form of the block, one candidate each."""
    out: list[Candidate] = []
    for op in state.graph.ops:
        if not isinstance(op, MatmulOp) or not state.free(op):
            continue
        form = match_attention(op)
        if form is None or not all(state.free(o) for o in form.ops):
            continue
        ops = in_block_order(state, form.ops)
        out.append(Candidate(RULE_NAME, f"attention_{form.mask_kind or 'nomask'}", ops))
    return out


def describe_attention(region: Operation) -> AttentionForm | None:
    """The form of a `fused.region` whose body is exactly one attention (the kernel builder's
    question), or None. Its q/kT/v/mask values are then block arguments or body constants."""
    body = region.regions[0].blocks[0]
    ops = [op for op in body.ops if op.name != "fused.yield"]
    last = body.last_op
    if last is None or len(last.operands) != 1:
        return None
    end = last.operands[0].owner
    if isinstance(end, TransposeOp):  # the absorbed transpose of the result
        end = end.operands[0].owner
    form = match_attention(end)  # type: ignore[arg-type]
    if form is None:
        return None
    rest = [op for op in ops if op not in form.ops]
    return form if all(isinstance(op, ConstantOp) for op in rest) else None


ATTENTION_RULE = Rule(RULE_NAME, None, attention_regions)
