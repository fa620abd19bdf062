"""Array building blocks with numpy's exact semantics, made of prim ops.

Owns what every numpy function on a traced array is built from: constants,
casts, select and the logical ops, reshape / transpose / broadcast,
reductions over normalized axes (sum, max, min, any, all, mean, with numpy's
results for empty axes), gathers and matmul with numpy's rules for 1-D
operands. Also the errors these raise, worded as numpy words them, with the
function's name.

Gathers: `gather(x, axis, idx, what)` is np.take (mode raise) by a static
index array or a traced integer tracer, the one gather everything else builds
on (advanced indexing, np.take, take_along_axis, flip / roll / repeat / tile /
pad / diag...): one `prim.gather` (a static arithmetic progression is a
`prim.slice`). Static indices are checked when tracing; traced ones read from
an argument are checked before each call (Graph.checks, the error names the
argument) and marked `in_bounds`; computed ones are checked where they are
read (the kernel's error channel, or the op's reference on arm 0). `take` is
the static form with -1 holes (the lowest value), `take_along` np.take_along_axis.

The callers (numpy_ufuncs, numpy_dispatch) have already chosen the dtypes
the way numpy does; nothing here promotes: operands of a binary op arrive in
one dtype.
Must not: decide dtypes, or parse a numpy function's user arguments.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from fusebind.api.promotion import is_floating
from fusebind.api.errors import (
    FusebindAxisError, FusebindError, FusebindIndexError, FusebindValueError, UnsupportedOperation,
)
from fusebind.dialect.errors import IndexOutOfBounds
from fusebind.api.capture import SUPPORTED_NAMES
from fusebind.api.tracer import SUPPORTED, Graph, Tracer, cast  # noqa: F401 (cast: re-exported)


# ---------------------------------------------------------------- errors
def prefix(graph: Graph | None) -> str:
    return f"fusebind: in '{graph.fn_name}': " if graph is not None else "fusebind: "


def unsupported(graph: Graph | None, msg: str) -> UnsupportedOperation:
    return UnsupportedOperation(prefix(graph) + msg)


def value_error(graph: Graph | None, msg: str) -> FusebindValueError:
    return FusebindValueError(prefix(graph) + msg)


def axis_error(graph: Graph | None, msg: str) -> FusebindAxisError:
    return FusebindAxisError(prefix(graph) + msg)


def from_numpy_error(graph: Graph | None, exc: BaseException, what: str) -> FusebindError:
    """The fusebind error for an error numpy raised (while probing a call with
    stand-in arrays): the same message, a class that is also numpy's."""
    msg = f"{what}: {exc}" if what else str(exc)
    if isinstance(exc, np.exceptions.AxisError) or "duplicate value in 'axis'" in str(exc):
        return axis_error(graph, msg)
    if isinstance(exc, IndexError):
        cls = IndexOutOfBounds if "out of bounds" in str(exc) else FusebindIndexError
        return cls(prefix(graph) + msg)
    if isinstance(exc, ValueError):
        return value_error(graph, msg)
    return unsupported(graph, msg)


def graph_of(*values: Any) -> Graph | None:
    """The graph of the first Tracer in values (searched through lists, tuples and dicts)."""
    for v in values:
        if isinstance(v, Tracer):
            return v.graph
        if isinstance(v, (list, tuple)):
            g = graph_of(*v)
            if g is not None:
                return g
        elif isinstance(v, dict):
            g = graph_of(*v.values())
            if g is not None:
                return g
    return None


def check_dtype(graph: Graph, dt: np.dtype, what: str) -> np.dtype:
    dt = np.dtype(dt)
    if dt not in SUPPORTED:
        raise unsupported(graph, f"{what} needs dtype {dt}, which fusebind does not support (it has "
                                 f"{SUPPORTED_NAMES})")
    return dt


# ---------------------------------------------------------------- leaves
def constant(graph: Graph, value: Any, dtype: Any) -> Tracer:
    from fusebind.dialect.prim import ConstantOp

    return graph.add(ConstantOp.from_array(np.asarray(value, dtype=dtype)))


def full(graph: Graph, value: Any, dtype: Any, shape: Sequence[int]) -> Tracer:
    """`value` (a scalar) broadcast to `shape`: one element in the IR, not a dense array."""
    return broadcast_to(constant(graph, value, dtype), tuple(shape))


def op(cls: Any, *xs: Tracer) -> Tracer:
    return xs[0].graph.add(cls(*(x.value for x in xs)))


