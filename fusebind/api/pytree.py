"""Pytrees at the call boundary: nested containers of arrays, flattened to leaves and rebuilt.

Owns `flatten(value, path)` -> (leaves, treedef, leaf paths) and
`unflatten(treedef, leaves)`. A treedef is a hashable nested tuple, so it
can be part of a trace key (two calls with the same shapes but different
structures are different traces).

The nodes, as in JAX: tuple, list, dict (children in *sorted key* order,
as `jax.tree_util` does, so `{"b":..., "a":...}` and `{"a":..., "b":...}`
are one structure; rebuilt dicts have sorted keys), namedtuples,
dataclasses (their `init` fields, in declaration order; rebuilt with
`cls(**fields)`), and None (a node with no children: it is rebuilt as None
and passes no array). Everything else is a leaf: arrays, Python and numpy
scalars, and whatever the caller then refuses (a str leaf, say).

Must not: know about tracing or kernels (a pure data transform).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

#: types that are always leaves (checked by identity first)
_LEAF_TYPES = frozenset({np.ndarray, float, int, bool, complex, str})

#: treedef of one leaf
LEAF = ("*",)
NONE = ("None",)


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _dict_keys(value: dict[Any, Any], path: str) -> list[Any]:
    try:
        return sorted(value)
    except TypeError:
        from fusebind.api.errors import UnsupportedOperation

        raise UnsupportedOperation(
            f"fusebind: {path} is a dict whose keys cannot be sorted ({', '.join(repr(k) for k in value)}); "
            "a pytree dict's children are ordered by sorted key, as in JAX: use keys of one type "
            "(all str, say)") from None


def flatten(value: Any, path: str = "") -> tuple[list[Any], tuple[Any, ...], list[str]]:
    """(leaves, treedef, a readable path per leaf: `params['w'][0]`) of `value`."""
    leaves: list[Any] = []
    paths: list[str] = []

    def walk(v: Any, p: str) -> tuple[Any, ...]:
        t = type(v)
        if t in _LEAF_TYPES:  # the common leaves first: this runs on every structured call
            leaves.append(v)
            paths.append(p)
            return LEAF
        if v is None:
            return NONE
        if t is tuple or t is list:
            return (t.__name__, tuple(walk(c, f"{p}[{i}]") for i, c in enumerate(v)))
        if _is_namedtuple(v):
            return ("namedtuple", t, tuple(walk(getattr(v, n), f"{p}.{n}") for n in t._fields))
        if isinstance(v, dict):
            keys = _dict_keys(v, p or "an argument")
            return ("dict", t, tuple(keys), tuple(walk(v[k], f"{p}[{k!r}]") for k in keys))
        if hasattr(t, "__dataclass_fields__") and not isinstance(v, type):
            names = tuple(f.name for f in dataclasses.fields(v) if f.init)
            return ("dataclass", t, names, tuple(walk(getattr(v, n), f"{p}.{n}") for n in names))
        leaves.append(v)
        paths.append(p)
        return LEAF

    return leaves, walk(value, path), paths


def is_leaf(treedef: tuple[Any, ...]) -> bool:
    return treedef is LEAF or treedef == LEAF


def unflatten(treedef: tuple[Any, ...], leaves: Any) -> Any:
    """The structure `treedef` with `leaves` (an iterable, consumed in order) in its leaf places."""
    it = iter(leaves)

    def build(d: tuple[Any, ...]) -> Any:
        tag = d[0]
        if tag == "*":
            return next(it)
        if tag == "None":
            return None
        if tag == "tuple":
            return tuple(build(c) for c in d[1])
        if tag == "list":
            return [build(c) for c in d[1]]
        if tag == "namedtuple":
            return d[1](*(build(c) for c in d[2]))
        if tag == "dict":
            out = {k: build(c) for k, c in zip(d[2], d[3])}
            return out if d[1] is dict else d[1](out)
        return d[1](**{n: build(c) for n, c in zip(d[2], d[3])})  # dataclass

    return build(treedef)
