"""The tiled attention kernel: `softmax(q @ kT * scale + mask) @ v` without the S x S scores.

This is the general arm: the native kernel (runtime/attention_native.py) computes the f32 calls
with no mask or a shared keep-mask it can plan exactly, in one native call; this loop computes
the rest (f64, additive and per-head masks, rows keeping nothing, fills that do not vanish).

`attention(q, kt, v, out, args, softmax, scratch, plans)` computes, for every batch/head index at
once, one block of query rows at a time: that block's scores against the keys it needs (BLAS,
through numpy's matmul on strided views: no copy of kT or v), the row softmax of the block (a
native kernel, `softmax(s, p)`: attention_bind.py compiles the catalog's softmax recipe for it),
and the block's `p @ v` (BLAS again) into its rows of `out`. The scores of one block (`heads x
rows x keys`, `BLOCK_ELEMENTS` at most) are the only temporaries, never `Sq x Sk` per head. The
softmax is exact per block row (two passes over a block in cache), not an online rescaling: every
key of a row is in its block.

Masks: a boolean mask shared by every batch/head (`[.., Sq, Sk]`, leading ones) is planned once
per mask value (`MaskPlans`): each query block computes only the key span between its first and
last kept key, and adds 0 / -inf on the columns inside the span that drop anything. Both are
exact against numpy's `where(keep, s, fill)` when `exp(fill - rowmax)` is 0 in the element type,
which the kernel checks per call (`fill + max|score|` below the smallest exponent, `_EXP_ZERO`),
and when every row keeps a score; otherwise it computes every column with numpy's `where`. A
causal mask so computes about half of the tiles. Per-head masks and additive masks are applied
as they are, over every column.

Numerics against numpy's composition: the scale is applied to q (S x D values) instead of the
scores (S x S), one rounding moved; results are within a few ulp of the row's scale, inside the
fused-arm tolerance (arms.py: rtol 1e-4 for f32).

Must not: import the compiler's IR or bind kernels (attention_bind.py does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: per element type: below this, exp(x) rounds to 0 (f32: exp(-104) < 2^-149; f64: exp(-746) < 2^-1074)
_EXP_ZERO = {np.dtype(np.float32): -104.0, np.dtype(np.float64): -746.0}

#: elements of one block's scores (one head): 256 KiB of f32, so a block's scores and
#: probabilities stay in a 512 KiB L2 with the head's kT and v
BLOCK_ELEMENTS = 1 << 16

#: at least this many query rows per block: BLAS on fewer rows measured slower than the unfused
#: arm (S=2048, no mask, 32-row blocks: 0.8x)
MIN_ROWS = 128


@dataclass(frozen=True)
class AttentionArgs:
    """What the kernel needs besides q, kT, v: the scale (None, or (kind, value) with kind "mul"
    or "div"), the mask kind (None, "keep", "drop", "add") and its array, and the fill value."""

    scale: tuple[str, float] | None
    mask_kind: str | None
    mask: np.ndarray | None
    fill: float | None


def block_rows(heads: int, sk: int, sq: int) -> int:
    """Query rows per block: the scores of `heads` heads stay within BLOCK_ELEMENTS, at least 16."""
    rows = max(MIN_ROWS, BLOCK_ELEMENTS // max(1, heads * sk))
    rows = 1 << (rows.bit_length() - 1)  # a power of two
    return min(rows, sq)


def _numpy_softmax(s: np.ndarray, p: np.ndarray) -> None:
    """softmax of `s` over the last axis into `p` (when no native kernel is given)."""
    np.subtract(s, s.max(axis=-1, keepdims=True), out=p)
    np.exp(p, out=p)
    np.divide(p, p.sum(axis=-1, keepdims=True), out=p)


def _scaled(q: np.ndarray, scale: tuple[str, float] | None) -> np.ndarray:
    """q with the scores' scale applied (once, to S x D values instead of S x S scores)."""
    if scale is None:
        return q
    kind, c = scale
    return (np.divide if kind == "div" else np.multiply)(q, q.dtype.type(c))


