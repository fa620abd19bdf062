"""The array API namespace of traced values: what `tracer.__array_namespace__()` returns.

Array-API-generic code (`xp = array_namespace(x)`, scikit-learn's array API paths,
`array_api_compat` users) reaches this module through a traced value and traces
through `fb.jit`. It holds the standard's names (2024.12, which includes 2023.12) and
maps each onto the numpy function of the same meaning. numpy 2's main namespace is
itself array-API-shaped, and traced values already implement numpy (NEP 13 and NEP
18: numpy_ufuncs, numpy_dispatch), so most names here are the numpy function itself:
called on a traced value it traces, called on numpy arrays it computes, with numpy's
answer in both. The few wrappers are where the standard's signature differs from
numpy's (`clip`, `diff`, `take_along_axis`, `asarray`, `arange`, `broadcast_arrays`,
`meshgrid`, `finfo`/`iinfo`, `vecdot`) or where a trace cannot answer: functions whose
result shape depends on the values (`nonzero`, `unique_*`), sorting, `from_dlpack` of a
traced value, and the `fft` extension raise `fb.UnsupportedOperation` naming the
function and what to do instead. A numpy function fusebind does not map raises its own
`fb.UnsupportedOperation` (numpy_dispatch.refusal), never a third outcome.

The `linalg` extension holds what maps to fusebind's ops (matmul, matrix_transpose,
tensordot, vecdot, vector_norm, matrix_norm, outer, trace, diagonal); its solvers and
decompositions are refused by name. Devices: one, "cpu".

Must not: build IR itself (the numpy_* modules do), or import the runtime.
"""

from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np

from fusebind.api.errors import UnsupportedOperation
from fusebind.dialect.errors import FusebindValueError

__array_api_version__ = "2024.12"
#: the versions `__array_namespace__(api_version=...)` accepts (this namespace is the same for all)
API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")
DEVICE = "cpu"


def namespace_for(api_version: str | None) -> types.ModuleType:
    """This module, for `Tracer.__array_namespace__`; a version it does not implement is an error."""
    import sys

    if api_version is not None and api_version not in API_VERSIONS:
        raise FusebindValueError(f"fusebind: __array_namespace__(api_version={api_version!r}): the array API "
                                 f"versions fusebind implements are {', '.join(API_VERSIONS)} (or None)")
    return sys.modules[__name__]


def _is_traced(value: Any) -> bool:
    """A value of this namespace: a traced array (found by the protocol, not by class: tracer.py
    imports this module, so this one does not import it)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return False
    namespace = getattr(value, "__array_namespace__", None)
    return callable(namespace) and namespace() is namespace_for(None)


def _traced(*values: Any) -> bool:
    for v in values:
        if _is_traced(v) or (isinstance(v, (list, tuple)) and _traced(*v)):
            return True
    return False


def _refused(name: str, why: str, numpy_fn: Callable[..., Any] | None) -> Callable[..., Any]:
    """A standard function a trace cannot compute: refused on traced values (numpy's answer on arrays)."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        if numpy_fn is not None and not _traced(*args, *kwargs.values()):
            return numpy_fn(*args, **kwargs)
        raise UnsupportedOperation(f"fusebind: the array API function {name} is not supported on traced arrays: "
                                   f"{why}")
    refuse.__name__ = refuse.__qualname__ = name.rsplit(".", 1)[-1]
    refuse.__doc__ = f"{name}: refused on traced arrays ({why})."
    return refuse


def _check_device(device: Any, what: str) -> None:
    if device is not None and device != DEVICE:
        raise FusebindValueError(f"fusebind: {what}(device={device!r}): fusebind's only device is {DEVICE!r}")


# ------------------------------------------------------------------ constants and data types
e, inf, nan, pi, newaxis = np.e, np.inf, np.nan, np.pi, np.newaxis
bool = np.bool_  # noqa: A001 (the standard's name)
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float32, float64 = np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128

# ------------------------------------------------------------------ the numpy function of the same name
_SAME = (
    # elementwise
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_left_shift",
    "bitwise_invert", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "conj", "copysign", "cos", "cosh",
    "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag",
    "isfinite", "isinf", "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative", "nextafter",
    "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round", "sign", "signbit", "sin", "sinh",
    "square", "sqrt", "subtract", "tan", "tanh", "trunc",
    # creation from another array, data types
    "empty_like", "full_like", "ones_like", "zeros_like", "tril", "triu", "astype", "can_cast", "isdtype",
    "result_type",
    # indexing, linear algebra, manipulation
    "take", "matmul", "matrix_transpose", "tensordot", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
    "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    # searching, statistics, utility
    "argmax", "argmin", "count_nonzero", "where", "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod",
    "std", "sum", "var", "all", "any",
)
for _name in _SAME:
    globals()[_name] = getattr(np, _name)


# ------------------------------------------------------------------ where the standard's signature is not numpy's
def clip(x: Any, /, min: Any = None, max: Any = None) -> Any:  # noqa: A002 (the standard's names)
    """The standard's clip: either bound may be None."""
    if min is None and max is None:
        return x
    return np.clip(x, min, max)


def diff(x: Any, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None) -> Any:
    """The standard's diff; `prepend`/`append` are joined to `x` along `axis` first (what numpy
    does with them, written with concat, which traces)."""
    if prepend is None and append is None:
        return np.diff(x, n=n, axis=axis)
    edge = list(np.shape(x))
    edge[axis] = 1
    parts = [np.broadcast_to(v, tuple(edge)) if np.ndim(v) == 0 else v for v in (prepend, x, append) if v is not None]
    return np.diff(np.concat(parts, axis=axis), n=n, axis=axis)


def take_along_axis(x: Any, indices: Any, /, *, axis: int = -1) -> Any:
    return np.take_along_axis(x, indices, axis)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return np.linalg.vecdot(x1, x2, axis=axis)


def broadcast_arrays(*arrays: Any) -> list[Any]:
    return list(np.broadcast_arrays(*arrays))


def meshgrid(*arrays: Any, indexing: str = "xy") -> list[Any]:
    return list(np.meshgrid(*arrays, indexing=indexing))


def finfo(type: Any, /) -> Any:  # noqa: A002
    return np.finfo(type.dtype if isinstance(type, np.ndarray) or _is_traced(type) else type)


def iinfo(type: Any, /) -> Any:  # noqa: A002
    return np.iinfo(type.dtype if isinstance(type, np.ndarray) or _is_traced(type) else type)


# ------------------------------------------------------------------ creation (constants of the trace)
def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None) -> Any:
    """A traced value as itself (cast to `dtype`); anything else as numpy's array (a constant of the trace)."""
    _check_device(device, "asarray")
    if _is_traced(obj):
        return obj if dtype is None else obj.astype(dtype)
    if _traced(obj):
        raise UnsupportedOperation("fusebind: the array API function asarray is not supported on a sequence of "
                                   "traced arrays; use stack(arrays) (or concat) instead")
    return np.asarray(obj, dtype=dtype, copy=copy)


