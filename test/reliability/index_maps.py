"""Index-map ops for the differential corpus: slice, gather, take_along, concat, ... (and scatter,
which moves elements by indices too, but writes: WRITE_KINDS).

The generators are keyed by op KIND and offered only for the KINDs the op registry holds with the
`INDEX_MAP` fact (`available_kinds`), so an index-map op joins the corpus the moment it is
registered, and `test_every_index_map_op_has_a_generator` (test_differential.py) fails when one
is registered that has none here.

Every generator maps a value of a 2-D shape to a value of the same shape, so the graph around it
(binary ops against full arguments, rows, columns) needs no change:
- slice: `cur[::±1, ::±1]`, or a strided window (steps ±1, ±2, any offsets) of a wider argument;
- gather: `np.take(cur, idx, axis)` with idx of the axis's length, negatives included, as a
  dense constant or as an i32 / i64 argument (its values drawn in range by `index_values`);
- take_along: `np.take_along_axis(cur, idx, axis)` with idx full or broadcast along the other dim;
- concat: two pieces of `cur` cut at `k` along an axis, joined in either order (a roll);
- scatter: `.at` along an axis (set / add / min / max, mul on integers) of K updates per line,
  indices constant or traced (in range, repeats included), updates a scalar or an argument;
- window: a k-tap window along axis 1 padded by k - 1 (the fill the max never picks), then the
  max over the taps (a 1-D max pool of stride 1 that keeps the shape).
Values and error bounds are numpy's same selection of the operand's values and bounds (an index
map moves elements; it adds no rounding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

INDEX_ELEMS = ("i64", "i32")


def registered_index_map_kinds() -> tuple[str, ...]:
    """The KINDs of the built-in ops whose `INDEX_MAP` fact is set."""
    from fusebind.dialect.registry import is_user_op, registered_ops

    return tuple(sorted({cls.KIND for cls in registered_ops() if getattr(cls, "INDEX_MAP", False)
                         and not is_user_op(cls)}))


#: ops that are not index maps but move elements by indices too (they write): generated when registered
WRITE_KINDS = ("scatter",)


def available_kinds() -> tuple[str, ...]:
    """The registered index-map KINDs this module can generate, then the registered WRITE_KINDS."""
    from fusebind.dialect.registry import registered_ops

    kinds = {cls.KIND for cls in registered_ops()}
    return tuple(k for k in registered_index_map_kinds() if k in GENERATORS) + \
        tuple(k for k in WRITE_KINDS if k in kinds)


@dataclass
class Plan:
    """An index map chosen before the graph's arguments are fixed: the extra arguments it reads
    (`extra`: (elem, shape, index bound or None)) and the draws it made."""

    kind: str
    extra: list[tuple[str, tuple[int, ...], int | None]] = field(default_factory=list)
    choice: dict[str, Any] = field(default_factory=dict)
    arg_positions: list[int] = field(default_factory=list)


# --------------------------------------------------------------------------- planning

def plan(c: Any, kind: str, shape: tuple[int, int], elem: str) -> Plan:
    """Draw the shape-level choices of one `kind` map on values of `shape`."""
    R, C = shape
    p = Plan(kind)
    if kind == "slice":
        p.choice["wide"] = c.int(0, 1) == 1
        if p.choice["wide"]:
            steps = [c.pick((1, 2, -1, -2)) for _ in range(2)]
            wide = tuple(n * abs(k) + c.int(0, 2) for n, k in zip(shape, steps))
            starts = []
            for n, k, w in zip(shape, steps, wide):
                span = (n - 1) * abs(k)  # distance from the first element read to the last
                lo = 0 if k > 0 else span
                starts.append(c.int(lo, lo + (w - 1 - span)))
            p.choice.update(steps=steps, starts=starts, wide=wide)
            p.extra.append((elem, wide, None))
        else:
            p.choice["steps"] = [c.pick((1, -1)) for _ in range(2)]
    elif kind in ("gather", "take_along"):
        axis = c.int(0, 1)
        n = shape[axis]
        p.choice.update(axis=axis, traced=c.int(0, 2) == 0, ielem=c.pick(INDEX_ELEMS),
                        mul=c.pick((1, 3, 5)), off=c.int(0, max(0, n - 1)), neg=c.int(0, 1))
        if kind == "take_along":
            p.choice["bcast"] = c.int(0, 2) == 0  # idx has 1 along the other dim
        if p.choice["traced"]:
            p.extra.append((p.choice["ielem"], index_shape(p, shape), n))
    elif kind == "scatter":  # np.put_along_axis / ufunc.at along `axis`: K updates per line
        axis = c.int(0, 1)
        modes = ("set", "add", "min", "max") + (("mul",) if elem.startswith("i") else ())
        p.choice.update(axis=axis, traced=c.int(0, 1) == 1, ielem=c.pick(INDEX_ELEMS), mul=c.pick((1, 3)),
                        off=c.int(0, max(0, shape[axis] - 1)), neg=c.int(0, 1), k=c.pick((1, 3, 5)),
                        bcast=c.int(0, 2) == 0, mode=c.pick(modes), scalar=c.int(0, 2) == 0)
        if p.choice["traced"]:
            p.extra.append((p.choice["ielem"], index_shape(p, shape), shape[axis]))
        if not p.choice["scalar"]:
            p.extra.append((elem, update_shape(p, shape), None))
    elif kind == "window":  # a max pool along axis 1: k taps, padded so the length is kept
        k = c.pick((1, 2, 3))
        p.choice.update(k=k, lo=c.int(0, k - 1))
    elif kind == "concat":
        axes = [a for a in (0, 1) if shape[a] >= 2]
        p.choice["axis"] = c.pick(tuple(axes)) if axes else None
        if axes:
            p.choice.update(cut=c.int(1, shape[p.choice["axis"]] - 1), swap=c.int(0, 1) == 1)
    return p


def update_shape(p: Plan, shape: tuple[int, int]) -> tuple[int, ...]:
    """A scatter's updates: x's shape with the axis dim replaced by K."""
    return tuple(p.choice["k"] if d == p.choice["axis"] else shape[d] for d in range(2))


def index_shape(p: Plan, shape: tuple[int, int]) -> tuple[int, ...]:
    axis = p.choice["axis"]
    if p.kind == "scatter":
        return tuple(1 if d != axis and p.choice["bcast"] else n for d, n in enumerate(update_shape(p, shape)))
    if p.kind == "gather":
        return (shape[axis],)
    if p.choice.get("bcast"):
        return tuple(shape[d] if d == axis else 1 for d in range(2))
    return tuple(shape)


def constant_indices(p: Plan, shape: tuple[int, int]) -> np.ndarray:
    """In-range indices for a constant idx: a stride-`mul` walk from `off`, every other one
    written negatively (numpy's from-the-end form)."""
    n = shape[p.choice["axis"]]
    ishape = index_shape(p, shape)
    j = np.arange(int(np.prod(ishape))).reshape(ishape)
    v = (j * p.choice["mul"] + p.choice["off"]) % n
    return np.where((j + p.choice["neg"]) % 2 == 1, v - n, v)


def index_values(rng: np.random.Generator, elem_dtype: Any, shape: tuple[int, ...], bound: int) -> np.ndarray:
    """An index argument's values: in [-bound, bound) (negative counts from the end)."""
    return rng.integers(-bound, bound, size=shape).astype(elem_dtype)


# --------------------------------------------------------------------------- applying

def apply(p: Plan, g: Any, cur: int) -> int:
    """Append the ops of `p` to graph `g` reading value `cur`; returns the new value (cur's shape)."""
    elem, shape = g.values[cur]
    R, C = shape
    if p.kind == "slice":
        steps = p.choice["steps"]
        if p.choice["wide"]:
            src = p.arg_positions[0]
            starts = p.choice["starts"]
            limits = [s + (n - 1) * k + (1 if k > 0 else -1) for s, n, k in zip(starts, shape, steps)]
        else:
            src = cur
            starts = [0 if k > 0 else n - 1 for n, k in zip(shape, steps)]
            limits = [n if k > 0 else -1 for n, k in zip(shape, steps)]
        return g.add("slice", [src], elem, shape, starts=starts, limits=limits, strides=list(steps))
    if p.kind == "scatter":
        ishape = index_shape(p, shape)
        if p.choice["traced"]:
            idx = p.arg_positions[0]
        else:
            idx = g.add("const", [], p.choice["ielem"], ishape, value=constant_indices(p, shape).tolist())
        if p.choice["scalar"]:
            v = g.add("const", [], elem, (), value=(-3 if elem.startswith("i") else 0.75))
        else:
            v = p.arg_positions[-1]
        return g.add("scatter", [cur, idx, v], elem, shape, axis=p.choice["axis"], mode=p.choice["mode"])
    if p.kind in ("gather", "take_along"):
        ishape = index_shape(p, shape)
        if p.choice["traced"]:
            idx = p.arg_positions[0]
        else:
            vals = constant_indices(p, shape)
            idx = g.add("const", [], p.choice["ielem"], ishape, value=vals.tolist())
        return g.add(p.kind, [cur, idx], elem, shape, axis=p.choice["axis"])
    if p.kind == "window":  # (R, C) -> (R, k, C) -> max over the taps -> (R, C)
        k, lo = p.choice["k"], p.choice["lo"]
        w = g.add("window", [cur], elem, (R, k, C), window=[k], strides=[1], dilations=[1], lhs_dilation=[1],
                  pads_lo=[lo], pads_hi=[k - 1 - lo], fill=window_fill(elem))
        return g.add("reduce_max", [w], elem, shape, axis=1, keepdims=False)
    if p.kind == "concat":
        axis = p.choice["axis"]
        if axis is None:  # a 1x1 value: a concat of one operand
            return g.add("concat", [cur], elem, shape, axis=0)
        k, n = p.choice["cut"], shape[axis]
        pieces = []
        for lo, hi in ((0, k), (k, n)):
            starts = [lo if d == axis else 0 for d in range(2)]
            limits = [hi if d == axis else shape[d] for d in range(2)]
            pshape = tuple(hi - lo if d == axis else shape[d] for d in range(2))
            pieces.append(g.add("slice", [cur], elem, pshape, starts=starts, limits=limits, strides=[1, 1]))
        if p.choice["swap"]:
            pieces.reverse()
        return g.add("concat", pieces, elem, shape, axis=axis)
    raise ValueError(f"no generator for index map {p.kind}")


#: the KINDs `plan` / `apply` / `mlir_line` / `evaluate` know
GENERATORS = frozenset({"slice", "gather", "take_along", "concat", "scatter", "window"})


# --------------------------------------------------------------------------- text and numpy

def mlir_line(kind: str, res: str, ins: list[str], its: list[str], rt: str, attrs: dict[str, Any]) -> str | None:
    """The prim text of an index-map op, or None when `kind` is not one."""
    if kind == "slice":
        props = ", ".join(f"{k} = {list(attrs[k])}" for k in ("starts", "limits", "strides"))
        return f"  {res} = prim.slice {ins[0]} {{{props}}} : {its[0]} -> {rt}"
    if kind == "scatter":
        return (f"  {res} = prim.scatter {', '.join(ins)} {{mode = \"{attrs['mode']}\", axis = {attrs['axis']}}} : "
                f"({', '.join(its)}) -> {rt}")
    if kind == "window":
        props = ", ".join(f"{k} = {list(attrs[k])}" for k in ("window", "strides", "dilations", "lhs_dilation",
                                                               "pads_lo", "pads_hi"))
        fill = float(attrs["fill"])
        text = "0xFFF0000000000000" if fill == float("-inf") else repr(fill)  # (MLIR spells -inf in hex)
        return f"  {res} = prim.window {ins[0]} {{{props}, fill = {text} : f64}} : {its[0]} -> {rt}"
    if kind in ("gather", "take_along", "concat"):
        types = its[0] if len(its) == 1 else f"({', '.join(its)})"
        return f"  {res} = prim.{kind} {', '.join(ins)} {{axis = {attrs['axis']}}} : {types} -> {rt}"
    return None


def slice_key(attrs: dict[str, Any]) -> tuple[slice, ...]:
    return tuple(slice(s, None if lim < 0 else lim, k)
                 for s, lim, k in zip(attrs["starts"], attrs["limits"], attrs["strides"]))


def evaluate(kind: str, attrs: dict[str, Any], xs: list[np.ndarray]) -> np.ndarray | None:
    """numpy's value of an index-map op on `xs` (also applied to error bounds), or None when
    `kind` is not one. Indices are read from xs[1] as given (the caller passes values)."""
    if kind == "slice":
        return np.ascontiguousarray(xs[0][slice_key(attrs)])
    if kind == "gather":
        return np.take(xs[0], np.asarray(xs[1]).astype(np.int64), axis=attrs["axis"])
    if kind == "take_along":
        x, idx = xs[0], np.asarray(xs[1]).astype(np.int64)
        n = x.shape[attrs["axis"]]
        idx = np.where(idx < 0, idx + n, idx)  # take_along_axis reads a negative index too, but say so
        shape = np.broadcast_shapes(*(tuple(1 if d == attrs["axis"] else s for d, s in enumerate(a.shape))
                                      for a in (x, idx)))
        bx = np.broadcast_to(x, tuple(x.shape[d] if d == attrs["axis"] else shape[d] for d in range(x.ndim)))
        bi = np.broadcast_to(idx, tuple(idx.shape[d] if d == attrs["axis"] else shape[d] for d in range(x.ndim)))
        return np.take_along_axis(bx, bi, axis=attrs["axis"])
    if kind == "window":
        return _window(attrs, xs[0], attrs["fill"])
    if kind == "concat":
        return np.concatenate(xs, axis=attrs["axis"])
    if kind == "scatter":
        return scatter(attrs, *xs)[0]
    return None


def window_fill(elem: str) -> float:
    """The fill a max over the window never picks: -inf, or the integer type's least value."""
    if elem.startswith("f"):
        return float("-inf")
    if elem == "i1":
        return 0.0
    return float(np.iinfo(np.dtype({"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}
                                   .get(elem, np.int64))).min)


def _window(attrs: dict[str, Any], x: np.ndarray, fill: float) -> np.ndarray:
    from fusebind.dialect.prim_window import window_values

    geometry = {k: tuple(attrs[k]) for k in ("window", "strides", "dilations", "lhs_dilation", "pads_lo", "pads_hi")}
    return window_values(np.asarray(x), geometry, fill)


_UFUNCS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def scatter(attrs: dict[str, Any], x: np.ndarray, idx: np.ndarray, v: np.ndarray,
            ex: np.ndarray | None = None, ev: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """numpy's `.at` along `axis` (the updates' positions as np.put_along_axis's), and with
    (ex, ev) the propagated bound: exact modes carry the bounds of what they keep; add sums
    them plus one rounding of the running sum per update."""
    axis, mode = attrs["axis"], attrs["mode"]
    n = x.shape[axis]
    shape = tuple(idx.shape[d] if d == axis else x.shape[d] for d in range(x.ndim))
    idx = np.broadcast_to(np.where(idx < 0, idx + n, idx).astype(np.int64), shape)
    pos = tuple(idx if d == axis else np.broadcast_to(np.arange(shape[d]).reshape([-1 if e == d else 1 for e in
                                                                                   range(x.ndim)]), shape)
                for d in range(x.ndim))
    vb = np.broadcast_to(v, shape)
    y = x.copy()
    if mode == "set":
        y[pos] = vb
    else:
        _UFUNCS[mode].at(y, pos, vb.astype(np.result_type(x, v)))
    if ex is None:
        return y, None
    e = np.array(np.broadcast_to(ex, x.shape), np.float64)
    evb = np.broadcast_to(ev, shape).astype(np.float64)
    if mode == "set":
        e[pos] = evb
    elif mode == "add":
        u = float(np.finfo(x.dtype).eps) if x.dtype.kind == "f" else 0.0
        np.add.at(e, pos, evb)
        count, mass = np.zeros(x.shape), np.abs(x.astype(np.float64))
        np.add.at(count, pos, 1.0)
        np.add.at(mass, pos, np.abs(vb.astype(np.float64)))
        e = e + u * count * mass
    else:  # mul (integers only: exact), min, max: the kept value's bound, at most the larger one
        np.maximum.at(e, pos, evb)
    return y, e


def propagate(kind: str, attrs: dict[str, Any], xs: list[np.ndarray],
              es: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(value, error bound) of an index-map op: the same selection of the operands' values and of
    their bounds (indices are values, never bounds); None when `kind` is not one."""
    v = evaluate(kind, attrs, xs)
    if v is None:
        return None
    if kind in ("gather", "take_along"):
        return v, evaluate(kind, attrs, [np.broadcast_to(es[0], xs[0].shape), xs[1]])
    if kind == "scatter":
        return scatter(attrs, xs[0], np.asarray(xs[1]), xs[2], es[0], es[2])
    if kind == "window":  # a padded position holds the fill exactly: no error
        return v, _window(attrs, np.broadcast_to(es[0], xs[0].shape).astype(np.float64), 0.0)
    return v, evaluate(kind, attrs, [np.broadcast_to(e, x.shape) for e, x in zip(es, xs)])


# --------------------------------------------------------------------------- the fuzzers' forms

#: tokens the mutating fuzzers insert: every index-map op's name and the shapes of its properties
FUZZ_TOKENS = ["{starts = [0], limits = [-1], strides = [-1]}", "{starts = [1, 0], limits = [5, 4], strides = [2, 1]}",
               "strides = [0]", "limits = [-2]", "{axis = 0}", "{axis = -1}", "{axis = 1, in_bounds}",
               "dense<[0, -1, 7]> : tensor<3xi64>", "tensor<2xi32>"]


def fuzz_tokens() -> list[str]:
    return [f"prim.{k}" for k in registered_index_map_kinds() + WRITE_KINDS] + FUZZ_TOKENS + \
        ['{mode = "add", axis = 0}', '{mode = "set", axis = -1}', '{mode = "nope", axis = 0}']


def shape_preserving_line(kind: str, res: str, value: str, dims: list[int], elem: str) -> list[str] | None:
    """Text lines that compute `res` of `value`'s static type by one index-map op of `kind` (the
    fuzzers' generated modules), or None when the kind has no such form for this rank."""
    ty = "tensor<" + "".join(f"{d}x" for d in dims) + elem + ">"
    if not dims:
        return None
    if kind == "slice":  # numpy's x[::-1, ..., ::-1]
        props = (f"starts = {[d - 1 for d in dims]}, limits = {[-1] * len(dims)}, "
                 f"strides = {[-1] * len(dims)}")
        return [f"{res} = prim.slice {value} {{{props}}} : {ty} -> {ty}"]
    if kind == "concat":
        return [f"{res} = prim.concat {value} {{axis = {len(dims) - 1}}} : {ty} -> {ty}"]
    itype = f"tensor<{dims[0]}xi64>"
    if kind == "gather" and dims[0] > 0:  # a reversing permutation, written from the end
        return [f"{res}_i = prim.constant dense<{[-1 - j for j in range(dims[0])]}> : {itype}",
                f"{res} = prim.gather {value}, {res}_i {{axis = 0}} : ({ty}, {itype}) -> {ty}"]
    if kind == "scatter":  # np.add.at(x, <row 0 of every column>, x) along axis 0
        full = "tensor<" + "".join(f"{d}x" for d in dims) + "i64>"
        return [f"{res}_i = prim.constant dense<0> : {full}",
                f'{res} = prim.scatter {value}, {res}_i, {value} {{mode = "add", axis = 0}} : ({ty}, {full}, {ty}) -> {ty}']
    if kind == "take_along" and all(dims):
        full = "tensor<" + "".join(f"{d}x" for d in dims) + "i64>"
        return [f"{res}_i = prim.constant dense<-1> : {full}",
                f"{res} = prim.take_along {value}, {res}_i {{axis = 0}} : ({ty}, {full}) -> {ty}"]
    return None