def compare(pred: str, a: Tracer, b: Tracer) -> Tracer:
    from fusebind.dialect.prim import CompareOp

    return a.graph.add(CompareOp(pred, a.value, b.value))


def select(c: Tracer, a: Tracer, b: Tracer) -> Tracer:
    from fusebind.dialect.prim import SelectOp

    return c.graph.add(SelectOp(c.value, a.value, b.value))


def like(x: Tracer, value: Any) -> Tracer:
    """A 0-d constant of x's dtype."""
    return constant(x.graph, value, x.dtype)


def truth(x: Tracer) -> Tracer:
    """numpy's truth value per element (`x != 0`; NaN is true)."""
    return x if x.dtype == np.bool_ else compare("ne", x, like(x, 0))


def logical_not(b: Tracer) -> Tracer:
    return compare("eq", b, like(b, False))


def logical_and(a: Tracer, b: Tracer) -> Tracer:
    return select(a, b, a)


def logical_or(a: Tracer, b: Tracer) -> Tracer:
    return select(a, a, b)


def isnan(x: Tracer) -> Tracer:
    return compare("ne", x, x)


def lowest(dtype: np.dtype) -> Any:
    """The identity of max in this dtype: -inf, the smallest integer, False."""
    if is_floating(dtype):
        return -np.inf
    if dtype.kind in "iu":
        return int(np.iinfo(dtype).min)
    return False


# ---------------------------------------------------------------- shapes
def reshape(x: Tracer, shape: Sequence[int]) -> Tracer:
    from fusebind.dialect.prim import ReshapeOp

    shape = tuple(int(d) for d in shape)
    if shape == x.shape:
        return x
    if math.prod(shape) != x.size:
        raise value_error(x.graph, f"cannot reshape array of size {x.size} into shape {shape}")
    return x.graph.add(ReshapeOp(x.value, list(shape)))


def transpose(x: Tracer, perm: Sequence[int]) -> Tracer:
    from fusebind.dialect.prim import TransposeOp

    perm = [int(p) for p in perm]
    if perm == list(range(x.ndim)):
        return x
    return x.graph.add(TransposeOp(x.value, perm))


def broadcast_to(x: Tracer, shape: Sequence[int]) -> Tracer:
    from fusebind.dialect.prim import BroadcastToOp

    shape = tuple(int(d) for d in shape)
    if shape == x.shape:
        return x
    return x.graph.add(BroadcastToOp(x.value, list(shape)))


def check_broadcast(graph: Graph, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape, or numpy's ufunc error for shapes that do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " ".join(str(tuple(s)) for s in shapes)
        raise value_error(graph, f"operands could not be broadcast together with shapes {listed}") from None


def normalize_axes(graph: Graph, axis: Any, ndim: int) -> tuple[int, ...]:
    """numpy's reading of an `axis` argument (None: every axis), sorted;
    out of range and repeated axes raise as numpy does."""
    if axis is None:
        return tuple(range(ndim))
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise unsupported(graph, f"'{type(a).__name__}' object cannot be interpreted as an integer (axis)")
        a = int(a)
        if not -ndim <= a < ndim:
            raise axis_error(graph, f"axis {a} is out of bounds for array of dimension {ndim}")
        out.append(a % ndim if ndim else a)
    if len(set(out)) != len(out):
        raise axis_error(graph, "duplicate value in 'axis'")
    return tuple(sorted(out))


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


# ---------------------------------------------------------------- reductions
_EMPTY = {"sum": 0, "mean": np.nan, "any": False, "all": True}
_NUMPY_NAME = {"max": "maximum", "min": "minimum"}


def reduce(kind: str, x: Tracer, axes: Sequence[int], keepdims: bool = False) -> Tracer:
    """Reduce normalized `axes` of x in its own dtype: sum, mean, max, min, any, all
    (any / all take a bool x). An empty axis gives numpy's identity (0, NaN for
    mean, False, True); max / min have none and raise numpy's error."""
    from fusebind.dialect import prim

    axes = tuple(sorted(axes))
    if not axes:
        return x
    out_shape = reduced_shape(x.shape, axes, keepdims)
    if math.prod(x.shape[a] for a in axes) == 0:
        if kind in _NUMPY_NAME:
            raise value_error(x.graph, f"zero-size array to reduction operation {_NUMPY_NAME[kind]} which has no "
                                       "identity")
        return full(x.graph, _EMPTY[kind], x.dtype, out_shape)
    if math.prod(out_shape) == 0:
        return full(x.graph, 0, x.dtype, out_shape)  # nothing to compute: an empty result
    cls = {"sum": prim.ReduceSumOp, "mean": prim.ReduceMeanOp, "max": prim.ReduceMaxOp, "min": prim.ReduceMinOp,
           "any": prim.ReduceMaxOp, "all": prim.ReduceMinOp}[kind]
    if kind in ("any", "all") and x.dtype != np.bool_:
        raise unsupported(x.graph, f"internal: reduce {kind} of {x.dtype}")
    return x.graph.add(cls(x.value, list(axes), bool(keepdims)))


# ---------------------------------------------------------------- gathers
def argument_of(graph: Graph, t: Tracer) -> int | None:
    """The position of the jitted function's argument whose values are exactly t's values
    (t is it, or a reshape / transpose / broadcast / int64 widening of it), or None (t is
    computed, or a captured array)."""
    from xdsl.ir import BlockArgument

    from fusebind.dialect import prim

    v = t.value
    while not isinstance(v, BlockArgument):
        owner = v.owner
        if isinstance(owner, (prim.ReshapeOp, prim.TransposeOp, prim.BroadcastToOp)):
            if 0 in owner.results[0].type.get_shape():
                return None  # an empty broadcast reads none of its values: numpy checks none
            v = owner.operands[0]
        elif isinstance(owner, prim.CastOp) and (str(owner.operands[0].type.element_type),
                                                 str(owner.results[0].type.element_type)) == ("i32", "i64"):
            v = owner.operands[0]
        else:
            return None
    if v.owner is not graph.block or any(c.value is v for _, c in graph.captures.values()):
        return None
    return v.index


def range_check(graph: Graph, position: int, lo: int, hi: int, error: Any) -> Any:
    """A call-time check that argument #position holds values in [lo, hi); else raises
    error(first bad value, where: the argument named)."""
    fn_name = graph.fn_name

    def check(args: Any) -> None:
        a = np.asarray(args[position])
        bad = (a < lo) | (a >= hi)
        if bad.any():
            first = a.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])]
            raise error(first, f"in argument #{position} of '{fn_name}'")
    return check


