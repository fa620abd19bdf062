"""The lowering of `prim.window` inside a fused region: an index map (extract form).

At most two `linalg.generic`s:
1. padding or input dilation (any tap that reads the fill): one loop writes the padded, dilated
   input as far as the windows reach, (a..., R_i...) with R_i = (o_i - 1) * s_i + (k_i - 1) * d_i + 1.
   It reads one 1-D constant table per dim (`prim_window.window_table` with k = 1: the position
   in x, or -1 for padding and dilation holes) and selects `fill` where an entry is -1. One pass
   over the input, not one select per tap;
2. the window: output map the identity over `(a..., k..., o...)`, element = src[a..., o_i * s_i +
   tap_i[k_i]...] (src the padded input, or x itself when nothing is padded), where tap_i is a
   (k_i,) constant table `k * d_i` read through the map `(d_lead+i)`.

Why a tap table rather than `linalg.index` arithmetic: upstream elementwise fusion folds a producer
into a *reduction* only if every loop dim keeps an input whose map names it. The tap tables name
the kernel dims and the reduction's own output the others, so a pooling (a window feeding
reduce_max / reduce_sum) becomes one loop over the padded input with no window tensor. A tap
entry is loop-invariant in the inner loops over output positions, so those read src at affine
(contiguous or strided) positions, which LLVM vectorizes. A conv's window (read by a reshape,
then BLAS) is the im2col buffer, written by this loop.

Static windowed dims only: a dynamic one (or an empty result) is a ScalarEmitError, the region
then runs its primitives' references (arm 0). Leading dims may be dynamic. Block arguments are
named `%wp<n>` (never `%t<n>`: the driver names the kernel's input tensors so).

Must not: import `emitter` or `emit_dispatch` (the dispatch imports this module); use `em`'s methods and `linalg_types`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.lowering.linalg_types import Dim, Value, storage, ttype
from fusebind.dialect.prim_window import window_table
from fusebind.dialect.types import numpy_dtype
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
    if elem in ("f16", "bf16"):  # its bits, as MLIR's hexadecimal literal (a narrow infinity: no decimal form)
        bits = int(np.asarray(fill, dtype=numpy_dtype(elem)).view(np.uint16))
        return b._op(f"arith.constant 0x{bits:04X} : {storage(elem)}", storage(elem), "c")
    if is_float(elem):
        return b.constant(fill, elem)
    return b.constant(int(fill), elem)


def _padded(em: Any, x: Value, lead: int, geo: dict, outs: list[int], fill: float) -> Value:
    """x padded and input-dilated, as far as the windows read: (lead..., R_i...), R_i = (o_i - 1) *
    s_i + (k_i - 1) * d_i + 1; one loop whose 1-D tables give the position in x (or -1: the fill)."""
    d = len(geo["window"])
    ins = [int(n) for n in x.shape[lead:]]
    reach = [(outs[i] - 1) * geo["strides"][i] + (geo["window"][i] - 1) * geo["dilations"][i] + 1 for i in range(d)]
    tables = [window_table(ins[i], 1, 1, 1, geo["lhs_dilation"][i], geo["pads_lo"][i], reach[i])[0]
              for i in range(d)]
    shape: list[Dim] = list(x.shape[:lead]) + reach
    rank = len(shape)
    dims = ", ".join(f"d{j}" for j in range(rank))
    maps = [f"affine_map<({dims}) -> (d{lead + i})>" for i in range(d)] + [f"affine_map<({dims}) -> ({dims})>"]
    b = TextScalarBuilder(em.fresh, em.fastmath)
    params = [b.bind(em.fresh("wp"), "i32") for _ in tables]
    zero = b.constant(0, "i32")
    coords = [b._op(f"linalg.index {j} : index", "index") for j in range(lead)]
    valid = None
    for t, p in zip(tables, params):
        if (t < 0).any():
            ok = b.compare("ge", p, zero)
            valid = ok if valid is None else b._op(f"arith.andi {valid}, {ok} : i1", "i1")
            p = b._op(f"arith.maxsi {p}, {zero} : i32", "i32")
        coords.append(b._op(f"arith.index_cast {p} : i32 to index", "index"))
    st = storage(x.elem)
    val = b._op(f"tensor.extract {x.name}[{', '.join(coords)}] : {ttype(x.shape, x.elem)}", st)
    if valid is not None:
        val = b._op(f"arith.select {valid}, {val}, {_fill_literal(b, fill, x.elem)} : {st}", st)
    if x.elem == "i1":
        val = b._op(f"arith.trunci {val} : i8 to i1", "i1")
    ins_v = [_table_constant(em, t) for t in tables]
    return em._generic(ins_v, maps, ["parallel"] * rank, shape, x.elem, params, b, val, em.empty(shape, x.elem))


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
    # padding or input dilation: one pass writes the padded input, and the windows read it at affine
    # positions (no select per tap); else they read x itself (pads_lo is then 0)
    if any((t < 0).any() for t in tables) or any(v != 1 for v in geo["lhs_dilation"]):
        src = _padded(em, x, lead, geo, outs, op.fill_value())
        offsets = [0] * d
    else:
        src, offsets = x, [-v for v in geo["pads_lo"]]
    rank = len(shape)
    dims = ", ".join(f"d{j}" for j in range(rank))
    # one (k_i,) table per windowed dim, k * dilation + offset: read at the tap (an outer loop, so the
    # inner loop over output positions reads src at affine positions), and an input whose map names
    # the tap dim, which upstream fusion into a reduction over the taps needs
    taps = [(np.arange(geo["window"][i]) * geo["dilations"][i] + offsets[i]).astype(np.int32) for i in range(d)]
    maps = [f"affine_map<({dims}) -> (d{lead + i})>" for i in range(d)]
    maps.append(f"affine_map<({dims}) -> ({dims})>")
    ins = [_table_constant(em, t) for t in taps]
    b = TextScalarBuilder(em.fresh, em.fastmath)
    params = [b.bind(em.fresh("wp"), "i32") for _ in taps]
    coords = [b._op(f"linalg.index {j} : index", "index") for j in range(lead)]
    for i, p in enumerate(params):
        o = b._op(f"linalg.index {lead + d + i} : index", "index")
        s = b._op(f"arith.constant {geo['strides'][i]} : index", "index")
        pos = b._op(f"arith.muli {o}, {s} : index", "index")
        k = b._op(f"arith.index_cast {p} : i32 to index", "index")
        coords.append(b._op(f"arith.addi {pos}, {k} : index", "index"))
    st = storage(src.elem)
    val = b._op(f"tensor.extract {src.name}[{', '.join(coords)}] : {ttype(src.shape, src.elem)}", st)
    if x.elem == "i1":  # the generic yields the storage type; _generic extends an i1 result itself
        val = b._op(f"arith.trunci {val} : i8 to i1", "i1")
    em.called |= b.called
    return em._generic(ins, maps, ["parallel"] * rank, shape, x.elem, params, b, val, em.empty(shape, x.elem))
