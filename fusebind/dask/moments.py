"""Variance along a chunked axis without rechunking: Welford-style partials (count, mean, M2).

Owns `find_variances(analysis) -> {R2 op: Variance}`: the traced form of `x.var(axis)` and of
`((x - x.mean(axis, keepdims=True)) ** 2).sum/mean(axis)`:

    m  = reduce_mean(u, A, keepdims)      or   div(reduce_sum(u, A, keepdims), N)
    d  = sub(u, m);  sq = mul(d, d);  R2 = reduce_sum(sq, A) or reduce_mean(sq, A)

where m, d and sq are read by nothing else. The mean is broadcast back along A, which would make it
a row-wise op needing whole columns (a rechunk of the whole array); instead each chunk's fused
kernel gives (n_c, mean_c, M2_c) and the partials combine by Chan et al.'s parallel formula:

    n = Σ n_i,  mean = Σ n_i·mean_i / n,  M2 = Σ M2_i + Σ n_i·(mean_i − mean)²

`StackedCombine` is dask.array.reduction's combine and aggregate over partials stacked on a
leading axis of 3 (the M2 plane is then picked and divided by dask). Must not: build graphs (graph.py does) or compile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Variance:
    """One centered second moment: R2 over `axes` of (u - mean(u))²; `ops`: the pattern's ops
    between u and R2 (not materialized when it runs as Welford partials)."""

    u: Any
    r1: Any
    r2: Any
    axes: tuple[int, ...]
    ops: tuple[Any, ...]


def _splat(value: Any) -> float | None:
    from fusebind.dialect.prim import ConstantOp

    op = value.owner
    if not isinstance(op, ConstantOp):
        return None
    data = np.asarray(op.reference())
    return float(data.flat[0]) if data.size >= 1 and np.all(data == data.flat[0]) else None


def _only_user(a: Any, value: Any, op: Any) -> bool:
    return list(a.users.get(value, ())) == [op]


def find_variances(a: Any) -> dict[Any, Variance]:
    """Every R2 of the pattern in the module docstring, by its op."""
    from fusebind.dialect.prim import DivOp, MulOp, ReduceMeanOp, ReduceSumOp, SubOp

    found: dict[Any, Variance] = {}
    for r2 in a.ops:
        if not isinstance(r2, (ReduceSumOp, ReduceMeanOp)):
            continue
        sq = r2.operands[0].owner
        if not isinstance(sq, MulOp) or sq.operands[0] is not sq.operands[1] or not _only_user(a, sq.results[0], r2):
            continue
        d = sq.operands[0]
        sub = d.owner
        if not isinstance(sub, SubOp) or list(a.users.get(d, ())).count(sq) != len(a.users.get(d, ())):
            continue
        u, m = sub.operands
        if not _only_user(a, m, sub):
            continue
        axes = tuple(r2.axes_list())
        shape = tuple(int(s) for s in u.type.get_shape())
        count = int(np.prod([shape[k] for k in axes])) if axes else 1
        mop = m.owner
        ops: tuple[Any, ...]
        if isinstance(mop, ReduceMeanOp):
            r1, ops = mop, (mop, sub, sq)
        elif isinstance(mop, DivOp) and isinstance(mop.operands[0].owner, ReduceSumOp) \
                and _splat(mop.operands[1]) == float(count) and _only_user(a, mop.operands[0], mop):
            r1, ops = mop.operands[0].owner, (mop.operands[0].owner, mop, sub, sq)
        else:
            continue
        if r1.operands[0] is not u or tuple(r1.axes_list()) != axes or r1.keepdims is None:
            continue
        found[r2] = Variance(u, r1, r2, axes, ops)
    return found


def _combined(x: np.ndarray, axis: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, mean, m2 = x[0], x[1], x[2]
    total = n.sum(axis=axis, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    mu = (n * mean).sum(axis=axis, keepdims=True) / safe
    moment = m2.sum(axis=axis, keepdims=True) + (n * (mean - mu) ** 2).sum(axis=axis, keepdims=True)
    return total, mu, moment


def _plane_axes(axis: Any) -> tuple[int, ...]:
    """dask passes the stacked array's axes; the planes x[k] have one axis fewer."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(k - 1 for k in axis)


class StackedCombine:
    """Combine stacked (n, mean, M2) partials along `axis` (of the stacked array)."""

    def __call__(self, x: np.ndarray, axis: Any = None, keepdims: bool = True) -> np.ndarray:
        planes = _combined(x, _plane_axes(axis))
        out = np.stack(planes)
        return out if keepdims else np.squeeze(out, axis=axis)