def traced_indices(x: Tracer, axis: int, idx: Tracer, what: str,
                   shown_axis: int | None = None) -> tuple[Tracer, bool]:
    """Traced indices of `x`'s `axis`, as i32 / i64, and whether they are in bounds by a call-time
    check: indices read from an argument get one (its error names the argument and the first bad
    index, numpy's IndexError as fb.IndexOutOfBounds, the same on every arm); computed ones are
    checked where they are read: in the kernel (Emitter.checked_index, the kernel ABI v2 error
    channel) or by the op's reference on arm 0."""
    graph = x.graph
    if idx.dtype.kind not in "iub":
        raise from_numpy_error(graph, IndexError("arrays used as indices must be of integer (or boolean) type"), what)
    if idx.dtype == np.bool_:
        idx = cast(idx, np.int64)  # numpy reads a bool index array of take as 0 / 1
    position = argument_of(graph, idx)
    if idx.dtype not in (np.int32, np.int64):  # the gathers read i32 / i64; the call-time check reads the argument
        if idx.dtype == np.uint64 and position is None:
            raise unsupported(graph, f"{what}: a computed uint64 index array is not supported (values from 2**63 "
                                     "would read as negative); cast it with .astype(np.int64)")
        idx = cast(idx, np.int64)
    if position is None:
        return idx, False
    n, pre, shown = x.shape[axis], prefix(graph), axis if shown_axis is None else shown_axis
    graph.checks.append(range_check(graph, position, -n, n, lambda i, where: IndexOutOfBounds(
        f"{pre}{what}: index {i} is out of bounds for axis {shown} with size {n} ({where})")))
    return idx, True


