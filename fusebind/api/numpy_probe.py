"""Asking numpy itself what a call on traced arrays gives: dtype, shape, static values, errors.

A numpy function called on tracers is first called on stand-ins: read-only
zero arrays of the tracers' dtypes and shapes (zero-stride views, so a large
shape costs nothing to make). numpy then validates the arguments (a bad or
repeated axis, an empty max, a shape that does not reshape) with its own
message, and its result gives the dtype and shape the traced answer must
have, which `check` compares. Functions whose answer is static (np.shape,
np.ndim) return the stand-in's answer.

Computing on a large stand-in costs what numpy costs, so above `PROBE_LIMIT`
elements a call is probed on a shrunk stand-in (every dim clipped to 1:
dtype and axis errors survive, shapes do not) where that is sound
("auto"), and not at all otherwise ("small").

Must not: build IR (the implementations do), or return a stand-in's values
as if they were the traced values.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fusebind.api.errors import FusebindError, NumpyMismatchError
from fusebind.api.numpy_kernels import from_numpy_error, prefix
from fusebind.api.tracer import Graph, Tracer, weak_kind

#: inputs up to this many elements (all tracers together) are probed at full size
PROBE_LIMIT = 1 << 16


@dataclass
class Probe:
    result: Any
    shrunk: bool


def _tracers(obj: Any) -> list[Tracer]:
    if isinstance(obj, Tracer):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tracers(v)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tracers(v)]
    return []


def stand_in(t: Tracer, shrink: bool) -> Any:
    """A value numpy sees in place of `t`: a Python scalar for a weak one, else a zero array view."""
    kind = weak_kind(t)
    if kind is not None:
        return kind(1)
    shape = tuple(min(d, 1) for d in t.shape) if shrink else t.shape
    return np.broadcast_to(np.zeros((), t.dtype), shape)


def _arrays(obj: Any) -> list[np.ndarray]:
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [a for v in obj for a in _arrays(v)]
    if isinstance(obj, dict):
        return [a for v in obj.values() for a in _arrays(v)]
    return []


def substitute(obj: Any, fn: Callable[[Tracer], Any], shrink: bool = False) -> Any:
    """obj with every Tracer replaced by fn(tracer); with `shrink`, large ndarrays
    (captured operands of an elementwise or reducing function) shrunk like the tracers."""
    if isinstance(obj, Tracer):
        return fn(obj)
    if shrink and isinstance(obj, np.ndarray) and obj.size > 1:
        return np.broadcast_to(np.zeros((), obj.dtype), tuple(min(d, 1) for d in obj.shape))
    if isinstance(obj, tuple):
        return tuple(substitute(v, fn, shrink) for v in obj)
    if isinstance(obj, list):
        return [substitute(v, fn, shrink) for v in obj]
    if isinstance(obj, dict):
        return {k: substitute(v, fn, shrink) for k, v in obj.items()}
    return obj


def probe(func: Callable[..., Any], args: tuple, kwargs: dict, mode: str, graph: Graph | None,
          what: str) -> Probe | None:
    """numpy's answer for the call on stand-ins (None when not probed); numpy's
    errors come back as fusebind errors with numpy's message.

    mode: "full" always at full size (views and static answers only); "auto"
    full when small, else shrunk; "small" full when small, else no probe."""
    size = sum(t.size for t in _tracers((args, kwargs))) + sum(a.size for a in _arrays((args, kwargs)))
    if mode == "full" or size <= PROBE_LIMIT:
        shrink = False
    elif mode == "auto":
        shrink = True
    else:
        return None
    a2 = substitute(args, lambda t: stand_in(t, shrink), shrink)
    k2 = substitute(kwargs, lambda t: stand_in(t, shrink), shrink)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            res = func(*a2, **k2)
        except FusebindError:
            raise
        except Exception as exc:  # numpy's own refusal, in numpy's words
            raise from_numpy_error(graph, exc, what) from None
    return Probe(res, shrink)


def _describe(v: Any) -> str:
    if isinstance(v, Tracer):
        return f"{v.dtype} {v.shape}"
    a = np.asarray(v)
    return f"{a.dtype} {a.shape}"


def check(graph: Graph | None, what: str, got: Any, p: Probe | None) -> Any:
    """`got` when it has the dtype (and, probed at full size, the shape) of
    numpy's answer; NumpyMismatchError otherwise."""
    if p is None:
        return got
    _check(graph, what, got, p.result, p.shrunk)
    return got


def _check(graph: Graph | None, what: str, got: Any, expect: Any, shrunk: bool) -> None:
    if isinstance(expect, (tuple, list)) and not isinstance(got, Tracer):
        if not isinstance(got, (tuple, list)) or len(got) != len(expect):
            raise NumpyMismatchError(f"{prefix(graph)}internal error: {what} gave {type(got).__name__} where numpy "
                                     f"gives a {type(expect).__name__} of {len(expect)}; please report this")
        for g, e in zip(got, expect):
            _check(graph, what, g, e, shrunk)
        return
    if not isinstance(got, Tracer):
        return  # a static answer: the implementation returned numpy's own
    e = np.asarray(expect)
    if got.dtype != e.dtype or (not shrunk and got.shape != e.shape):
        raise NumpyMismatchError(f"{prefix(graph)}internal error: {what} gives {_describe(got)} here, but numpy "
                                 f"gives {e.dtype} {e.shape if not shrunk else ''}; please report this")