def _score_bound(q: np.ndarray, kt: np.ndarray) -> float:
    """An upper bound of |q_i . k_j| over every row and key: D * max|q| * max|k| (inf/NaN passed
    on); loose, but four cheap reductions (over memory order: a transposed view is not copied),
    and the fills it is compared with are huge."""
    with np.errstate(all="ignore"):
        qf, kf = q.ravel(order="K"), kt.ravel(order="K")
        qa = max(float(qf.max()), -float(qf.min()))
        ka = max(float(kf.max()), -float(kf.min()))
        return float(q.shape[-1]) * qa * ka * (1 + 1e-6)


@dataclass(frozen=True)
class BlockPlan:
    """One query block [i0, i1) of a shared 2-D keep-mask: the key span [lo, hi) it computes
    (all of it when a row keeps nothing), and on [c0, c1) the 0 / -inf tile added to the scores
    (None: the span keeps everything)."""

    i0: int
    i1: int
    lo: int
    hi: int
    c0: int
    c1: int
    bias: np.ndarray | None


def mask_plan(keep: np.ndarray, rows: int, dtype: np.dtype) -> tuple[bool, list[BlockPlan]]:
    """(every row keeps a score, the blocks) of a 2-D keep-mask `[Sq, Sk]`."""
    sq, sk = keep.shape
    kept_rows = keep.any(axis=1)
    first = keep.argmax(axis=1)
    last = sk - 1 - keep[:, ::-1].argmax(axis=1)
    blocks = []
    for i0 in range(0, sq, rows):
        i1 = min(sq, i0 + rows)
        if not kept_rows[i0:i1].all():
            blocks.append(BlockPlan(i0, i1, 0, sk, 0, 0, None))
            continue
        lo, hi = int(first[i0:i1].min()), int(last[i0:i1].max()) + 1
        tile = keep[i0:i1, lo:hi]
        dropping = np.flatnonzero(~tile.all(axis=0))
        if dropping.size == 0:
            blocks.append(BlockPlan(i0, i1, lo, hi, 0, 0, None))
            continue
        c0, c1 = int(dropping[0]), int(dropping[-1]) + 1
        bias = np.where(tile[:, c0:c1], dtype.type(0), dtype.type(-np.inf))
        blocks.append(BlockPlan(i0, i1, lo, hi, c0, c1, bias))
    return bool(kept_rows.all()), blocks


class MaskPlans:
    """The last mask's plan, reused while the mask's values are the same (one comparison of
    Sq x Sk bools per call, against rebuilding the spans and tiles)."""

    def __init__(self) -> None:
        self.key: tuple[int, np.dtype] | None = None
        self.mask: np.ndarray | None = None
        self.plan: tuple[bool, list[BlockPlan]] | None = None

    def get(self, keep: np.ndarray, rows: int, dtype: np.dtype) -> tuple[bool, list[BlockPlan]]:
        if (self.plan is None or self.key != (rows, dtype) or self.mask is None
                or self.mask.shape != keep.shape or not np.array_equal(self.mask, keep)):
            self.plan = mask_plan(keep, rows, dtype)
            self.mask, self.key = np.array(keep, copy=True), (rows, dtype)
        return self.plan


