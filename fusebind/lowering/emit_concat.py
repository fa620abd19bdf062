"""The lowering of `prim.concat` inside a fused region: an index map, never a copy of its own.

One `linalg.generic` over the result's shape with the identity result map. Piece j (offset
`o_j`, length `m_j` along the axis) is a generic *input* read through the affine map whose axis
expression is `(d - o_j) mod m_j`: always inside the piece (positions the piece does not hold
read a wrapped, in-bounds element that is then not picked), so no read can leave the array. The
body picks the piece holding `i = linalg.index axis` by a select chain on `i < o_j + m_j`.
Because the pieces are read through maps, upstream elementwise fusion folds an elementwise
producer of a piece (the `-x2` of RoPE) into it, folds it into its consumer (no loop nest and no
buffer of its own), and a slice operand stays a view of its argument (a strided subview).
(A body that reads the pieces with `tensor.extract` at clamped indices would fuse into its
consumer too, but a computed piece would then be materialized: fusion does not look through
`tensor.extract`.)
Cost: along the innermost dim the wrapped index makes the reads non-consecutive for LLVM's loop
vectorizer, so such a loop stays scalar (two loads and a select); along an outer dim the inner
loop is contiguous and vectorizes. Hence a second form along the innermost dim, when the pieces'
lengths have a common divisor g >= MIN_BLOCK (rotate_half, QKV put back together: g = h): the
generic runs over `(..., N / g, g)` and a `tensor.collapse_shape` gives the result its shape
(`_split_axis`). Fusion then expands the consumers too and the inner loop vectorizes (RoPE
8x512x128: ~0.11 ms against ~0.49 ms), but the result reaches the output through a reshape,
which bufferization would turn into a temporary and a copy; the pipeline writes it into a
reshaped view of the output instead (`pipeline.write_reshapes_in_place`).

Zero-length pieces are dropped (numpy's concatenate ignores them). A dynamic size along the axis
is not lowered (ScalarEmitError: the region's lowering fails and it is not fused).
Must not: import `emitter` or `emit_dispatch` (the dispatch imports this module); use `em`'s methods and `linalg_types`.
"""

from __future__ import annotations

import math
from typing import Any

from fusebind.lowering.linalg_types import Dim, Value, ints, op_attr, read_by_maps, ttype
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder

KINDS: frozenset[str] = frozenset({"concat"})

#: the shortest inner loop worth the split form: one vector of f32 on AVX2 (a shorter block
#: keeps the wrapped-map form, whose loop runs over the whole axis)
MIN_BLOCK = 8


def emit(em: Any, op: Any, args: list[Any], result_type: Any) -> Any:
    (axis,) = ints(op_attr(op, "axis"))
    sizes = [a.shape[axis] for a in args]
    if any(isinstance(n, str) for n in sizes):
        raise ScalarEmitError(f"{op.name}: a concatenation along a dynamic dim is not lowered; give the axis "
                              "static sizes")
    live = [a for a in args if a.shape[axis] != 0]
    shape: list[Dim] = list(_result_dims(args, axis))
    if not live:
        return Value(em.empty(shape, args[0].elem), shape, args[0].elem)
    if len(live) == 1:  # the piece itself when read through maps; else a copy (it may be a strided argument)
        return live[0] if read_by_maps(op) else em._gather_copy(live[0])
    if axis == len(shape) - 1 and _block(live, axis) >= MIN_BLOCK:
        return _split_axis(em, live, axis, shape)
    return _mapped_reads(em, live, axis, shape)


def _result_dims(args: list[Value], axis: int) -> list[Dim]:
    """The result's dims: the axis is the sum of the static piece sizes; any other dim is the
    first static size among the pieces, else the first one's SSA name (the dialect checked they agree)."""
    out: list[Dim] = []
    for d in range(len(args[0].shape)):
        if d == axis:
            out.append(sum(int(a.shape[axis]) for a in args))
        else:
            dims = [a.shape[d] for a in args]
            out.append(next((n for n in dims if isinstance(n, int)), dims[0]))
    return out


