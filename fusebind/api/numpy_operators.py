"""The Python operators and ndarray methods of a traced array, as numpy defines them.

Owns `ArrayMethods`, the base of `tracer.Tracer` (so `isinstance(v,
ArrayMethods)` is "v is a traced array" for the modules below the tracer,
capture.call_key): every operator (`+`, `@`,
`**`, `&`, the comparisons, the in-place forms, unary `-`, `~`, `abs`) as
numpy's ufunc on the operands (numpy_ufuncs.binop; Python's own answer when
both are Python scalars), the ndarray methods as the numpy functions of the
same name (numpy_dispatch), `len()`, iteration over axis 0 and basic
indexing (static shapes, as JAX does), and the conversions that would need
values a trace does not have (`bool()`, `int()`, `float()`, `np.asarray`),
which raise `fb.UnsupportedOperation` saying what to use instead. Each
calls its implementation through `handlers.NUMPY` (bound late by trace.py),
so this module imports no numpy_* module above it.

Must not: build IR itself, or promote dtypes by its own rules (numpy_ufuncs
and numpy_dispatch do both, numpy's way).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.api.errors import UnsupportedOperation
from fusebind.api.handlers import NUMPY


class ArrayMethods:
    """numpy's array interface for `Tracer` (which holds `graph`, `value`, `shape`, `dtype`)."""

    graph: Any
    value: Any
    shape: tuple[int, ...]
    dtype: np.dtype

    # ------------------------------------------------------------ values a trace does not have
    # Each of these needs the array's values; they raise numpy_dispatch.no_value's UnsupportedOperation.
    def __bool__(self) -> bool:
        raise NUMPY.no_value(self, "bool")

    def __index__(self) -> int:
        raise NUMPY.no_value(self, "operator.index")

    def __int__(self) -> int:
        raise NUMPY.no_value(self, "int")

    def __float__(self) -> float:
        raise NUMPY.no_value(self, "float")

    def __complex__(self) -> complex:
        raise NUMPY.no_value(self, "complex")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise NUMPY.no_value(self, "array")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        raise NUMPY.no_value(self, "array")

    def __dlpack_device__(self) -> Any:
        raise NUMPY.no_value(self, "array")

    # ------------------------------------------------------------ static shapes: len, iteration, indexing
    def __len__(self) -> int:
        if not self.shape:
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': len() of unsized object (a 0-d "
                                       "traced array)")
        return self.shape[0]

    def __iter__(self) -> Any:
        """Over axis 0, as numpy (and JAX) iterate: x[0], x[1], ... (the length is static)."""
        if not self.shape:
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, key: Any) -> "Tracer":
        return NUMPY.getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': traced arrays are immutable (x[...] = v "
                                   "writes in place); build the new array with y = fb.at(x)[...].set(v) (or "
                                   "fb.at(x)[...].add(v) for x[...] += v; fb.where(mask, v, x) for a traced mask)")

    # ------------------------------------------------------------ operators
    # numpy's ufuncs (numpy_ufuncs.binop): Python's answer when both operands are Python scalars.
    def _op(self, name: str, a: Any, b: Any) -> Any:
        return NUMPY.binop(getattr(np, name), a, b)

    def _iop(self, name: str, o: Any) -> Any:
        return NUMPY.inplace(getattr(np, name), self, o)

    def __add__(self, o: Any) -> Any: return self._op("add", self, o)
    def __radd__(self, o: Any) -> Any: return self._op("add", o, self)
    def __sub__(self, o: Any) -> Any: return self._op("subtract", self, o)
    def __rsub__(self, o: Any) -> Any: return self._op("subtract", o, self)
    def __mul__(self, o: Any) -> Any: return self._op("multiply", self, o)
    def __rmul__(self, o: Any) -> Any: return self._op("multiply", o, self)
    def __truediv__(self, o: Any) -> Any: return self._op("true_divide", self, o)
    def __rtruediv__(self, o: Any) -> Any: return self._op("true_divide", o, self)
    def __floordiv__(self, o: Any) -> Any: return self._op("floor_divide", self, o)
    def __rfloordiv__(self, o: Any) -> Any: return self._op("floor_divide", o, self)
    def __mod__(self, o: Any) -> Any: return self._op("remainder", self, o)
    def __rmod__(self, o: Any) -> Any: return self._op("remainder", o, self)
    def __divmod__(self, o: Any) -> Any: return self._op("divmod", self, o)
    def __rdivmod__(self, o: Any) -> Any: return self._op("divmod", o, self)
    def __pow__(self, o: Any) -> Any: return self._op("power", self, o)
    def __rpow__(self, o: Any) -> Any: return self._op("power", o, self)
    def __matmul__(self, o: Any) -> Any: return self._op("matmul", self, o)
    def __rmatmul__(self, o: Any) -> Any: return self._op("matmul", o, self)
    def __and__(self, o: Any) -> Any: return self._op("bitwise_and", self, o)
    def __rand__(self, o: Any) -> Any: return self._op("bitwise_and", o, self)
    def __or__(self, o: Any) -> Any: return self._op("bitwise_or", self, o)
    def __ror__(self, o: Any) -> Any: return self._op("bitwise_or", o, self)
    def __xor__(self, o: Any) -> Any: return self._op("bitwise_xor", self, o)
    def __rxor__(self, o: Any) -> Any: return self._op("bitwise_xor", o, self)
    def __lshift__(self, o: Any) -> Any: return self._op("left_shift", self, o)
    def __rlshift__(self, o: Any) -> Any: return self._op("left_shift", o, self)
    def __rshift__(self, o: Any) -> Any: return self._op("right_shift", self, o)
    def __rrshift__(self, o: Any) -> Any: return self._op("right_shift", o, self)
    def __lt__(self, o: Any) -> Any: return self._op("less", self, o)
    def __le__(self, o: Any) -> Any: return self._op("less_equal", self, o)
    def __gt__(self, o: Any) -> Any: return self._op("greater", self, o)
    def __ge__(self, o: Any) -> Any: return self._op("greater_equal", self, o)
    def __eq__(self, o: Any) -> Any: return self._op("equal", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Any: return self._op("not_equal", self, o)  # type: ignore[override]
    __hash__ = object.__hash__

    # `x += y` is numpy's np.add(x, y, out=x) (x's dtype and shape kept), rebinding x to the result
    def __iadd__(self, o: Any) -> Any: return self._iop("add", o)
    def __isub__(self, o: Any) -> Any: return self._iop("subtract", o)
    def __imul__(self, o: Any) -> Any: return self._iop("multiply", o)
    def __itruediv__(self, o: Any) -> Any: return self._iop("true_divide", o)
    def __ifloordiv__(self, o: Any) -> Any: return self._iop("floor_divide", o)
    def __imod__(self, o: Any) -> Any: return self._iop("remainder", o)
    def __ipow__(self, o: Any) -> Any: return self._iop("power", o)
    def __imatmul__(self, o: Any) -> Any: return self._iop("matmul", o)
    def __iand__(self, o: Any) -> Any: return self._iop("bitwise_and", o)
    def __ior__(self, o: Any) -> Any: return self._iop("bitwise_or", o)
    def __ixor__(self, o: Any) -> Any: return self._iop("bitwise_xor", o)

    # unary operators: numpy's ufunc, or Python's answer for a Python scalar (numpy_ufuncs.unary_operator)
    def __neg__(self) -> Any: return NUMPY.unary("-", self)
    def __pos__(self) -> Any: return NUMPY.unary("+", self)
    def __abs__(self) -> Any: return NUMPY.unary("abs", self)
    def __invert__(self) -> Any: return NUMPY.unary("~", self)

    def __round__(self, ndigits: Any = None) -> Any:
        raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': round() of an array: numpy.ndarray "
                                   "doesn't define __round__ (numpy raises TypeError too); fusebind has no rounding "
                                   "op, so round outside the jitted function")

    # ------------------------------------------------------------ methods
    # Each is numpy.<name>(x, ...) (numpy_dispatch.call): the same probe, axis checks and dtypes.
    def sum(self, *args: Any, **kwargs: Any) -> Any:
        return NUMPY.function(np.sum, (self, *args), kwargs)

    def max(self, *args: Any, **kwargs: Any) -> Any:
        return NUMPY.function(np.max, (self, *args), kwargs)

    def min(self, *args: Any, **kwargs: Any) -> Any:
        return NUMPY.function(np.min, (self, *args), kwargs)

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        return NUMPY.function(np.mean, (self, *args), kwargs)

    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> Any:
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return NUMPY.function(np.reshape, (self, tuple(dims)), {"order": order, "copy": copy})

    def transpose(self, *axes: Any) -> Any:
        perm = axes[0] if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))) else axes
        return NUMPY.function(np.transpose, (self, tuple(perm) if perm else None), {})

    def flatten(self, order: str = "C") -> Any:
        return NUMPY.function(np.ravel, (self, order), {})

    def copy(self, order: str = "K") -> "Tracer":
        return self

    @property
    def T(self) -> Any:
        return self.transpose()

    @property
    def mT(self) -> Any:
        return NUMPY.function(np.matrix_transpose, (self,), {})

    @property
    def real(self) -> "Tracer":
        return self

    @property
    def imag(self) -> Any:
        return NUMPY.function(np.imag, (self,), {})

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __getattr__(self, name: str) -> Any:
        """The other ndarray methods: numpy.<name>(x, ...) where that is the same, else a clear refusal."""
        if name.startswith("_") or not NUMPY.has_attribute(name) or "graph" not in self.__dict__:
            raise AttributeError(f"'Tracer' object has no attribute '{name}'")
        return NUMPY.attribute(self, name)
