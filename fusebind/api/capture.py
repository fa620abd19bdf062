"""The call boundary of a jitted function: scalar arguments, captured arrays, constants.

Owns `constant` / `ConstantArray` (an array baked into the trace),
`Capture` (an array the traced function reads from outside its arguments,
passed to the kernel as a hidden argument), `Binding` (for one trace: how a
call's Python arguments become the executor's arrays) and `call_key` (the
trace key of a call's explicit arguments).

Why hidden arguments: eagerly, a function reads its closure and global
arrays when it runs, so `W[:] = 2` or `W = W * 2` between calls is seen by
the next call. Baking W into the trace would answer with the old W. So a
captured array is passed by reference on every call (its current object is
re-read from the closure cell or global name it was found in), and a
changed shape or dtype re-traces. Only Python scalars, numpy scalars and
`fb.constant` arrays are baked: none of them can change.

Python scalar arguments (bool, int, float) are weak, as in numpy (NEP 50):
their Python type is part of the trace key, their value is not; the value
is passed at call time as a 0-d bool/int64/float64 array, and the checks
recorded while tracing (an int converted to int32 must fit it, Python
arithmetic on scalars must give the type it was traced with) run first.

Must not: trace (trace.py) or run kernels (the executor does).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.api.errors import ArgumentError, FusebindError, FusebindOverflowError, UnsupportedOperation
from fusebind.api.numpy_operators import ArrayMethods
from fusebind.dialect.types import NUMPY_NAMES, NumpyDtypeNames

#: the numpy dtypes a fusebind array may have -> the element type name of each (a mapping that
#: knows bfloat16 without importing ml_dtypes)
SUPPORTED: NumpyDtypeNames = NumpyDtypeNames()
#: their numpy names for messages: "float32, float64, ..., int8, ... or uint64"
SUPPORTED_NAMES = ", ".join(NUMPY_NAMES[:-1]) + f" or {NUMPY_NAMES[-1]}"

#: the 0-d dtype a Python scalar argument is passed as (its "canonical" weak dtype)
CANONICAL = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64)}
_INT64 = (-(1 << 63), 1 << 63)


class ConstantArray(np.ndarray):
    """A read-only snapshot of an array, baked into every trace that uses it (see `constant`)."""

    def __array_wrap__(self, array: Any, context: Any = None, return_scalar: bool = False) -> Any:
        # Results computed from a constant are ordinary arrays (they are new, writable data).
        out = array.view(np.ndarray) if isinstance(array, np.ndarray) else array
        return out[()] if return_scalar else out


def constant(value: Any) -> ConstantArray:
    """Mark an array as a constant of jitted functions: `fb.constant(W)`.

    A traced function normally reads the arrays it captures (closure
    variables, globals) at every call, as numpy would, so mutating or
    rebinding them between calls is seen. A constant is instead baked into
    the trace: it is a read-only copy of `value` taken now, so later changes
    to `value` do not affect it (and cannot make a trace stale). Use it for
    weights that never change, so the compiler may fold them. Slicing a
    constant gives constants; arithmetic on it gives ordinary arrays.
    """
    arr = np.array(value, copy=True, order="C")
    out = arr.view(ConstantArray)
    out.flags.writeable = False
    return out


def scalar_kind(value: Any) -> type | None:
    """bool, int or float for a Python scalar (weak, NEP 50); None otherwise
    (numpy scalars are strong: `np.float64` subclasses float but is not weak)."""
    if isinstance(value, np.generic):
        return None
    if isinstance(value, bool):
        return bool
    if isinstance(value, int):
        return int
    if isinstance(value, float):
        return float
    return None


def scalar_array(value: Any, kind: type, label: str) -> np.ndarray:
    """The 0-d array a Python scalar argument is passed as; an int outside int64 raises."""
    if kind is int and not _INT64[0] <= value < _INT64[1]:
        raise FusebindOverflowError(f"fusebind: {label}: Python integer {value} out of bounds for int64 (Python "
                                    "int arguments are passed as int64); pass float(value) for a float")
    return np.array(value, CANONICAL[kind])


@dataclass
class Capture:
    """One array the traced function reads from outside its arguments.

    `obj` is the object seen while tracing; `cell` or (`namespace`, `name`)
    where it was found (re-read at every call, so a rebinding is seen);
    `convert`: a list/tuple is converted (np.asarray) per call, a
    non-contiguous view is copied (the kernel takes contiguous arrays)."""

    obj: Any
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    cell: Any = None
    namespace: dict[str, Any] | None = None
    convert: Callable[[Any], np.ndarray] | None = None

    def current(self) -> Any:
        """The object the function would read now (None when it no longer can)."""
        if self.cell is not None:
            try:
                return self.cell.cell_contents
            except ValueError:  # the cell was emptied (`del W`)
                return None
        if self.namespace is not None:
            return self.namespace.get(self.name)
        return self.obj

    def getter(self) -> Callable[[], Any]:
        """`current()` (converted when `convert`), as one cheap call for the fast path."""
        cell, namespace, name, obj, convert = self.cell, self.namespace, self.name, self.obj, self.convert
        if cell is not None:
            def get() -> Any:
                try:
                    return cell.cell_contents
                except ValueError:
                    return None
        elif namespace is not None:
            get = functools.partial(namespace.get, name)
        else:
            def get() -> Any:
                return obj
        if convert is None:
            return get
        return lambda: convert(get())

    def array(self) -> np.ndarray | None:
        """The current value as the kernel takes it, or None when it is no longer an array."""
        v = self.current()
        if self.convert is not None:
            return self.convert(v)
        return v if type(v) is np.ndarray else None


def _contiguous(v: Any) -> np.ndarray | None:
    return np.ascontiguousarray(v) if type(v) is np.ndarray else None


def _asarray(v: Any) -> np.ndarray | None:
    if v is None:
        return None
    try:
        a = np.asarray(v)
    except ValueError:
        return None
    return a


def make_capture(fn: Callable[..., Any], obj: Any, index: int) -> Capture:
    """A Capture for `obj`, with where `fn` reads it from (a closure cell or a global it names)."""
    if isinstance(obj, (list, tuple)):
        arr, convert = np.asarray(obj), _asarray
    else:
        arr = obj
        convert = None if obj.flags.c_contiguous else _contiguous
    cap = Capture(obj, f"captured{index}", tuple(arr.shape), arr.dtype, convert=convert)
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    if code is None:
        return cap
    for name, cell in zip(code.co_freevars, getattr(func, "__closure__", None) or ()):
        try:
            if cell.cell_contents is obj:
                cap.name, cap.cell = name, cell
                return cap
        except ValueError:
            continue
    namespace = getattr(func, "__globals__", None)
    if namespace is not None:
        for name in _global_names(code):
            if namespace.get(name) is obj:
                cap.name, cap.namespace = name, namespace
                return cap
    return cap


def _global_names(code: Any) -> list[str]:
    """Names `code` and the code nested in it (lambdas, comprehensions) may read as globals."""
    names = list(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names += _global_names(const)
    return names


@dataclass
class Binding:
    """How one trace's executor is called: explicit arguments (Python scalars
    as 0-d arrays), then the captured arrays; and the checks to run first.

    `scalars`: (position, Python type, label) of each scalar argument;
    `checks`: callables over the call's arguments that raise what eager
    Python/numpy would raise (OverflowError, ZeroDivisionError, ...)."""

    nargs: int
    scalars: list[tuple[int, type, str]] = field(default_factory=list)
    checks: list[Callable[[Sequence[Any]], None]] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    #: `fast_bind()`, or None when the call's arguments are the executor's (`plain`)
    bind: Callable[[Sequence[Any]], Sequence[Any] | None] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.bind = None if self.plain else self.fast_bind()

    @property
    def plain(self) -> bool:
        """Nothing to do: the call's arguments are the executor's."""
        return not (self.scalars or self.checks or self.captures)

    def fast_bind(self) -> Callable[[Sequence[Any]], Sequence[Any] | None]:
        """`bind(args)`: the executor's arguments for `args` on the fast path,
        or None when a scalar argument's Python type differs from the trace's
        or a check fails (take the slow path, which finds the trace of these
        arguments and raises what its checks raise). Arrays are not converted
        or checked here: the thunk checks every one (a captured value that is
        no longer an array of the traced shape and dtype makes it decline).
        Specialised for the common shapes of a binding: it runs on every fast
        call."""
        n, checks = self.nargs, tuple(self.checks)
        scalars = tuple((i, kind, CANONICAL[kind], kind is int) for i, kind, _ in self.scalars)
        lo, hi = _INT64
        getters = tuple(cap.getter() for cap in self.captures)
        if not scalars and not checks and len(getters) == 1:
            g0 = getters[0]

            def bind1(args: Sequence[Any]) -> Sequence[Any] | None:
                return (*args, g0()) if len(args) == n else None
            return bind1

        def bind(args: Sequence[Any]) -> Sequence[Any] | None:
            if len(args) != n:
                return None
            full = list(args)
            try:
                for i, kind, dtype, is_int in scalars:
                    v = args[i]
                    if type(v) is not kind or is_int and not lo <= v < hi:
                        return None  # (an int outside int64: the slow path raises)
                    full[i] = np.array(v, dtype)
                for check in checks:
                    check(args)
            except Exception:  # noqa: BLE001
                # The checks are this trace's; the arrays may be another signature's
                # (f32 * 2**40 is fine where i32 * 2**40 is not): the slow path decides.
                return None
            for g in getters:
                full.append(g())
            return full
        return bind

    def hidden(self) -> list[np.ndarray] | None:
        """The captured arrays now, or None when one no longer matches the trace (re-trace)."""
        out = []
        for cap in self.captures:
            a = cap.array()
            if a is None or a.shape != cap.shape or a.dtype != cap.dtype:
                return None
            out.append(a)
        return out


def call_key(args: Sequence[Any], names: Callable[[], list[str]], fn_name: str) -> tuple[tuple[Any, ...], list[Any]]:
    """(trace key, explicit arrays) for a call: (shape, dtype) per array
    argument, the Python type per scalar argument (passed as a 0-d array).
    `args` are the call's pytree leaves (calls.FlatCall), `names` one per leaf.
    Raises UnsupportedOperation for leaves that are not arrays or scalars (a
    str that should be static, a traced array outside its trace) and
    ArgumentError for unsupported dtypes."""
    # the common call, every argument an ndarray of a supported dtype: one pass, no per-kind checks
    fast_key = tuple([(a.shape, a.dtype) for a in args if type(a) is np.ndarray])
    if len(fast_key) == len(args) and all(dt in SUPPORTED for _, dt in fast_key):
        return fast_key, list(args)
    key: list[Any] = []
    arrays: list[Any] = []
    for i, a in enumerate(args):
        kind = scalar_kind(a)
        if kind is not None:
            key.append(kind)
            arrays.append(scalar_array(a, kind, f"argument '{names()[i]}' (#{i}) of '{fn_name}'"))
            continue
        if isinstance(a, ArrayMethods):  # a traced array (tracer.Tracer) outside its trace (a nested call inlines)
            raise UnsupportedOperation(
                f"fusebind: argument '{names()[i]}' (#{i}) of '{fn_name}' is a traced array kept from a trace that "
                "has ended (stored from inside a jitted function); pass numpy arrays, or return the value from the "
                "jitted function")
        if type(a) is np.ndarray:
            arr = a
        elif a is None or isinstance(a, (str, bytes, dict, set)) or callable(a):
            arr = None
        else:
            arr = np.asarray(a)
        if arr is None or arr.dtype == object:
            name = names()[i]
            param = name.split("[", 1)[0].split(".", 1)[0]
            raise UnsupportedOperation(
                f"fusebind: argument '{name}' (#{i}) of '{fn_name}' is a {type(a).__name__}; a jitted function "
                "takes arrays, Python scalars and pytrees of them (tuples, lists, dicts, namedtuples, dataclasses, "
                f"None). Mark a Python value static, e.g. fb.jit(f, static_argnames=({param!r},)), or bind it "
                f"outside (functools.partial(f, {param}=...) or a closure)")
        if arr.dtype not in SUPPORTED:
            raise ArgumentError(f"fusebind: argument '{names()[i]}' (#{i}) of '{fn_name}': dtype {arr.dtype} is "
                                f"not supported; use {SUPPORTED_NAMES} (native byte order)")
        key.append((arr.shape, arr.dtype))
        arrays.append(arr)
    return tuple(key), arrays