def _mapped_reads(em: Any, live: list[Value], axis: int, shape: list[Dim]) -> Value:
    """The result as a generic over its own shape reading piece j through the map whose axis
    expression is `(d - offset_j) mod size_j`: always inside the piece, and an affine map, so
    elementwise fusion folds producers of the pieces in and the concat into its consumer."""
    rank = len(shape)
    elem = live[0].elem
    dims = ", ".join(f"d{j}" for j in range(rank))
    maps, ends, offset = [], [], 0
    for a in live:
        m = int(a.shape[axis])
        e = f"(d{axis} - {offset}) mod {m}" if offset else f"d{axis} mod {m}"
        res = ", ".join(e if j == axis else f"d{j}" for j in range(rank))
        maps.append(f"affine_map<({dims}) -> ({res})>")
        offset += m
        ends.append(offset)
    maps.append(f"affine_map<({dims}) -> ({dims})>")
    b = TextScalarBuilder(em.fresh, None)
    params, vals = em._bind_args(b, live)
    i = b._op(f"linalg.index {axis} : index", "index", "i")
    result = vals[-1]
    for j in range(len(live) - 2, -1, -1):
        below = b._op(f"arith.cmpi ult, {i}, {em.index(ends[j])} : index", "i1")
        result = b.select(below, vals[j], result)
    return em._generic(live, maps, ["parallel"] * rank, shape, elem, params, b, result, em.empty(shape, elem))


def _block(live: list[Value], axis: int) -> int:
    """The largest length dividing every piece's length along `axis` (the split form's inner loop)."""
    return math.gcd(*(int(a.shape[axis]) for a in live))


def _split_axis(em: Any, live: list[Value], axis: int, shape: list[Dim]) -> Value:
    """The innermost dim split in blocks of `g` (`_block`: every piece is a whole number of
    blocks): a generic over `(..., N / g, g)` reading piece j (blocks `q_j` to `q_j + b_j`) at
    `((s - q_j) mod b_j) * g + p` (always inside the piece, and consecutive in the inner loop `p`,
    so it vectorizes) and picking the piece by `linalg.index` of the block dim `s`, then a
    `tensor.collapse_shape` to the result's shape. Elementwise fusion folds producers in and
    expands the consumers to `(..., N / g, g)` around it; the pipeline writes the collapsed result
    into an expanded view of the output (`_outputs_through_reshapes`), so there is no buffer."""
    rank = len(shape)
    g = _block(live, axis)
    wide: list[Dim] = [*shape[:axis], int(shape[axis]) // g, g, *shape[axis + 1:]]
    dims = ", ".join(f"d{j}" for j in range(rank + 1))
    maps, ends, first = [], [], 0
    for a in live:
        blocks = int(a.shape[axis]) // g
        block = f"(d{axis} - {first}) mod {blocks}" if first else f"d{axis} mod {blocks}"
        res = [f"d{j}" for j in range(axis)] + [f"({block}) * {g} + d{axis + 1}"]
        res += [f"d{j + 1}" for j in range(axis + 1, rank)]
        maps.append(f"affine_map<({dims}) -> ({', '.join(res)})>")
        first += blocks
        ends.append(first)
    maps.append(f"affine_map<({dims}) -> ({dims})>")
    elem = live[0].elem
    b = TextScalarBuilder(em.fresh, None)
    params, vals = em._bind_args(b, live)
    s = b._op(f"linalg.index {axis} : index", "index", "i")
    result = vals[-1]
    for j in range(len(live) - 2, -1, -1):
        below = b._op(f"arith.cmpi ult, {s}, {em.index(ends[j])} : index", "i1")
        result = b.select(below, vals[j], result)
    r = em._generic(live, maps, ["parallel"] * (rank + 1), wide, elem, params, b, result, em.empty(wide, elem))
    out = em.fresh("r")
    groups = [[j] for j in range(axis)] + [[axis, axis + 1]] + [[j + 1] for j in range(axis + 1, rank)]
    assoc = "[" + ", ".join("[" + ", ".join(map(str, grp)) + "]" for grp in groups) + "]"
    em.lines.append(f"{out} = tensor.collapse_shape {r.name} {assoc} : {ttype(wide, elem)} into {ttype(shape, elem)}")
    return Value(out, shape, elem)
