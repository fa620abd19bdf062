"""np.einsum on traced arrays: one planner for contractions written as subscripts.

Owns parsing einsum's subscripts (explicit `->`, numpy's implicit output,
`...` for broadcast dims), and the plan: per operand, take the diagonal of
a repeated label ('ii->i') and sum a label nothing else uses; then contract
pairs in the order numpy's `np.einsum_path(optimize='greedy')` gives. A pair
with a contracted label and free labels on some side is one (batched)
`prim.matmul` between transposes and reshapes (batch labels first, the
contracted ones merged into one K axis); a pair with no contracted label, or
with nothing free on either side ('i,j->ij', 'ij,ij->i', 'i,i->'), is an
elementwise multiply and a reduce_sum, which fuses with its neighbours.
numpy's subscripts and shapes are validated by `np.einsum_path` on stand-ins
(numpy's own error, as an fb error). Labels of size 1 broadcast, as in numpy.

A rank > 2 prim.matmul has no static kernel (the BLAS thunk is 2-D): the
executor runs it as its numpy reference, np.matmul, which loops numpy's
BLAS gemm over the batch. Bool einsum is OR of ANDs (numpy's), integers
keep their dtype and wrap, as np.einsum does.

Must not: compute in another dtype than np.einsum's result type; accept a
form it cannot plan (the interleaved operand/sublist form, out=, an
explicit contraction path, optimize='optimal'): those are refused naming
the form and what to write instead.
"""

from __future__ import annotations

import math
import string
from typing import Any, Sequence

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.numpy_kernels import unsupported
from fusebind.api.numpy_probe import Probe
from fusebind.api.numpy_ufuncs import call
from fusebind.api.tracer import Graph, Tracer, as_tracer

_OPTIMIZE = (False, True, "greedy")


def _operand(graph: Graph, v: Any) -> Tracer:
    """An operand as np.asarray makes it (Python scalars are strong: int64 / float64 / bool)."""
    if isinstance(v, Tracer):
        return v
    if isinstance(v, (bool, int, float)) and not isinstance(v, np.generic):
        return K.constant(graph, v, np.asarray(v).dtype)
    return as_tracer(graph, v)


def parse(graph: Graph | None, subscripts: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    """(one label string per operand, the output labels), '...' replaced by fresh
    labels right-aligned as numpy broadcasts them. Assumes numpy validated the string."""
    s = subscripts.replace(" ", "")
    lhs, arrow, out = s.partition("->")
    terms = lhs.split(",")
    used = set(c for c in s if c.isalpha())
    fresh = [c for c in string.ascii_letters if c not in used]
    n_ell = max([nd - (len(t) - 3) for t, nd in zip(terms, ndims) if "..." in t], default=0)
    if n_ell > len(fresh):
        raise unsupported(graph, f"numpy.einsum('{subscripts}'): too many broadcast dims for fusebind's labels")
    ell = "".join(fresh[:n_ell])
    expanded = []
    for t, nd in zip(terms, ndims):
        if "..." in t:
            k = nd - (len(t) - 3)
            t = t.replace("...", ell[n_ell - k:] if k else "")
        expanded.append(t)
    if arrow:
        output = out.replace("...", ell)
    else:  # numpy's implicit output: the broadcast dims, then the labels used once, sorted
        counts = "".join(terms).replace(".", "")
        output = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1))
    return expanded, output


def _reduce_sum(x: Tracer, axes: Sequence[int]) -> Tracer:
    """Sum in x's own dtype (as np.einsum does); bool sums are ORs."""
    return K.reduce("any" if x.dtype == np.bool_ else "sum", x, tuple(axes))


def _sum_labels(x: Tracer, labels: str, drop: set[str]) -> tuple[Tracer, str]:
    axes = [i for i, c in enumerate(labels) if c in drop]
    return _reduce_sum(x, axes), "".join(c for c in labels if c not in drop)


def _diagonals(x: Tracer, labels: str, what: str) -> tuple[Tracer, str]:
    """Take the diagonal of each label repeated in one operand ('ii->i'); the label moves last."""
    from fusebind.api.numpy_gathers import _diagonal

    while True:
        repeated = next((c for c in labels if labels.count(c) > 1), None)
        if repeated is None:
            return x, labels
        i = labels.index(repeated)
        j = labels.index(repeated, i + 1)
        x = _diagonal(x, 0, i, j, what)
        labels = "".join(c for k, c in enumerate(labels) if k not in (i, j)) + repeated


def _order(x: Tracer, labels: str, want: Sequence[str]) -> Tracer:
    return K.transpose(x, [labels.index(c) for c in want])


