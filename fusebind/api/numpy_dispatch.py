"""numpy functions on traced arrays (NEP 18): `Tracer.__array_function__` and the methods.

Owns the table from each numpy function fusebind maps to its
implementation (numpy_reductions, numpy_linalg, numpy_shapes, numpy_joins,
numpy_elementwise) and how it is probed, the functions whose answer is
static in a trace (np.shape, np.ndim, np.size, np.iscomplexobj,
np.isrealobj: numpy's own answer on a stand-in), and the refusal of every
other numpy function: `fb.UnsupportedOperation` naming it, with what to use
instead where something exists. A call is: probe (numpy on stand-ins:
numpy's argument errors, dtype and shape), implement, check the result's
dtype and shape against the probe's.

Must not: map a function it cannot compute with numpy's exact semantics;
such a function is refused, never approximated.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from fusebind.api import numpy_einsum as N
from fusebind.api import numpy_elementwise as E
from fusebind.api import numpy_gathers as G
from fusebind.api import numpy_joins as J
from fusebind.api import numpy_linalg as L
from fusebind.api import numpy_reductions as R
from fusebind.api import numpy_rounding as RD
from fusebind.api import numpy_scans as C
from fusebind.api import numpy_shapes as S
from fusebind.api.numpy_kernels import graph_of, unsupported
from fusebind.api.numpy_probe import check, probe
from fusebind.api.numpy_ufuncs import call as ufunc_call
from fusebind.api.tracer import Tracer

la = np.linalg

#: numpy function -> (implementation or None for a static answer, probe mode; see numpy_probe.probe)
TABLE: dict[Any, tuple[Callable[..., Any] | None, str]] = {}


def _map(funcs: list[Any], impl: Callable[..., Any] | None, mode: str) -> None:
    for f in funcs:
        TABLE[f] = (impl, mode)


_map([np.shape, np.ndim, np.size, np.iscomplexobj, np.isrealobj, np.result_type, np.can_cast, np.common_type,
      np.diag_indices_from, np.tril_indices_from, np.triu_indices_from], None, "full")
_map([np.min_scalar_type], S.min_scalar_type, "full")
_map([np.sum], R.sum_, "auto")
_map([np.max, np.amax], R.max_, "auto")
_map([np.min, np.amin], R.min_, "auto")
_map([np.any], R.any_, "auto")
_map([np.all], R.all_, "auto")
_map([np.mean], R.mean, "auto")
_map([np.var], R.var, "auto")
_map([np.std], R.std, "auto")
_map([np.ptp], R.ptp, "auto")
_map([np.argmax], R.argmax, "auto")
_map([np.argmin], R.argmin, "auto")
_map([np.count_nonzero], R.count_nonzero, "auto")
_map([np.average], R.average, "auto")
_map([np.nansum], R.nansum, "auto")
_map([np.nanmax], R.nanmax, "auto")
_map([np.nanargmax], R.nanargmax, "auto")
_map([np.nanargmin], R.nanargmin, "auto")
_map([np.round, np.around], RD.round_, "auto")
_map([np.fix], RD.fix, "auto")
_map([np.nanmin], R.nanmin, "auto")
_map([np.nanmean], R.nanmean, "auto")
_map([np.prod], R.prod, "auto")
_map([np.nanprod], R.nanprod, "auto")
_map([np.nanvar], R.nanvar, "auto")
_map([np.nanstd], R.nanstd, "auto")
_map([np.cumsum], C.cumsum, "auto")
_map([np.cumprod], C.cumprod, "auto")
_map([np.nancumsum], C.nancumsum, "auto")
_map([np.nancumprod], C.nancumprod, "auto")
_map([np.cumulative_sum], C.cumulative_sum, "auto")
_map([np.cumulative_prod], C.cumulative_prod, "auto")
_map([np.einsum], N.einsum, "auto")
_map([np.dot], L.dot, "auto")
_map([np.vdot], L.vdot, "auto")
_map([np.inner], L.inner, "auto")
_map([np.outer], L.outer, "auto")
_map([np.kron], L.kron, "auto")
_map([np.tensordot], L.tensordot, "auto")
_map([la.tensordot], L.linalg_tensordot, "auto")
_map([la.outer], L.linalg_outer, "auto")
_map([la.matmul], L.linalg_matmul, "auto")
_map([la.vecdot], L.linalg_vecdot, "auto")
_map([la.multi_dot], J.multi_dot, "auto")
_map([la.norm], L.norm, "auto")
_map([la.vector_norm], L.vector_norm, "auto")
_map([la.matrix_norm], L.matrix_norm, "auto")
_map([np.reshape], S.reshape, "full")
_map([np.ravel], S.ravel, "full")
_map([np.transpose, np.permute_dims], S.transpose, "full")
_map([np.matrix_transpose, la.matrix_transpose], S.matrix_transpose, "full")
_map([np.swapaxes], S.swapaxes, "full")
_map([np.moveaxis], S.moveaxis, "full")
_map([np.rollaxis], S.rollaxis, "full")
_map([np.expand_dims], S.expand_dims, "full")
_map([np.squeeze], S.squeeze, "full")
_map([np.atleast_1d, np.atleast_2d, np.atleast_3d], S.atleast_nd, "full")
_map([np.broadcast_to], S.broadcast_to, "full")
_map([np.broadcast_arrays], S.broadcast_arrays, "full")
_map([np.copy], S.copy, "full")
_map([np.astype], S.astype, "auto")
_map([np.zeros_like], S.zeros_like, "small")
_map([np.ones_like], S.ones_like, "small")
_map([np.empty_like], S.empty_like, "small")
_map([np.full_like], S.full_like, "small")
_map([np.take], S.take, "small")
_map([np.meshgrid], S.meshgrid, "small")
_map([np.flip], G.flip, "full")
_map([np.fliplr], G.fliplr, "full")
_map([np.flipud], G.flipud, "full")
_map([np.rot90], G.rot90, "full")
_map([np.roll], G.roll, "small")
_map([np.diff], G.diff, "small")
_map([np.ediff1d], G.ediff1d, "small")
_map([np.repeat], G.repeat, "small")
_map([np.tile], G.tile, "small")
_map([np.resize], G.resize, "small")
_map([np.delete], G.delete, "small")
_map([np.diagonal], G.diagonal, "full")
_map([la.diagonal], G.linalg_diagonal, "full")
_map([np.diag], G.diag, "small")
_map([np.trace], G.trace, "auto")
_map([la.trace], G.linalg_trace, "auto")
_map([np.take_along_axis], G.take_along_axis, "small")
_map([np.choose], G.choose, "small")
_map([np.pad], G.pad, "small")
_map([np.concatenate, np.concat], J.concatenate, "small")
_map([np.stack], J.stack, "small")
_map([np.vstack], J.vstack, "small")
_map([np.hstack], J.hstack, "small")
_map([np.dstack], J.dstack, "small")
_map([np.column_stack], J.column_stack, "small")
_map([np.append], J.append, "small")
_map([np.split], J.split, "small")
_map([np.array_split], J.array_split, "small")
_map([np.hsplit], J.hsplit, "small")
_map([np.vsplit], J.vsplit, "small")
_map([np.dsplit], J.dsplit, "small")
_map([np.unstack], J.unstack, "small")
_map([np.where], E.where, "auto")
_map([np.clip], E.clip, "auto")
_map([np.nan_to_num], E.nan_to_num, "auto")
_map([np.isclose], E.isclose, "auto")
_map([np.tril], E.tril, "small")
_map([np.triu], E.triu, "small")
_map([np.real], E.real, "auto")
_map([np.imag], E.imag, "auto")
_map([np.iscomplex], E.iscomplex, "auto")
_map([np.isreal], E.isreal, "auto")
_map([np.real_if_close], E.real_if_close, "auto")
_map([np.isposinf], E.isposinf, "auto")
_map([np.isneginf], E.isneginf, "auto")
_map([np.select], E.select, "auto")
_map([np.polyval], E.polyval, "small")

_SIGNATURES = {impl: inspect.signature(impl) for impl, _ in TABLE.values() if impl is not None}

_NO_SORT = "fusebind has no sort op; sort outside the jitted function"
_VALUE_SHAPE = "its result's shape depends on the values, which a trace does not have"
_NEEDS_BOOL = ("it returns a Python bool, which needs the values; compare inside (np.all(x == y) is a traced "
               "bool) or outside the jitted function")
_SOLVER = "fusebind has no linear-algebra solver or decomposition; call it outside the jitted function"
_WRITES = "writes into its argument in place (and returns None), and traced arrays are immutable"
_ADVICE: dict[str, str] = {
    **{n: _NO_SORT for n in ("sort", "argsort", "partition", "argpartition", "lexsort", "sort_complex", "median",
                             "percentile", "quantile", "nanmedian", "nanpercentile", "nanquantile",
                             "searchsorted")},
    **{n: _VALUE_SHAPE for n in ("nonzero", "flatnonzero", "argwhere", "extract", "compress", "unique",
                                 "unique_all", "unique_counts", "unique_inverse", "unique_values", "trim_zeros",
                                 "histogram", "histogram2d", "histogramdd", "histogram_bin_edges", "bincount")},
    **{n: _NEEDS_BOOL for n in ("array_equal", "array_equiv", "allclose")},
    "diagflat": "use np.diag(x.ravel(), k)",
    **{n: _SOLVER for n in ("inv", "solve", "det", "slogdet", "eig", "eigh", "eigvals", "eigvalsh", "svd",
                            "svdvals", "cholesky", "qr", "lstsq", "pinv", "matrix_rank", "matrix_power", "cond",
                            "tensorinv", "tensorsolve")},
    **{n: f"it {_WRITES}; use {how}" for n, how in (
        ("put_along_axis", "y = fb.put_along_axis(x, indices, values, axis), which returns the new array"),
        ("put", "y = fb.at(x.ravel())[indices].set(values).reshape(x.shape) (np.put's flat indices, mode='raise')"),
        ("place", "y = fb.where(mask, v, x) for one value v, or, for a constant mask, fb.at(x)[mask].set(values) "
                  "(one value per masked element)"),
        ("putmask", "y = fb.where(mask, values, x) (values broadcast)"))},
    "cross": "write it with products of components, e.g. a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]",
}


def public_name(func: Any) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    return f"{module}.{getattr(func, '__name__', repr(func))}"


def refusal(func: Any, graph: Any) -> Exception:
    name = getattr(func, "__name__", "")
    advice = _ADVICE.get(name, "compute it outside the jitted function (on its result), or write it with the "
                               "numpy functions fusebind maps (numpy_dispatch.TABLE)")
    return unsupported(graph, f"{public_name(func)} is not supported on traced arrays; {advice}")


def call(func: Any, args: tuple, kwargs: dict) -> Any:
    """`func(*args, **kwargs)` with tracers among the arguments, as numpy computes it."""
    graph = graph_of(args, kwargs)
    entry = TABLE.get(func)
    if entry is None:
        raise refusal(func, graph)
    impl, mode = entry
    name = public_name(func)
    p = probe(func, args, kwargs, mode, graph, name)
    if impl is None:
        return p.result  # type: ignore[union-attr]
    try:
        _SIGNATURES[impl].bind(p, *args, **kwargs)
    except TypeError as exc:
        raise unsupported(graph, f"{name}: these arguments are not supported on traced arrays ({exc})") from None
    return check(graph, name, impl(p, *args, **kwargs), p)


def array_function(func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    """`Tracer.__array_function__`."""
    if not all(issubclass(t, (Tracer, np.ndarray)) for t in types):
        return NotImplemented  # another array library: let it answer (NEP 18)
    return call(func, args, kwargs)


def method(name: str, x: Tracer, args: tuple, kwargs: dict) -> Any:
    """`x.<name>(*args, **kwargs)` as `numpy.<name>(x, *args, **kwargs)` (same semantics for these methods)."""
    return call(getattr(np, name), (x, *args), kwargs)


# ---------------------------------------------------------------- Tracer conversions and attributes
def no_value(x: Tracer, what: str) -> Exception:
    """The error for anything that needs a traced array's values (bool(), int(), np.asarray, ...)."""
    if what == "bool":
        return unsupported(x.graph, "the truth value of a traced array is not known while tracing (Python `if`, "
                                    "`while`, `and`, `or` and `not` need it); choose values with fb.where(cond, a, b) "
                                    "(or np.where), and reduce to a traced bool with np.any / np.all")
    if what == "array":
        return unsupported(x.graph, "numpy needs the values of a traced array here (np.asarray / np.array of it, or "
                                    "a numpy function or protocol fusebind does not map), and a trace has none; use "
                                    "the traced array directly in the numpy functions and operators fusebind maps, "
                                    "or convert the jitted function's result outside")
    return unsupported(x.graph, f"{what}() of a traced array needs its value, which a trace does not have; shapes "
                                "are static, so use x.shape, len(x) or x.ndim for sizes and loops; convert values "
                                "inside the trace with x.astype(...)")