def gather(x: Tracer, axis: int, idx: Tracer | np.ndarray, what: str, shown_axis: int | None = None) -> Tracer:
    """np.take(x, idx, axis=axis) (mode raise) for a normalized `axis`: the one gather the
    others build on (advanced indexing, take, take_along_axis...). `idx` is a static integer
    array (checked now: an index outside [-n, n) raises fb.IndexOutOfBounds with numpy's
    message, prefixed by `what`) or a traced integer tracer (checked at call time when read
    from an argument, see `traced_indices`). Result shape: x.shape[:axis] + idx.shape +
    x.shape[axis+1:]. One `prim.gather`, an index map that fuses into its consumer.
    `shown_axis`: the axis an error message names (numpy's, when `x` is an intermediate whose
    axes are numbered differently, as in advanced indexing); `axis` by default."""
    from fusebind.dialect.prim_gather import GatherOp

    graph = x.graph
    if isinstance(idx, Tracer):
        idx, checked = traced_indices(x, axis, idx, what, shown_axis)
        out_shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
        if math.prod(out_shape) == 0 and x.shape[axis] != 0:
            return full(graph, 0, x.dtype, out_shape)
        return graph.add(GatherOp(x.value, idx.value, axis, in_bounds=checked, error_axis=shown_axis))
    from fusebind.dialect.prim_gather import check_range

    n = x.shape[axis]
    raw = np.asarray(idx)
    if raw.dtype.kind not in "iub":
        raise from_numpy_error(graph, IndexError("arrays used as indices must be of integer (or boolean) type"), what)
    try:
        pos = check_range(raw, axis if shown_axis is None else shown_axis, n)
    except IndexOutOfBounds as err:
        raise IndexOutOfBounds(f"{prefix(graph)}{what}: {err}") from None
    out_shape = x.shape[:axis] + pos.shape + x.shape[axis + 1:]
    if math.prod(out_shape) == 0:
        return full(graph, 0, x.dtype, out_shape)
    if pos.ndim == 1 and np.array_equal(pos, np.arange(n)):
        return x
    steps = np.unique(np.diff(pos.reshape(-1))) if pos.size > 1 else np.ones(1, np.int64)
    if pos.ndim <= 1 and steps.size == 1 and steps[0] != 0:  # an arithmetic progression: a strided slice
        return _progression(x, axis, int(pos.reshape(-1)[0]), int(steps[0]), pos.size, pos.shape)
    if n == 1:  # every index is 0: a broadcast along the new index dims
        return broadcast_to(reshape(x, x.shape[:axis] + (1,) * pos.ndim + x.shape[axis + 1:]), out_shape)
    small = np.int32 if n <= np.iinfo(np.int32).max else np.int64  # half the index bytes
    return graph.add(GatherOp(x.value, constant(graph, pos.astype(small), small).value, axis))


def _progression(x: Tracer, axis: int, start: int, step: int, count: int, shape: tuple[int, ...]) -> Tracer:
    """x's positions start, start + step, ... (count of them, in range) along `axis`, as one
    prim.slice (an index map with no index array), reshaped to the index shape (0-d or 1-d)."""
    from fusebind.dialect.prim_layout import SliceOp

    n = x.shape[axis]
    last = start + (count - 1) * step
    limit = min(last + step, n) if step > 0 else max(last + step, -1)
    bounds = [(0, d, 1) for d in x.shape]
    bounds[axis] = (start, limit, step)
    starts, limits, strides = zip(*bounds)
    y = x.graph.add(SliceOp(x.value, starts, limits, strides))
    return reshape(y, x.shape[:axis] + shape + x.shape[axis + 1:])


def take(x: Tracer, axis: int, idx: np.ndarray, what: str) -> Tracer:
    """np.take(x, idx, axis) for static indices normalized to 0..n-1, where an index of -1
    takes no element and gives the lowest value of the dtype (the identity of max, which the
    concatenation in numpy_joins combines with; pad and diag replace it after). A gather of
    the other positions, and a select where the index is -1."""
    idx = np.asarray(idx, dtype=np.int64)
    out_shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    if math.prod(out_shape) == 0:
        return full(x.graph, 0, x.dtype, out_shape)
    hole = idx == -1
    if not hole.any():
        return gather(x, axis, idx, what)
    if hole.all():
        return full(x.graph, lowest(x.dtype), x.dtype, out_shape)
    picked = gather(x, axis, np.where(hole, 0, idx), what)
    lane = (1,) * axis + idx.shape + (1,) * (x.ndim - axis - 1)
    return select(constant(x.graph, hole.reshape(lane), np.bool_), like(x, lowest(x.dtype)), picked)


def take_along(x: Tracer, axis: int, idx: Tracer, what: str, shown_axis: int | None = None) -> Tracer:
    """np.take_along_axis(x, idx, axis) for traced integer indices of x's rank and a normalized
    axis (the other dims broadcast, numpy 2): one `prim.take_along`, checked as `gather` checks
    (`shown_axis` as there)."""
    from fusebind.dialect.prim_gather import TakeAlongOp

    graph = x.graph
    idx, checked = traced_indices(x, axis, idx, what, shown_axis)
    out_shape = check_broadcast(graph, x.shape[:axis] + (1,) + x.shape[axis + 1:],
                                idx.shape[:axis] + (1,) + idx.shape[axis + 1:])
    out_shape = out_shape[:axis] + (idx.shape[axis],) + out_shape[axis + 1:]
    if math.prod(out_shape) == 0 and x.shape[axis] != 0:
        return full(graph, 0, x.dtype, out_shape)
    return graph.add(TakeAlongOp(x.value, idx.value, axis, in_bounds=checked, error_axis=shown_axis))