def attention(q: np.ndarray, kt: np.ndarray, v: np.ndarray, out: np.ndarray, args: AttentionArgs,
              softmax: Callable[[np.ndarray, np.ndarray], None] = _numpy_softmax,
              scratch: Callable[[np.dtype, int], np.ndarray] | None = None,
              plans: MaskPlans | None = None) -> None:
    """Write the attention of q `[..., Sq, D]`, kT `[..., D, Sk]`, v `[..., Sk, Dv]` into `out`
    `[..., Sq, Dv]` (one float dtype, equal batch dims; views whose matrices BLAS reads with a
    leading dimension, e.g. transposes of C-contiguous arrays that keep the last axis among the
    last two; `out` may be such a view too). `softmax(s, p)`: the
    row softmax of a C-contiguous `[n, rows, keys]` block `s` into `p` of its shape (a native
    kernel; out of place: the generated row kernel measured ~6x slower writing over its input).
    `scratch(dtype, n)`: a reusable 1-D buffer of n elements (None: fresh arrays per call);
    `plans`: the mask-plan cache (None: planned per call)."""
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    lead = q.shape[:-2]
    q4 = _scaled(q, args.scale)
    keep, add = _mask_arrays(args, lead, sq, sk)
    rows = block_rows(1, sk, sq)
    buf, pbuf = scratch(q.dtype, 2 * rows * sk).reshape(2, -1) if scratch else \
        np.empty((2, rows * sk), dtype=q.dtype)
    blocks: list[BlockPlan] | None = None
    if keep is not None and keep.ndim == 2 and args.fill is not None:
        # Columns outside a block's span hold `fill`, whose exp(fill - rowmax) is exactly 0 when
        # fill + max|score| underflows (rowmax >= -max|score|): then the span alone is computed,
        # and inside it 0 / -inf is added (both exact: -inf and fill give the same 0). A row
        # that keeps nothing, or a fill that does not vanish, takes numpy's exact `where`.
        all_rows, planned = (plans or MaskPlans()).get(keep, rows, q.dtype)
        if all_rows and float(args.fill) + _score_bound(q4, kt) < _EXP_ZERO[q.dtype]:
            blocks = planned
    if blocks is None:
        blocks = [BlockPlan(i0, min(sq, i0 + rows), 0, sk, 0, 0, None) for i0 in range(0, sq, rows)]
        exact = keep
    else:
        exact = None
    fill = q.dtype.type(args.fill) if args.fill is not None else None
    # one head at a time: its kT and v (2 x D x Sk) stay in cache across its blocks, and each
    # block is one BLAS call of `rows` rows (a batched call over heads packed kT per head for
    # blocks of few rows: measured slower on the unmasked S=512 block)
    for h in np.ndindex(*lead):
        qh, kth, vh, oh = q4[h], kt[h], v[h], out[h]
        eh = None if exact is None else exact if exact.ndim == 2 else exact[h]
        ah = None if add is None else add if add.ndim == 2 else add[h]
        for b in blocks:
            shape = (1, b.i1 - b.i0, b.hi - b.lo)
            s3, p3 = buf[:math.prod(shape)].reshape(shape), pbuf[:math.prod(shape)].reshape(shape)
            sb = s3[0]
            np.matmul(qh[b.i0:b.i1], kth[:, b.lo:b.hi], out=sb)
            if b.bias is not None:
                part = sb[:, b.c0:b.c1]
                np.add(part, b.bias, out=part)
            elif eh is not None:
                np.copyto(sb, fill, where=~eh[b.i0:b.i1])
            elif ah is not None:
                np.add(sb, ah[b.i0:b.i1], out=sb)
            softmax(s3, p3)
            np.matmul(p3[0], vh[b.lo:b.hi], out=oh[b.i0:b.i1])


def _mask_arrays(args: AttentionArgs, lead: tuple[int, ...], sq: int,
                 sk: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(keep, add): the boolean keep-mask or the additive mask, 2-D `[Sq, Sk]` when every
    batch/head shares it, else broadcast to `[*lead, Sq, Sk]`."""
    if args.mask_kind is None or args.mask is None:
        return None, None
    m = np.asarray(args.mask)
    if args.mask_kind in ("keep", "drop"):
        m = m.astype(bool, copy=False)
        if args.mask_kind == "drop":
            m = ~m
    shared = m.ndim <= 2 or all(x == 1 for x in m.shape[:-2])
    if shared:
        m2 = np.broadcast_to(m.reshape(m.shape[-2:]) if m.ndim >= 2 else m, (sq, sk))
        return (m2, None) if args.mask_kind != "add" else (None, m2)
    m4 = np.broadcast_to(m, (*lead, sq, sk))
    return (m4, None) if args.mask_kind != "add" else (None, m4)