#: ndarray methods that are numpy.<name>(x, ...) with the same arguments
METHOD_FUNCTIONS = frozenset({
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "choose", "clip", "compress", "conj",
    "conjugate", "cumprod", "cumsum", "diagonal", "dot", "max", "mean", "min", "nonzero", "prod", "ravel",
    "repeat", "round", "searchsorted", "squeeze", "std", "sum", "swapaxes", "take", "trace", "var"})
_IN_PLACE = frozenset({"fill", "itemset", "partition", "put", "resize", "setfield", "setflags", "sort", "byteswap"})


def attribute(x: Tracer, name: str) -> Any:
    """`x.<name>` for ndarray attributes the Tracer class does not define."""
    if name in METHOD_FUNCTIONS:
        func = np.conjugate if name == "conj" else getattr(np, name)
        if isinstance(func, np.ufunc):
            return lambda *args, **kwargs: ufunc_call(func, (x, *args), kwargs)
        return lambda *args, **kwargs: call(func, (x, *args), kwargs)
    if name == "put":
        raise unsupported(x.graph, f"ndarray.put {_WRITES}; use y = fb.at(x.ravel())[indices].set(values)"
                                   ".reshape(x.shape)")
    if name in _IN_PLACE:
        raise unsupported(x.graph, f"ndarray.{name} changes the array in place, and traced arrays are immutable; "
                                   "use the numpy function that returns a new array")
    if name in ("item", "tolist", "tobytes", "tofile", "dump", "dumps", "view", "getfield", "data", "ctypes"):
        raise no_value(x, f"ndarray.{name}")
    raise unsupported(x.graph, f"ndarray.{name} is not supported by fusebind on traced arrays")


_NDARRAY_NAMES = frozenset(n for n in dir(np.ndarray) if not n.startswith("_"))


def has_attribute(name: str) -> bool:
    return name in _NDARRAY_NAMES