def _pair(a: Tracer, la: str, b: Tracer, lb: str, keep: set[str], sizes: dict[str, int]) -> tuple[Tracer, str]:
    """Contract two operands, keeping the labels in `keep`."""
    a, la = _sum_labels(a, la, {c for c in la if c not in lb and c not in keep})
    b, lb = _sum_labels(b, lb, {c for c in lb if c not in la and c not in keep})
    batch = [c for c in la if c in lb and c in keep]
    contr = [c for c in la if c in lb and c not in keep]
    lfree = [c for c in la if c not in lb]
    rfree = [c for c in lb if c not in la]
    out = "".join(batch + lfree + rfree)
    size = [sizes[c] for c in out]
    if not contr or not (lfree or rfree):
        # no matmul to serve: an elementwise product (broadcast over the free labels) and a sum
        ea = K.reshape(_order(a, la, batch + lfree + contr),
                       [sizes[c] for c in batch + lfree] + [1] * len(rfree) + [sizes[c] for c in contr])
        eb = K.reshape(_order(b, lb, batch + rfree + contr),
                       [sizes[c] for c in batch] + [1] * len(lfree) + [sizes[c] for c in rfree + contr])
        prod = call(np.multiply, (ea, eb), {}, "numpy.einsum", strong=True)
        return _reduce_sum(prod, range(len(out), prod.ndim)), out
    m, n = math.prod(sizes[c] for c in lfree), math.prod(sizes[c] for c in rfree)
    k = math.prod(sizes[c] for c in contr)
    lead = tuple(sizes[c] for c in batch)  # prim.matmul takes any batch rank: no merge (often no copy)
    A = K.reshape(_order(a, la, batch + lfree + contr), lead + (m, k))
    B = K.reshape(_order(b, lb, batch + contr + rfree), lead + (k, n))
    return K.reshape(K.matmul(A, B, "einsum"), size), out


def _broadcast(x: Tracer, labels: str, sizes: dict[str, int]) -> Tracer:
    """A size-1 dim whose label is larger elsewhere broadcasts (numpy's einsum does)."""
    want = tuple(sizes[c] for c in labels)
    return K.broadcast_to(x, want) if want != x.shape else x


def einsum(p: Probe | None, subscripts: Any, *operands: Any, out: Any = None, dtype: Any = None,
           order: str = "K", casting: str = "safe", optimize: Any = False) -> Tracer:
    graph = K.graph_of(operands)
    what = "numpy.einsum"
    if not isinstance(subscripts, str):
        raise unsupported(graph, f"{what}(operand, sublist, ...): the interleaved sublist form is not supported on "
                                 "traced arrays; write the subscripts as a string, e.g. np.einsum('ij,jk->ik', a, b)")
    if out is not None:
        raise unsupported(graph, f"{what}(..., out=...) cannot write into an array inside a traced function; use "
                                 "the returned array")
    if not (optimize is False or optimize is True or optimize == "greedy"):
        raise unsupported(graph, f"{what}(..., optimize={optimize!r}) is not supported on traced arrays (fusebind "
                                 "plans the contraction itself); pass optimize=False, True or 'greedy'")
    xs = [_operand(graph, v) for v in operands]
    stand_ins = [np.broadcast_to(np.zeros((), x.dtype), x.shape) for x in xs]
    try:  # numpy validates the subscripts against the shapes, and gives the pairwise order
        path = np.einsum_path(subscripts, *stand_ins, optimize="greedy")[0][1:]
    except (ValueError, TypeError) as exc:
        raise K.from_numpy_error(graph, exc, what) from None
    if dtype is not None:
        dt = np.dtype(dtype)
        bad = next((x.dtype for x in xs if not np.can_cast(x.dtype, dt, casting)), None)
        if bad is not None:
            raise K.from_numpy_error(graph, TypeError(f"Cannot cast array data from {bad!r} to {dt!r} according to "
                                                      f"the rule {casting!r}"), what)
    else:
        dt = np.result_type(*(x.dtype for x in xs))
    dt = K.check_dtype(graph, dt, what)
    terms, output = parse(graph, subscripts, [x.ndim for x in xs])
    return contract([K.cast(x, dt) for x in xs], terms, output, what, path)


def contract(xs: Sequence[Tracer], terms: Sequence[str], output: str, what: str,
             path: Sequence[tuple[int, ...]] | None = None) -> Tracer:
    """The contraction of operands of one dtype labelled by `terms` (one label per axis,
    validated), keeping `output`'s labels in its order; `path`: numpy's pairwise order
    (None: left to right). np.tensordot and np.inner reduce to this."""
    sizes: dict[str, int] = {}
    for x, t in zip(xs, terms):
        for c, d in zip(t, x.shape):
            if sizes.get(c, 1) == 1:  # 1 broadcasts to the label's other size (0 included)
                sizes[c] = d
    work: list[tuple[Tracer, str]] = []
    for x, t in zip(xs, terms):
        work.append(_diagonals(_broadcast(x, t, sizes), t, what))
    if path is None:
        path = [(0, 1)] * (len(xs) - 1) if len(xs) > 1 else [(0,)]
    for step in path:
        picked = [work[i] for i in step]
        work = [w for i, w in enumerate(work) if i not in step]
        needed = set(output).union(*(t for _, t in work))
        x, t = picked[0]
        for i in range(1, len(picked)):
            y, u = picked[i]
            x, t = _pair(x, t, y, u, needed.union(*(v for _, v in picked[i + 1:])), sizes)
        work.append((x, t))
    (x, t), = work
    x, t = _sum_labels(x, t, {c for c in t if c not in output})
    return _order(x, t, list(output))
