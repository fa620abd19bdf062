"""The numpy sweep table: every public name of `numpy` and `numpy.linalg` (numpy NUMPY_MINOR).

Each name maps to one of:
- `UFUNC`: a ufunc. The sweep calls it on every dtype fusebind has (and on
  mixed dtypes and Python scalars), and through reduce, accumulate, outer,
  at, out= and where=.
- `Call(fn, *args)` or a list of them: how to call it on traced arrays.
  `fn` takes one array per `Arg` (made from the Arg: dtype, shape, values);
  extra constants are written into the lambda. `values=False`: numpy's
  values are unspecified (np.empty_like), compare dtype and shape only.
- a `str`: why it takes no array (a constant, a class, a module, a file or
  configuration function, a creation function taking only a shape).

test_numpy_sweep.py fails on a name missing from the table, and on any call
whose outcome is not numpy's answer, a static value equal to numpy's, or an
`fb.FusebindError`. The table is kept for one numpy minor version; on
another the sweep is skipped with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

NUMPY_MINOR = (2, 4)


@dataclass(frozen=True)
class Arg:
    """One traced argument: dtype, shape, and which values (normal, special, positive, index)."""

    dtype: str = "float32"
    shape: tuple[int, ...] = (3, 4)
    values: str = "normal"


@dataclass(frozen=True)
class Call:
    fn: Callable[..., Any]
    args: tuple[Arg, ...] = field(default_factory=tuple)
    values: bool = True

    def __init__(self, fn: Callable[..., Any], *args: Arg, values: bool = True) -> None:
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "values", values)


UFUNC = "ufunc"


def F(*shape: int, values: str = "normal") -> Arg:
    return Arg("float32", shape if shape else (3, 4), values)


def D(*shape: int, values: str = "normal") -> Arg:
    return Arg("float64", shape if shape else (3, 4), values)


def I(*shape: int, values: str = "normal") -> Arg:  # noqa: E743
    return Arg("int32", shape if shape else (3, 4), values)


def L(*shape: int, values: str = "normal") -> Arg:
    return Arg("int64", shape if shape else (3, 4), values)


def B(*shape: int) -> Arg:
    return Arg("bool", shape if shape else (3, 4))


def FS(*shape: int) -> Arg:  # with NaN, +-inf, -0.0
    return F(*shape, values="special")


def FP(*shape: int) -> Arg:  # positive
    return F(*shape, values="positive")


S0 = ()  # a 0-d shape: F(*S0)

CONSTANT = "a constant, not a function"
INDEX_HELPER = "an indexing helper object (np.s_, np.r_, ...), not an array function"
MODULE = "a submodule; its functions are outside this table"
TYPE = "a class or scalar type, not an array function"
CONFIG = "configuration, introspection or the test runner; takes no array"
FILE = "reads or writes a file, buffer or string; takes no traced array"
CREATE = "creates an array from a shape (like= only); takes no array"
WINDOW = "a window function of a length M; takes no array"
DTYPES = "takes dtypes or type codes, not arrays"
DATETIME = "datetime64 / business-day arithmetic; fusebind has no datetime dtype, so no traced array is one"
FORMAT = "formats a Python or numpy scalar; takes no array"

NUMPY: dict[str, Any] = {
    # --- constants, helpers, modules
    **{n: CONSTANT for n in ("False_", "True_", "ScalarType", "e", "euler_gamma", "inf", "little_endian", "nan",
                             "newaxis", "pi", "sctypeDict", "typecodes")},
    **{n: INDEX_HELPER for n in ("c_", "index_exp", "mgrid", "ogrid", "r_", "s_")},
    **{n: MODULE for n in ("char", "core", "ctypeslib", "dtypes", "emath", "exceptions", "f2py", "fft", "lib",
                           "linalg", "ma", "polynomial", "random", "rec", "strings", "testing", "typing")},
    **{n: TYPE for n in (
        "bool", "bool_", "broadcast", "busdaycalendar", "byte", "bytes_", "cdouble", "character", "clongdouble",
        "complex128", "complex256", "complex64", "complexfloating", "csingle", "datetime64", "double", "dtype",
        "errstate", "finfo", "flatiter", "flexible", "float128", "float16", "float32", "float64", "floating",
        "generic", "half", "iinfo", "inexact", "int16", "int32", "int64", "int8", "int_", "intc", "integer",
        "intp", "long", "longdouble", "longlong", "matrix", "memmap", "ndarray", "ndenumerate", "ndindex",
        "nditer", "number", "object_", "poly1d", "recarray", "record", "short", "signedinteger", "single", "str_",
        "timedelta64", "ubyte", "ufunc", "uint", "uint16", "uint32", "uint64", "uint8", "uintc", "uintp", "ulong",
        "ulonglong", "unsignedinteger", "ushort", "vectorize", "void")},
    **{n: CONFIG for n in ("get_include", "get_printoptions", "getbufsize", "geterr", "geterrcall", "info",
                           "printoptions", "set_printoptions", "setbufsize", "seterr", "seterrcall", "show_config",
                           "show_runtime", "test")},
    **{n: FILE for n in ("frombuffer", "fromfile", "fromregex", "fromstring", "genfromtxt", "load", "loadtxt",
                         "save", "savetxt", "savez", "savez_compressed")},
    **{n: CREATE for n in ("empty", "eye", "identity", "ones", "zeros", "tri", "indices", "diag_indices",
                           "tril_indices", "triu_indices")},
    "mask_indices": "takes a size and a function; no array",
    "fromfunction": "takes a function and a shape; no array",
    "frompyfunc": "makes a ufunc from a Python function; no array",
    "fromiter": "takes an iterable of Python scalars, not an array",
    **{n: WINDOW for n in ("bartlett", "blackman", "hamming", "hanning", "kaiser")},
    **{n: DTYPES for n in ("isdtype", "issubdtype", "mintypecode", "promote_types", "typename")},
    **{n: DATETIME for n in ("busday_count", "busday_offset", "is_busday", "datetime_as_string", "datetime_data")},
    **{n: FORMAT for n in ("base_repr", "binary_repr", "format_float_positional", "format_float_scientific")},
    "broadcast_shapes": "takes shapes, not arrays",
    # --- creation from values: a traced value needs its values (refused)
    "array": Call(np.array, F()),
    "asarray": Call(np.asarray, F()),
    "asanyarray": Call(np.asanyarray, F()),
    "ascontiguousarray": Call(np.ascontiguousarray, F()),
    "asfortranarray": Call(np.asfortranarray, F()),
    "asarray_chkfinite": Call(np.asarray_chkfinite, F()),
    "asmatrix": Call(np.asmatrix, F()),
    "bmat": Call(lambda a: np.bmat([[a]]), F()),
    "require": Call(np.require, F()),
    "from_dlpack": Call(np.from_dlpack, F()),
    "full": Call(lambda a: np.full((2, 3), a), F(*S0)),
    "arange": Call(lambda n: np.arange(n), L(*S0)),
    "linspace": Call(lambda a, b: np.linspace(a, b, 5), F(*S0), F(*S0)),
    "logspace": Call(lambda a, b: np.logspace(a, b, 5), F(*S0), F(*S0)),
    "geomspace": Call(lambda a, b: np.geomspace(a, b, 5), FP(*S0), FP(*S0)),
    "nested_iters": ("an iterator constructor (nditer's nested form), not an array function: numpy refuses any "
                     "operand that is not an ndarray itself (TypeError: 'Iterator operand is flagged as writeable') "
                     "before fusebind is asked"),
    "array2string": Call(np.array2string, F()),
    "array_repr": Call(np.array_repr, F()),
    "array_str": Call(np.array_str, F()),
    # --- static answers
    "shape": Call(np.shape, F()),
    "ndim": Call(np.ndim, F(2, 3, 4)),
    "size": [Call(np.size, F()), Call(lambda a: np.size(a, 1), F())],
    "iscomplexobj": Call(np.iscomplexobj, F()),
    "isrealobj": Call(np.isrealobj, I()),
    "isscalar": Call(np.isscalar, F()),
    "iterable": [Call(np.iterable, F()), Call(np.iterable, F(*S0))],
    "result_type": [Call(np.result_type, F()), Call(lambda a: np.result_type(a, 2.0), I())],
    "can_cast": Call(lambda a: np.can_cast(a, np.float64), F()),
    "min_scalar_type": [Call(np.min_scalar_type, I()), Call(np.min_scalar_type, I(*S0))],
    "common_type": Call(np.common_type, F(), I()),
    "diag_indices_from": Call(np.diag_indices_from, F(3, 3)),
    "tril_indices_from": Call(np.tril_indices_from, F(3, 3)),
    "triu_indices_from": Call(lambda a: np.triu_indices_from(a, 1), F(3, 3)),
    "isfortran": Call(np.isfortran, F()),
    "may_share_memory": Call(np.may_share_memory, F(), F()),
    "shares_memory": Call(np.shares_memory, F(), F()),
    # --- reductions
    "sum": [Call(lambda a: np.sum(a, axis=0), F()), Call(np.sum, I()), Call(lambda a: np.sum(a, axis=1), B()),
            Call(lambda a: np.sum(a, axis=(0, 1), keepdims=True, dtype=np.float64), F()),
            Call(lambda a: np.sum(a, initial=2.0, where=a > 0), F()), Call(lambda a: np.sum(a, axis=(0, 0)), F())],
    "max": [Call(lambda a: np.max(a, axis=1), FS()), Call(np.max, I()), Call(lambda a: np.max(a, axis=0), B()),
            Call(lambda a: np.max(a[:, :0], axis=1), F()), Call(lambda a: np.max(a, initial=0.5, where=a < 1), F())],
    "amax": Call(lambda a: np.amax(a, axis=-1, keepdims=True), F()),
    "min": [Call(lambda a: np.min(a, axis=0), FS()), Call(np.min, L()), Call(lambda a: np.min(a, axis=1), B())],
    "amin": Call(lambda a: np.amin(a, axis=(0, 1)), I()),
    "mean": [Call(lambda a: np.mean(a, axis=1), F()), Call(np.mean, I()), Call(lambda a: np.mean(a, axis=0), B())],
    "var": [Call(lambda a: np.var(a, axis=0), F()), Call(lambda a: np.var(a, ddof=1), I())],
    "std": [Call(lambda a: np.std(a, axis=1, keepdims=True), D()), Call(np.std, B())],
    "any": [Call(lambda a: np.any(a, axis=0), B()), Call(np.any, FS())],
    "all": [Call(lambda a: np.all(a, axis=1), B()), Call(lambda a: np.all(a > -1), F())],
    "ptp": [Call(lambda a: np.ptp(a, axis=0), F()), Call(np.ptp, I()), Call(np.ptp, B())],
    "argmax": [Call(lambda a: np.argmax(a, axis=1), FS()), Call(np.argmax, I()), Call(np.argmax, B())],
    "argmin": [Call(lambda a: np.argmin(a, axis=0), FS()), Call(lambda a: np.argmin(a, keepdims=True), F())],
    "count_nonzero": [Call(np.count_nonzero, FS()), Call(lambda a: np.count_nonzero(a, axis=0), I())],
    "average": Call(lambda a: np.average(a, axis=0), F()),
    "nansum": Call(lambda a: np.nansum(a, axis=1), FS()),
    "nanmax": Call(lambda a: np.nanmax(a, axis=0), FS()),
    "nanmin": Call(np.nanmin, FS()),
    "nanmean": Call(lambda a: np.nanmean(a, axis=1), FS()),
    **{n: Call(getattr(np, n), FS()) for n in ("nanargmax", "nanargmin", "nancumprod", "nancumsum", "nanmedian",
                                               "nanprod", "nanstd", "nanvar")},
    "nanpercentile": Call(lambda a: np.nanpercentile(a, 50), F()),
    "nanquantile": Call(lambda a: np.nanquantile(a, 0.5), F()),
    "prod": Call(np.prod, F()),
    "median": Call(np.median, F()),
    "percentile": Call(lambda a: np.percentile(a, 50), F()),
    "quantile": Call(lambda a: np.quantile(a, 0.5), F()),
    "cumsum": Call(np.cumsum, F()),
    "cumprod": Call(np.cumprod, F()),
    "cumulative_sum": Call(np.cumulative_sum, F(4)),
    "cumulative_prod": Call(np.cumulative_prod, F(4)),
    # --- products
    "dot": [Call(np.dot, F(3, 4), F(4, 5)), Call(np.dot, F(4), F(4)), Call(np.dot, F(4), F(4, 5)),
            Call(np.dot, F(3, 4), F(4)), Call(np.dot, F(2, 3, 4), F(5, 4, 2)), Call(lambda a: np.dot(a, 2), I()),
            Call(np.dot, B(3, 4), B(4, 2)), Call(np.dot, I(3, 4), F(4, 2)), Call(np.dot, F(3, 4), F(5, 2))],
    "vdot": Call(np.vdot, F(), F()),
    "inner": [Call(np.inner, F(), F(5, 4)), Call(np.inner, F(4), F(4)), Call(lambda a: np.inner(a, 3), I()),
              Call(np.inner, F(2, 3, 4), I(5, 4)), Call(np.inner, B(4), B(2, 4))],
    "outer": Call(np.outer, F(3), F(2, 2)),
    "kron": [Call(np.kron, F(2, 3), F(3, 2)), Call(np.kron, F(3), F(2, 2)), Call(np.kron, B(2, 2), B(2))],
    "tensordot": [Call(lambda a, b: np.tensordot(a, b, 1), F(3, 4), F(4, 5)), Call(np.tensordot, F(3, 4), F(4, 5)),
                  Call(lambda a, b: np.tensordot(a, b, ([0], [1])), F(4, 3), F(5, 4)),
                  Call(lambda a, b: np.tensordot(a, b, 0), F(2), F(3)),
                  Call(lambda a, b: np.tensordot(a, b, ([1, 0], [0, 2])), I(3, 4, 2), F(4, 5, 3)),
                  Call(lambda a, b: np.tensordot(a, b, 2), B(3, 4), B(3, 4))],
    "einsum": [Call(lambda a, b: np.einsum("ij,jk->ik", a, b), F(3, 4), F(4, 5)),
               Call(lambda a, b: np.einsum("bij,bkj->bik", a, b), F(2, 3, 4), F(2, 5, 4)),
               Call(lambda a, b: np.einsum("i,j", a, b), I(3), F(4)), Call(lambda a: np.einsum("ii->i", a), F(4, 4)),
               Call(lambda a, b: np.einsum("ij,ij->", a, b), B(3, 4), B(3, 4)),
               Call(lambda a, b: np.einsum("...j,j", a, b), D(2, 3, 4), I(4)),
               Call(lambda a, b: np.einsum("ij,jk", a, b, optimize="optimal"), F(3, 4), F(4, 5))],
    "einsum_path": Call(lambda a, b: np.einsum_path("ij,jk->ik", a, b), F(3, 4), F(4, 5)),
    "cross": Call(np.cross, F(3), F(3)),
    "convolve": Call(np.convolve, F(4), F(3)),
    "correlate": Call(np.correlate, F(4), F(3)),
    "cov": Call(np.cov, F()),
    "corrcoef": Call(np.corrcoef, F()),
    "trace": [Call(np.trace, F(3, 3)), Call(lambda a: np.trace(a, 1, 0, 2), I(3, 2, 4))],
    "diagonal": [Call(np.diagonal, F(3, 3)), Call(lambda a: np.diagonal(a, -1, 2, 0), F(3, 2, 4))],
    "diag": [Call(np.diag, F(3, 3)), Call(lambda a: np.diag(a, -1), FS(5)), Call(lambda a: np.diag(a, 2), B(2))],
    "diagflat": Call(np.diagflat, F(3)),
    # --- shapes
    "reshape": [Call(lambda a: np.reshape(a, (2, -1)), F()), Call(lambda a: np.reshape(a, (4, 3), order="F"), F()),
                Call(lambda a: np.reshape(a, (5, 2)), F())],
    "ravel": [Call(np.ravel, F()), Call(lambda a: np.ravel(a, order="F"), I())],
    "transpose": [Call(np.transpose, F(2, 3, 4)), Call(lambda a: np.transpose(a, (1, 0, 2)), F(2, 3, 4)),
                  Call(lambda a: np.transpose(a, (0, 0)), F())],
    "permute_dims": Call(lambda a: np.permute_dims(a, (2, 0, 1)), F(2, 3, 4)),
    "matrix_transpose": Call(np.matrix_transpose, F(2, 3, 4)),
    "swapaxes": Call(lambda a: np.swapaxes(a, 0, 2), F(2, 3, 4)),
    "moveaxis": Call(lambda a: np.moveaxis(a, 0, -1), F(2, 3, 4)),
    "rollaxis": Call(lambda a: np.rollaxis(a, 2), F(2, 3, 4)),
    "expand_dims": Call(lambda a: np.expand_dims(a, (0, 2)), F()),
    "squeeze": [Call(np.squeeze, F(1, 3, 1)), Call(lambda a: np.squeeze(a, 0), F())],
    "atleast_1d": Call(np.atleast_1d, F(*S0)),
    "atleast_2d": Call(np.atleast_2d, F(4)),
    "atleast_3d": [Call(np.atleast_3d, F(4)), Call(np.atleast_3d, F(), F(4))],
    "broadcast_to": Call(lambda a: np.broadcast_to(a, (2, 4)), F(4)),
    "broadcast_arrays": Call(np.broadcast_arrays, F(), F(4)),
    "copy": Call(np.copy, I()),
    "astype": [Call(lambda a: np.astype(a, np.int32), FP()), Call(lambda a: np.astype(a, np.float16), F())],
    "zeros_like": [Call(np.zeros_like, F()), Call(lambda a: np.zeros_like(a, dtype=np.int32, shape=(2,)), F())],
    "ones_like": Call(np.ones_like, B()),
    "empty_like": Call(np.empty_like, I(), values=False),
    "full_like": [Call(lambda a: np.full_like(a, 2.5), I()), Call(lambda a, b: np.full_like(a, b), F(), F(4))],
    "take": [Call(lambda a: np.take(a, 0), F()), Call(lambda a: np.take(a, [0, 2], axis=1), F()),
             Call(lambda a: np.take(a, [[1, -1]], axis=0), I()), Call(lambda a: np.take(a, 7, mode="wrap"), F()),
             Call(lambda a: np.take(a, 20), F())],
    "flip": [Call(np.flip, F()), Call(lambda a: np.flip(a, 1), I())],
    "fliplr": Call(np.fliplr, F()),
    "flipud": Call(np.flipud, B()),
    "roll": [Call(lambda a: np.roll(a, 1), F()), Call(lambda a: np.roll(a, (1, -1), axis=(0, 1)), I())],
    "diff": [Call(lambda a: np.diff(a, axis=0), F()), Call(lambda a: np.diff(a, n=2), I(6)), Call(np.diff, B(5))],
    "concatenate": [Call(lambda a, b: np.concatenate([a, b], axis=1), FS(), F(3, 2)),
                    Call(lambda a, b: np.concatenate((a, b), axis=None), I(), F(2)),
                    Call(lambda a, b: np.concatenate([a, b]), B(2, 2), B(1, 2))],
    "concat": Call(lambda a, b: np.concat([a, b]), F(), F()),
    "stack": [Call(lambda a, b: np.stack([a, b]), F(), F()), Call(lambda a, b: np.stack((a, b), axis=-1), I(4), L(4))],
    "vstack": Call(lambda a, b: np.vstack([a, b]), F(4), F(2, 4)),
    "row_stack": Call(lambda a, b: np.row_stack([a, b]), F(4), F(2, 4)),  # deprecated alias of vstack
    "hstack": Call(lambda a, b: np.hstack([a, b]), F(), F(3, 1)),
    "dstack": Call(lambda a, b: np.dstack([a, b]), F(), F()),
    "column_stack": Call(lambda a, b: np.column_stack([a, b]), F(3), F(3, 2)),
    "append": [Call(np.append, F(), F(4)), Call(lambda a, b: np.append(a, b, axis=0), F(), F(1, 4))],
    "split": [Call(lambda a: np.split(a, 2, axis=1), F()), Call(lambda a: np.split(a, [1], axis=0), I()),
              Call(lambda a: np.split(a, 3, axis=1), F())],
    "array_split": Call(lambda a: np.array_split(a, 3, axis=1), F()),
    "hsplit": Call(lambda a: np.hsplit(a, 2), F()),
    "vsplit": Call(lambda a: np.vsplit(a, [2]), F()),
    "dsplit": Call(lambda a: np.dsplit(a, 2), F(2, 3, 4)),
    "unstack": Call(np.unstack, F()),
    "block": Call(lambda a: np.block([a, a]), F()),
    "tile": [Call(lambda a: np.tile(a, 2), F()), Call(lambda a: np.tile(a, (2, 1, 3)), I(2, 2))],
    "repeat": [Call(lambda a: np.repeat(a, 2, axis=0), F()), Call(lambda a: np.repeat(a, [1, 0, 2, 1]), F(4))],
    "resize": Call(lambda a: np.resize(a, (2, 7)), F()),
    "rot90": [Call(np.rot90, F()), Call(lambda a: np.rot90(a, -1, (1, 2)), F(2, 3, 4))],
    "delete": [Call(lambda a: np.delete(a, 1, axis=0), F()), Call(lambda a: np.delete(a, [0, 5]), I())],
    "insert": Call(lambda a: np.insert(a, 1, 0.0, axis=0), F()),
    "pad": [Call(lambda a: np.pad(a, 1), F()), Call(lambda a: np.pad(a, ((1, 2), (0, 3)), mode="reflect"), F()),
            Call(lambda a: np.pad(a, 2, mode="wrap"), I()), Call(lambda a: np.pad(a, (1, 1), mode="edge"), B()),
            Call(lambda a: np.pad(a, 1, constant_values=((1, 2), (3, 4))), I()),
            Call(lambda a: np.pad(a, 5, mode="symmetric"), D())],
    "meshgrid": [Call(np.meshgrid, F(3), F(2)), Call(lambda a, b: np.meshgrid(a, b, indexing="ij", sparse=True),
                                                      F(3), I(2))],
    "ix_": Call(np.ix_, L(3, values="index")),
    "trim_zeros": Call(np.trim_zeros, F(4)),
    "ediff1d": Call(np.ediff1d, F()),
    "take_along_axis": [Call(lambda a: np.take_along_axis(a, np.zeros((3, 1), np.int64), axis=1), F()),
                        Call(lambda a: np.take_along_axis(a, np.array([[0, -1], [2, 1], [3, 3]]), axis=1), I()),
                        Call(lambda a: np.take_along_axis(a, np.array([0, 11, -12]), axis=None), B()),
                        Call(lambda a: np.take_along_axis(a, np.array([[4]]), axis=1), F()),
                        Call(lambda a, i: np.take_along_axis(a, i, axis=1), F(), L(3, 2, values="index")),
                        Call(lambda a, i: np.take_along_axis(a, i + 1, axis=1), F(), L(3, 2, values="index"))],
    # --- elementwise functions
    "where": [Call(lambda a: np.where(a > 0, a, 0), F()), Call(lambda a, b: np.where(a > 0, a, b), F(), I(4)),
              Call(lambda c, a: np.where(c, a, 2.5), B(), I()), Call(lambda a: np.where(a > 0), F())],
    "clip": [Call(lambda a: np.clip(a, -1, 1), FS()), Call(lambda a: np.clip(a, 0, 2), I()),
             Call(lambda a: np.clip(a, 0.5, None), I()), Call(lambda a, b: np.clip(a, b, 2.0), F(), F(4))],
    "nan_to_num": [Call(np.nan_to_num, FS()), Call(lambda a: np.nan_to_num(a, nan=-1.0, posinf=9.0), FS()),
                   Call(np.nan_to_num, I())],
    "isclose": [Call(np.isclose, FS(), FS()), Call(lambda a, b: np.isclose(a, b, equal_nan=True), FS(), FS()),
                Call(lambda a: np.isclose(a, 1), I())],
    "allclose": Call(np.allclose, F(), F()),
    "array_equal": Call(np.array_equal, F(), F()),
    "array_equiv": Call(np.array_equiv, F(), F()),
    "tril": [Call(np.tril, F()), Call(lambda a: np.tril(a, -1), I(2, 3, 3)), Call(np.tril, F(4))],
    "triu": Call(lambda a: np.triu(a, 1), F()),
    "real": Call(np.real, F()),
    "imag": Call(np.imag, I()),
    "iscomplex": Call(np.iscomplex, F()),
    "isreal": Call(np.isreal, F()),
    "real_if_close": Call(np.real_if_close, F()),
    "isposinf": Call(np.isposinf, FS()),
    "isneginf": Call(np.isneginf, FS()),
    "select": [Call(lambda a: np.select([a > 1, a < -1], [a, -a], 0.5), F()),
               Call(lambda a, b: np.select([a > 0], [b]), I(), I(4))],
    "piecewise": Call(lambda a: np.piecewise(a, [a > 0], [1.0, 0.0]), F()),
    "polyval": [Call(lambda a: np.polyval([1.0, -2.0, 3.0], a), F()), Call(np.polyval, F(3), I())],
    "angle": Call(np.angle, F()),
    "around": Call(np.around, F()),
    "round": Call(np.round, F()),
    "fix": Call(np.fix, F()),
    "sinc": Call(np.sinc, F()),
    "i0": Call(np.i0, F()),
    "unwrap": Call(np.unwrap, F(4)),
    "interp": Call(lambda a: np.interp(a, [0.0, 1.0], [0.0, 2.0]), F()),
    "gradient": Call(np.gradient, F(4)),
    "trapezoid": Call(np.trapezoid, F(4)),
    "vander": Call(np.vander, F(3)),
    "choose": [Call(lambda a, b: np.choose(np.zeros(4, np.int64), [a, b]), F(4), F(4)),
               Call(lambda a, b: np.choose(np.array([0, 1, 3, -1]), [a, b], mode="wrap"), F(4), I(4)),
               Call(lambda a, b: np.choose(np.array([[0], [1], [1]]), [a, b]), I(), I(4)),
               Call(lambda a, b: np.choose(np.array([0, 2]), [a, b]), F(2), F(2)),
               Call(lambda i, a, b: np.choose(i, [a, b], mode="clip"), L(4, values="index"), F(4), I(4)),
               Call(lambda i, a, b: np.choose(i, [a, b], mode="wrap"), I(4), F(4), I(4))],
    "apply_along_axis": Call(lambda a: np.apply_along_axis(np.sum, 0, a), F()),
    "apply_over_axes": Call(lambda a: np.apply_over_axes(np.sum, a, [0]), F()),
    # --- data-dependent shapes, sorting, searching, sets, histograms
    **{n: Call(getattr(np, n), F()) for n in ("argsort", "argwhere", "flatnonzero", "nonzero", "sort",
                                              "sort_complex", "unique", "unique_all", "unique_counts",
                                              "unique_inverse", "unique_values", "lexsort")},
    "argpartition": Call(lambda a: np.argpartition(a, 1), F()),
    "partition": Call(lambda a: np.partition(a, 1), F()),
    "searchsorted": Call(lambda a: np.searchsorted(np.arange(3.0), a), F()),
    "extract": Call(lambda a: np.extract(a > 0, a), F()),
    "compress": Call(lambda a: np.compress([True, False, True], a, axis=0), F()),
    "bincount": Call(np.bincount, L(4, values="index")),
    "digitize": Call(lambda a: np.digitize(a, [0.0, 1.0]), F()),
    "histogram": Call(np.histogram, F()),
    "histogram2d": Call(np.histogram2d, F(4), F(4)),
    "histogramdd": Call(np.histogramdd, F(4, 2)),
    "histogram_bin_edges": Call(np.histogram_bin_edges, F()),
    **{n: Call(getattr(np, n), F(4), F(4)) for n in ("intersect1d", "setdiff1d", "setxor1d", "union1d", "isin")},
    "packbits": Call(np.packbits, B()),
    "unpackbits": Call(np.unpackbits, I()),
    "ravel_multi_index": Call(lambda a: np.ravel_multi_index((a, a), (4, 4)), L(3, values="index")),
    "unravel_index": Call(lambda a: np.unravel_index(a, (2, 2)), L(3, values="index")),
    **{n: Call(getattr(np, n), F(3), F(2)) for n in ("polyadd", "polydiv", "polymul", "polysub")},
    "poly": Call(np.poly, F(3)),
    "polyder": Call(np.polyder, F(3)),
    "polyint": Call(np.polyint, F(3)),
    "polyfit": Call(lambda a, b: np.polyfit(a, b, 1), F(4), F(4)),
    "roots": Call(np.roots, F(3)),
    # --- writing into an array in place
    "copyto": Call(lambda a: np.copyto(a, 1.0), F()),
    "place": Call(lambda a: np.place(a, a > 0, [0.0]), F()),
    "put": Call(lambda a: np.put(a, [0], [1.0]), F()),
    "putmask": Call(lambda a: np.putmask(a, a > 0, 0.0), F()),
    "put_along_axis": Call(lambda a: np.put_along_axis(a, np.zeros((3, 1), np.int64), 0.0, axis=1), F()),
    "fill_diagonal": Call(lambda a: np.fill_diagonal(a, 0.0), F(3, 3)),
    # --- the ufuncs
    **{n: UFUNC for n in """
        abs absolute acos acosh add arccos arccosh arcsin arcsinh arctan arctan2 arctanh asin asinh atan
        atan2 atanh bitwise_and bitwise_count bitwise_invert bitwise_left_shift bitwise_not bitwise_or
        bitwise_right_shift bitwise_xor cbrt ceil conj conjugate copysign cos cosh deg2rad degrees divide
        divmod equal exp exp2 expm1 fabs float_power floor floor_divide fmax fmin fmod frexp gcd greater
        greater_equal heaviside hypot invert isfinite isinf isnan isnat lcm ldexp left_shift less less_equal
        log log10 log1p log2 logaddexp logaddexp2 logical_and logical_not logical_or logical_xor matmul
        matvec maximum minimum mod modf multiply negative nextafter not_equal positive pow power rad2deg
        radians reciprocal remainder right_shift rint sign signbit sin sinh spacing sqrt square subtract tan
        tanh true_divide trunc vecdot vecmat""".split()},
}

LINALG: dict[str, Any] = {
    "LinAlgError": TYPE,
    "test": CONFIG,
    **{n: Call(getattr(np.linalg, n), F(3, 3)) for n in (
        "cholesky", "cond", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matrix_rank", "pinv", "qr",
        "slogdet", "svd", "svdvals", "diagonal", "trace")},
    "matrix_power": Call(lambda a: np.linalg.matrix_power(a, 2), F(3, 3)),
    "solve": Call(np.linalg.solve, F(3, 3), F(3)),
    "lstsq": Call(np.linalg.lstsq, F(3, 3), F(3)),
    "tensorinv": Call(lambda a: np.linalg.tensorinv(a, ind=1), F(3, 3)),
    "tensorsolve": Call(np.linalg.tensorsolve, F(3, 3), F(3)),
    "cross": Call(np.linalg.cross, F(3), F(3)),
    "matmul": [Call(np.linalg.matmul, F(3, 4), F(4, 5)), Call(np.linalg.matmul, I(4), I(4, 2))],
    "matrix_transpose": Call(np.linalg.matrix_transpose, F()),
    "multi_dot": Call(lambda a, b, c: np.linalg.multi_dot([a, b, c]), F(4), F(4, 3), F(3, 2)),
    "norm": [Call(np.linalg.norm, F()), Call(lambda a: np.linalg.norm(a, axis=1), I()),
             Call(lambda a: np.linalg.norm(a, np.inf, axis=0), F()), Call(lambda a: np.linalg.norm(a, 3), F(4)),
             Call(lambda a: np.linalg.norm(a, 1), F()), Call(lambda a: np.linalg.norm(a, "nuc"), F()),
             Call(lambda a: np.linalg.norm(a, 0, axis=1, keepdims=True), FS())],
    "vector_norm": [Call(np.linalg.vector_norm, F()),
                    Call(lambda a: np.linalg.vector_norm(a, axis=(0, 2), keepdims=True), F(2, 3, 4))],
    "matrix_norm": Call(np.linalg.matrix_norm, F(2, 3, 4)),
    "outer": Call(np.linalg.outer, F(3), F(4)),
    "tensordot": Call(lambda a, b: np.linalg.tensordot(a, b, axes=1), F(3, 4), F(4, 2)),
    "vecdot": [Call(np.linalg.vecdot, F(), F()), Call(lambda a, b: np.linalg.vecdot(a, b, axis=0), F(), F(3, 1))],
}
