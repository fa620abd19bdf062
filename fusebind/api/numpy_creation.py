"""Creation functions as `fb.*` names: fb.arange / linspace / zeros / ones / full / eye / identity and
fb.zeros_like / ones_like / full_like / empty_like, with numpy's values, dtypes and shapes.

Their shapes are static, so each is numpy's own function: inside a traced function the result is a
numpy array, which becomes a constant where it meets a traced value (as np.arange(...) written
directly does). The `*_like` functions of a traced array go through numpy's dispatch to
numpy_shapes (`np.zeros_like(tracer)` is mapped there). `fb.full` also takes a traced fill value,
which it broadcasts (numpy's np.full would need the value).

Must not: compute a creation result other than numpy's; a traced shape, start, stop or count is
refused, since the shape must be known when tracing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.tracer import Tracer

#: the creation functions fusebind provides as fb.<numpy name>
NAMES = ("arange", "linspace", "zeros", "ones", "full", "eye", "identity", "zeros_like", "ones_like",
         "full_like", "empty_like")


def _static(name: str, values: Any, what: str) -> None:
    graph = K.graph_of(values)
    if graph is not None:
        raise K.unsupported(graph, f"fusebind.{name}: its {what} must be known when tracing (Python numbers or "
                                   "numpy arrays): the result's shape comes from it")


def arange(*args: Any, **kwargs: Any) -> np.ndarray:
    _static("arange", (args, kwargs), "start, stop and step")
    return np.arange(*args, **kwargs)


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, **kwargs: Any) -> Any:
    _static("linspace", (start, stop, num), "start, stop and num")
    return np.linspace(start, stop, num, endpoint, retstep, dtype, axis, **kwargs)


def zeros(shape: Any, dtype: Any = float, order: str = "C", **kwargs: Any) -> np.ndarray:
    _static("zeros", shape, "shape")
    return np.zeros(shape, dtype, order, **kwargs)


def ones(shape: Any, dtype: Any = None, order: str = "C", **kwargs: Any) -> np.ndarray:
    _static("ones", shape, "shape")
    return np.ones(shape, dtype, order, **kwargs)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", **kwargs: Any) -> Any:
    _static("full", shape, "shape")
    if not isinstance(fill_value, Tracer):
        return np.full(shape, fill_value, dtype, order, **kwargs)
    graph = fill_value.graph
    out = tuple(int(d) for d in np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),)
    dt = K.check_dtype(graph, np.dtype(dtype) if dtype is not None else fill_value.dtype, "fusebind.full")
    try:  # numpy: copyto of the value into the shape given
        fits = np.broadcast_shapes(fill_value.shape, out) == out
    except ValueError:
        fits = False
    if not fits:
        def spell(s: tuple) -> str:
            return f"({s[0]},)" if len(s) == 1 else "(" + ",".join(map(str, s)) + ")"
        raise K.value_error(graph, f"could not broadcast input array from shape {spell(fill_value.shape)} into "
                                   f"shape {spell(out)}")
    return K.broadcast_to(K.cast(fill_value, dt), out)


def eye(N: int, M: Any = None, k: int = 0, dtype: Any = float, order: str = "C", **kwargs: Any) -> np.ndarray:
    _static("eye", (N, M, k), "N, M and k")
    return np.eye(N, M, k, dtype, order, **kwargs)


def identity(n: int, dtype: Any = None, **kwargs: Any) -> np.ndarray:
    _static("identity", n, "n")
    return np.identity(n, dtype, **kwargs)


def zeros_like(a: Any, *args: Any, **kwargs: Any) -> Any:
    return np.zeros_like(a, *args, **kwargs)


def ones_like(a: Any, *args: Any, **kwargs: Any) -> Any:
    return np.ones_like(a, *args, **kwargs)


def full_like(a: Any, fill_value: Any, *args: Any, **kwargs: Any) -> Any:
    return np.full_like(a, fill_value, *args, **kwargs)


def empty_like(a: Any, *args: Any, **kwargs: Any) -> Any:
    """Zeros (any values are numpy's answer for empty_like; zeros make the result deterministic)."""
    if isinstance(a, Tracer):
        return np.empty_like(a, *args, **kwargs)
    return np.zeros_like(a, *args, **kwargs)
