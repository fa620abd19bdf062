"""The lowering of `prim.window` inside a fused region: an index map (extract form).

One `linalg.generic` whose output map is the identity over the result `(a..., k..., o...)`. Its
inputs are one small constant table per windowed dim, shape (k_i, o_i), read through the map
`(d_lead+i, d_lead+d+i)`: the position in x that tap k_i reads at output position o_i, or -1
for padding and input-dilation holes (`prim_window.window_table`; padding, strides, dilations
and lhs dilation all become table entries, computed once when compiling). The body reads `x` by
`tensor.extract` at the (clamped) positions and selects `fill` where any table entry is -1 (the
compare is left out for a dim with no padding or holes).

Why tables rather than `linalg.index` arithmetic: upstream elementwise fusion folds a producer
into a *reduction* only if every loop dim keeps an input whose map names it; the tables name
every kernel and output dim, and the reduction's own output the leading ones, so a pooling (a
window feeding reduce_max / reduce_sum) becomes one loop over x, with no window tensor. A conv's
window (read by a reshape, then BLAS) is the im2col buffer, written by this one loop.

Static windowed dims only: a dynamic one (or an empty result) is a ScalarEmitError, the region
then runs its primitives' references (arm 0). Leading dims may be dynamic.

Must not: import `emitter` (it imports this module); use `em`'s methods and `linalg_types`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.lowering.linalg_types import Dim, Value, storage, ttype
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder, is_float

KINDS: frozenset[str] = frozenset({"window"})


def _table_constant(em: Any, table: np.ndarray) -> Value:
    name = em.fresh("wt")
    body = '"0x' + np.ascontiguousarray(table.astype("<i4")).tobytes().hex().upper() + '"'
    em.lines.append(f"{name} = arith.constant dense<{body}> : {ttype(list(table.shape), 'i32')}")
    return Value(name, list(table.shape), "i32")


def _fill_literal(b: TextScalarBuilder, fill: float, elem: str) -> str:
    """The fill as a constant of x's storage type (bool: i8 0/1)."""
    if elem == "i1":
        return b.constant(int(fill), "i8")
    if is_float(elem):
        return b.constant(fill, elem)
    return b.constant(int(fill), elem)


def emit(em: Any, op: Any, args: list[Value], result_type: Any) -> Value:
    (x,) = args
    tables = op.tables()
    geo = op.geometry()
    d = len(geo["window"])
    lead = len(x.shape) - d
    if tables is None or any(not isinstance(n, int) for n in x.shape[lead:]):
        raise ScalarEmitError(f"{op.name}: a dynamic windowed dim is not lowered (the window tables are built "
                              "when compiling); the region runs its reference")
    outs = [t.shape[1] for t in tables]
    shape: list[Dim] = list(x.shape[:lead]) + list(geo["window"]) + outs
    if any(isinstance(n, int) and n == 0 for n in shape):
        raise ScalarEmitError(f"{op.name}: an empty window result has no element to compute; the region runs "
                              "its reference")
    rank = len(shape)
    dims = ", ".join(f"d{j}" for j in range(rank))
    maps = [f"affine_map<({dims}) -> (d{lead + i}, d{lead + d + i})>" for i in range(d)]
    maps.append(f"affine_map<({dims}) -> ({dims})>")
    ins = [_table_constant(em, t) for t in tables]
    b = TextScalarBuilder(em.fresh, em.fastmath)
    params = [b.bind(em.fresh("t"), "i32") for _ in tables]
    zero = b.constant(0, "i32")
    valid = None
    coords = [b._op(f"linalg.index {j} : index", "index") for j in range(lead)]
    for t, p in zip(tables, params):
        if (t < 0).any():
            ok = b.compare("ge", p, zero)
            valid = ok if valid is None else b._op(f"arith.andi {valid}, {ok} : i1", "i1")
            p = b._op(f"arith.maxsi {p}, {zero} : i32", "i32")
        coords.append(b._op(f"arith.index_cast {p} : i32 to index", "index"))
    st = storage(x.elem)
    val = b._op(f"tensor.extract {x.name}[{', '.join(coords)}] : {ttype(x.shape, x.elem)}", st)
    if valid is not None:
        fill = _fill_literal(b, op.fill_value(), x.elem)
        val = b._op(f"arith.select {valid}, {val}, {fill} : {st}", st)
    if x.elem == "i1":  # the generic yields the storage type; _generic extends an i1 result itself
        val = b._op(f"arith.trunci {val} : i8 to i1", "i1")
    em.called |= b.called
    return em._generic(ins, maps, ["parallel"] * rank, shape, x.elem, params, b, val, em.empty(shape, x.elem))