def take_along_last(x: Tracer, idx: Tracer, what: str) -> Tracer:
    """np.take_along_axis(x, idx, axis=-1) for traced integer indices (see take_along)."""
    return take_along(x, x.ndim - 1, idx, what)


# ---------------------------------------------------------------- matmul
_MATMUL_SIG = "(n?,k),(k,m?)->(n?,m?)"


def matmul(a: Tracer, b: Tracer, name: str = "matmul") -> Tracer:
    """np.matmul of operands of one dtype: 1-D operands are promoted to a
    matrix and the added axis removed after; batch dims broadcast; bool is
    the OR of ANDs (counted in int64, then compared with 0)."""
    from fusebind.dialect.prim import MatmulOp

    graph = a.graph
    for i, t in enumerate((a, b)):
        if t.ndim == 0:
            raise value_error(graph, f"{name}: Input operand {i} does not have enough dimensions (has 0, gufunc core "
                                     f"with signature {_MATMUL_SIG} requires 1)")
    a2 = reshape(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = reshape(b, b.shape + (1,)) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise value_error(graph, f"{name}: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                                 f"signature {_MATMUL_SIG} (size {b2.shape[-2]} is different from {a2.shape[-1]})")
    batch = check_broadcast(graph, a2.shape[:-2], b2.shape[:-2])
    shape = list(batch) + [a2.shape[-2], b2.shape[-1]]
    if a.ndim == 1:
        del shape[-2]
    if b.ndim == 1:
        del shape[-1]
    if math.prod(shape) == 0 or a2.shape[-1] == 0:  # an empty result, or sums over nothing
        return full(graph, 0, a.dtype, shape)
    if a.dtype == np.bool_:
        counted = matmul(cast(a, np.int64), cast(b, np.int64), name)
        return compare("ne", counted, constant(graph, 0, np.int64))
    return reshape(graph.add(MatmulOp(a2.value, b2.value)), shape)


# ---------------------------------------------------------------- gufuncs (np.matmul, np.vecdot, ...)
_GUFUNC_SIGNATURES = {"vecdot": "(n),(n)->()", "matvec": "(m,n),(n)->(m)", "vecmat": "(n),(n,m)->(m)"}


def gufunc(name: str, xs: Sequence[Tracer], what: str, axis: int = -1) -> Tracer:
    """matmul / vecdot / matvec / vecmat of operands already in the loop dtype (numpy_ufuncs.call)."""
    from fusebind.dialect.prim import MulOp

    a, b = xs
    graph = a.graph
    if name == "matmul":
        return matmul(a, b, "matmul")
    sig = _GUFUNC_SIGNATURES[name]
    need = {"vecdot": (1, 1), "matvec": (2, 1), "vecmat": (1, 2)}[name]
    for i, (t, r) in enumerate(zip((a, b), need)):
        if t.ndim < r:
            raise value_error(graph, f"{name}: Input operand {i} does not have enough dimensions (has {t.ndim}, "
                                     f"gufunc core with signature {sig} requires {r})")
    if name == "vecdot":
        a = transpose(a, [i for i in range(a.ndim) if i != axis % a.ndim] + [axis % a.ndim])
        b = transpose(b, [i for i in range(b.ndim) if i != axis % b.ndim] + [axis % b.ndim])
    n_a = a.shape[-1]
    n_b = b.shape[-2] if name == "vecmat" else b.shape[-1]
    if n_a != n_b:
        raise value_error(graph, f"{name}: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                                 f"signature {sig} (size {n_b} is different from {n_a})")
    if name == "vecdot":
        check_broadcast(graph, a.shape[:-1], b.shape[:-1])
        prod = logical_and(a, b) if a.dtype == np.bool_ else op(MulOp, a, b)
        return reduce("any" if a.dtype == np.bool_ else "sum", prod, (len(prod.shape) - 1,))
    if name == "matvec":
        r = matmul(a, reshape(b, b.shape + (1,)), name)
        return reshape(r, r.shape[:-1])
    r = matmul(reshape(a, a.shape[:-1] + (1, n_a)), b, name)
    return reshape(r, r.shape[:-2] + r.shape[-1:])
