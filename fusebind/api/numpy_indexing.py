"""numpy indexing on traced arrays: `x[key]`, basic and advanced.

Basic keys (ints, slices, None, ...) are `numpy_shapes.getitem` (one `prim.slice` and a reshape).
A key with an advanced item — an integer array (numpy array, list, or a traced integer array), a
boolean mask known when tracing, or an int next to one of those — follows numpy's rules
(numpy.org/doc/stable/user/basics.indexing.html#advanced-indexing):
- the index arrays (ints are 0-d arrays) broadcast to one shape B;
- the basic items apply as usual; B replaces the advanced axes where they are all next to each
  other in the key, and goes first otherwise;
- a boolean mask of k dims is its k `nonzero()` index arrays (so its shape is known when tracing).
numpy's probe on stand-ins gives the result shape and numpy's errors (an out-of-range constant
index, shapes that do not broadcast, float indices).

How it is built: the basic part is one slice; then the advanced axes move to the front. All
constant: numpy computes the flat positions into those axes and one `np.take` gathers them. Any
traced: a gather along the first advanced axis, then one `np.take_along_axis` per further axis
(each checks its own axis' range, so an out-of-range index raises instead of landing in a
neighbouring row, as a flat index would).

A traced boolean mask has a data-dependent result shape: refused, pointing to fb.where and
fb.at(x)[mask].set(v). Must not: build the value from anything but numpy's functions on tracers
(they carry numpy's dtype and range rules).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api import numpy_shapes
from fusebind.api.numpy_kernels import unsupported
from fusebind.api.numpy_probe import probe
from fusebind.api.tracer import Tracer

_MASK_ADVICE = ("select with fb.where(mask, x, other), or update with fb.at(x)[mask].set(v); a mask known "
                "when tracing (a numpy array or fb.constant) indexes as numpy's")


def _constant_of(t: Tracer) -> np.ndarray | None:
    """The value of a traced array that is a constant of the trace (fb.constant, a literal)."""
    from fusebind.dialect.prim import ConstantOp

    owner = getattr(t.value, "owner", None)
    return np.asarray(owner.reference()) if isinstance(owner, ConstantOp) else None


def _items(x: Tracer, key: Any) -> tuple[list[Any], bool]:
    """The key as a list of items (lists as arrays, masks as their nonzero() arrays, constant
    tracers as arrays) and whether any item is advanced."""
    graph = x.graph
    raw = list(key) if isinstance(key, tuple) else [key]
    items: list[Any] = []
    advanced = False
    for k in raw:
        if isinstance(k, Tracer):
            c = _constant_of(k)
            if c is None:
                if k.dtype == np.bool_:
                    raise unsupported(graph, f"indexing with a traced boolean mask gives a shape that depends on "
                                             f"its values; {_MASK_ADVICE}")
                items.append(k)
                advanced = True
                continue
            k = c
        if isinstance(k, list):
            k = np.asarray(k)
            if k.size == 0:
                k = k.astype(np.intp)  # numpy reads an empty list as an empty integer index
        if isinstance(k, np.ndarray) and k.ndim > 0:
            if k.dtype == np.bool_:
                items.extend(k.nonzero())
            else:
                items.append(k)
            advanced = True
            continue
        if isinstance(k, np.ndarray) and k.dtype != np.bool_ and np.issubdtype(k.dtype, np.integer):
            k = int(k)  # a 0-d integer array indexes as an int
        items.append(k)
    return items, advanced


def _is_array(k: Any) -> bool:
    return isinstance(k, (Tracer, np.ndarray))


def getitem(x: Tracer, key: Any) -> Tracer:
    """`x[key]` as numpy computes it (see the module docstring)."""
    items, advanced = _items(x, key)
    if not advanced:
        return numpy_shapes.getitem(x, key)
    graph = x.graph
    traced = [k for k in items if isinstance(k, Tracer)]
    for k in items:
        if isinstance(k, (bool, np.bool_)):
            raise unsupported(graph, "indexing with a Python bool next to index arrays is not supported on traced "
                                     "arrays; use None to add an axis")
        if isinstance(k, Tracer) and not np.issubdtype(k.dtype, np.integer):
            raise unsupported(graph, f"arrays used as indices must be of integer (or boolean) type (got a traced "
                                     f"{k.dtype} array); cast it with .astype(np.int64)")

    def numpy_index(s: Any, *arrays: Any) -> Any:
        it = iter(arrays)
        return s[tuple(next(it) if isinstance(k, Tracer) else k for k in items)]

    p = probe(numpy_index, (x, *traced), {}, "full", graph, "indexing")
    want = tuple(int(d) for d in np.shape(p.result))
    # Ellipsis -> the slices it stands for; ints become 0-d index arrays (numpy's rule next to arrays)
    used = sum(1 for k in items if k is not None and k is not Ellipsis)
    spec: list[Any] = []
    for k in items:
        if k is Ellipsis:
            spec.extend([slice(None)] * (x.ndim - used))
        elif isinstance(k, (int, np.integer)):
            spec.append(np.asarray(int(k)))
        else:
            spec.append(k)
    spec += [slice(None)] * (x.ndim - sum(1 for k in spec if k is not None))
    adv = [i for i, k in enumerate(spec) if _is_array(k)]
    x_axes, ax = [], 0  # the axis of x each advanced item indexes (numpy's error messages name it)
    for k in spec:
        if _is_array(k):
            x_axes.append(ax)
        ax += k is not None
    adjacent = adv == list(range(adv[0], adv[-1] + 1))
    # the basic part: advanced items keep their axis whole
    y = numpy_shapes.getitem(x, tuple(slice(None) if _is_array(k) else k for k in spec))
    positions, out = [], 0
    for k in spec:
        if _is_array(k):
            positions.append(out)
        out += 1
    first = positions[0]
    arrays = [spec[i] for i in adv]
    batch = tuple(np.broadcast_shapes(*(tuple(a.shape) for a in arrays)))
    yt = np.moveaxis(y, positions, list(range(len(positions))))
    sizes = yt.shape[:len(arrays)]
    rest = yt.shape[len(arrays):]
    if not traced:  # numpy's flat positions into the advanced axes (the probe checked the ranges)
        flat = np.arange(math.prod(sizes), dtype=np.int64).reshape(sizes)[tuple(arrays)]
        r = np.take(np.reshape(yt, (math.prod(sizes),) + rest), flat, axis=0)
    else:
        nb = len(batch)
        first_idx = arrays[0] if tuple(arrays[0].shape) == batch else np.broadcast_to(arrays[0], batch)
        r = K.gather(yt, 0, first_idx, "indexing", shown_axis=x_axes[0])  # batch + sizes[1:] + rest
        for a, shown in zip(arrays[1:], x_axes[1:]):
            idx = np.reshape(np.broadcast_to(a, batch), batch + (1,) * (r.ndim - nb))
            if isinstance(idx, Tracer):
                r = K.take_along(r, nb, idx, "indexing", shown_axis=shown)
            else:
                r = np.take_along_axis(r, idx, axis=nb)
            r = np.reshape(r, r.shape[:nb] + r.shape[nb + 1:])
    if adjacent and first:
        r = np.moveaxis(r, list(range(len(batch))), list(range(first, first + len(batch))))
    if tuple(r.shape) != want:  # the composition above must give numpy's shape
        from fusebind.api.errors import NumpyMismatchError

        raise NumpyMismatchError(f"fusebind: in '{graph.fn_name}': indexing built shape {tuple(r.shape)}, numpy "
                                 f"gives {want}")
    return r