def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None) -> Any:
    _check_device(device, "arange")
    return np.arange(start, stop, step, dtype=dtype) if stop is not None else np.arange(start, step=step, dtype=dtype)


def _creation(name: str) -> Callable[..., Any]:
    fn = getattr(np, name)

    def create(*args: Any, device: Any = None, **kwargs: Any) -> Any:
        _check_device(device, name)
        return fn(*args, **kwargs)
    create.__name__ = create.__qualname__ = name
    create.__doc__ = f"numpy.{name} (a constant of the trace); the only device is {DEVICE!r}."
    return create


empty, eye, full, linspace, ones, zeros = (_creation(n) for n in ("empty", "eye", "full", "linspace", "ones", "zeros"))

# ------------------------------------------------------------------ what a trace cannot compute
_VALUE_SHAPE = "its result's shape depends on the values, which a trace does not have; call it outside fb.jit"
_NO_SORT = "fusebind has no sort op; sort outside the jitted function"
nonzero = _refused("nonzero", _VALUE_SHAPE, np.nonzero)
unique_all = _refused("unique_all", _VALUE_SHAPE, np.unique_all)
unique_counts = _refused("unique_counts", _VALUE_SHAPE, np.unique_counts)
unique_inverse = _refused("unique_inverse", _VALUE_SHAPE, np.unique_inverse)
unique_values = _refused("unique_values", _VALUE_SHAPE, np.unique_values)
sort = _refused("sort", _NO_SORT, None)
argsort = _refused("argsort", _NO_SORT, None)
searchsorted = _refused("searchsorted", _NO_SORT, None)


def from_dlpack(x: Any, /, *, device: Any = None, copy: Any = None) -> Any:
    _check_device(device, "from_dlpack")
    if _is_traced(x):
        raise UnsupportedOperation("fusebind: the array API function from_dlpack is not supported on traced "
                                   "arrays: a traced array has no buffer to share; use it directly")
    return np.from_dlpack(x, copy=copy) if copy is not None else np.from_dlpack(x)


# ------------------------------------------------------------------ extensions
linalg = types.ModuleType(f"{__name__}.linalg", "The array API linalg extension: what maps to fusebind's ops.")
for _name in ("matmul", "matrix_transpose", "tensordot", "vector_norm", "matrix_norm", "outer", "trace", "diagonal",
              "cross"):  # cross: numpy_dispatch refuses it, saying how to write it
    setattr(linalg, _name, getattr(np.linalg, _name))
linalg.vecdot = vecdot  # type: ignore[attr-defined]
_SOLVER = "fusebind has no linear-algebra solver or decomposition; call it outside the jitted function"
for _name in ("cholesky", "det", "eigh", "eigvalsh", "inv", "matrix_power", "matrix_rank", "pinv", "qr",
              "slogdet", "solve", "svd", "svdvals"):
    setattr(linalg, _name, _refused(f"linalg.{_name}", _SOLVER, getattr(np.linalg, _name)))

fft = types.ModuleType(f"{__name__}.fft", "The array API fft extension: refused on traced arrays (no FFT op).")
for _name in ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
              "rfftfreq", "fftshift", "ifftshift"):
    setattr(fft, _name, _refused(f"fft.{_name}", "fusebind has no FFT op; call it outside the jitted function",
                                 getattr(np.fft, _name)))
del _name


# ------------------------------------------------------------------ inspection
class _Info:
    """`__array_namespace_info__()`: one device; no data-dependent shapes; the dtypes fusebind traces."""

    def capabilities(self) -> dict[str, Any]:
        return {"boolean indexing": False, "data-dependent shapes": False, "max dimensions": 64}

    def default_device(self) -> str:
        return DEVICE

    def devices(self) -> list[str]:
        return [DEVICE]

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        _check_device(device, "default_dtypes")
        return {"real floating": np.dtype(np.float64), "complex floating": np.dtype(np.complex128),
                "integral": np.dtype(np.int64), "indexing": np.dtype(np.int64)}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        from fusebind.api.capture import SUPPORTED

        _check_device(device, "dtypes")
        names = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
                 "float64", "complex64", "complex128")
        found = {n: np.dtype(n) for n in names if np.dtype(n) in SUPPORTED}
        return found if kind is None else {n: d for n, d in found.items() if np.isdtype(d, kind)}


def __array_namespace_info__() -> _Info:
    return _Info()
