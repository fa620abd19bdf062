"""The Python operators and ndarray methods of a traced array, as numpy defines them.

Owns `ArrayMethods`, the base of `trace.Tracer`: every operator (`+`, `@`,
`**`, `&`, the comparisons, the in-place forms, unary `-`, `~`, `abs`) as
numpy's ufunc on the operands (numpy_ufuncs.binop; Python's own answer when
both are Python scalars), the ndarray methods as the numpy functions of the
same name (numpy_dispatch), `len()`, iteration over axis 0 and basic
indexing (static shapes, as JAX does), and the conversions that would need
values a trace does not have (`bool()`, `int()`, `float()`, `np.asarray`),
which raise `fb.UnsupportedOperation` saying what to use instead.

Must not: build IR itself, or promote dtypes by its own rules (numpy_ufuncs
and numpy_dispatch do both, numpy's way).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.api.errors import UnsupportedOperation


class ArrayMethods:
    """numpy's array interface for `Tracer` (which holds `graph`, `value`, `shape`, `dtype`)."""

    graph: Any
    value: Any
    shape: tuple[int, ...]
    dtype: np.dtype

    # ------------------------------------------------------------ values a trace does not have
    # Each of these needs the array's values; they raise numpy_dispatch.no_value's UnsupportedOperation.
    def __bool__(self) -> bool:
        from fusebind.api.numpy_dispatch import no_value

        raise no_value(self, "bool")

    def __index__(self) -> int:
        from fusebind.api.numpy_dispatch import no_value

        raise no_value(self, "operator.index")

    def __int__(self) -> int:
        from fusebind.api.numpy_dispatch import no_value

        raise no_value(self, "int")

    def __float__(self) -> float:
        from fusebind.api.numpy_dispatch import no_value

        raise no_value(self, "float")

    def __complex__(self) -> complex:
        from fusebind.api.numpy_dispatch import no_value

        raise no_value(self, "complex")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        from fusebind.api.numpy_dispatch import no_value

        raise no_value(self, "array")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        from fusebind.api.numpy_dispatch import no_value

        raise no_value(self, "array")

    def __dlpack_device__(self) -> Any:
        from fusebind.api.numpy_dispatch import no_value

        raise no_value(self, "array")

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
        from fusebind.api.numpy_shapes import getitem

        return getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': traced arrays are immutable (x[...] = v "
                                   "writes in place); build the new array with fb.where(mask, v, x)")

    # ------------------------------------------------------------ operators
    # numpy's ufuncs (numpy_ufuncs.binop): Python's answer when both operands are Python scalars.
    def _op(self, name: str, a: Any, b: Any) -> Any:
        from fusebind.api.numpy_ufuncs import binop

        return binop(getattr(np, name), a, b)

    def _iop(self, name: str, o: Any) -> Any:
        from fusebind.api.numpy_ufuncs import inplace

        return inplace(getattr(np, name), self, o)

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

    def __neg__(self) -> Any:
        from fusebind.api.numpy_ufuncs import call
        from fusebind.api.trace import weak_bool_as_int, weak_kind
        from fusebind.dialect.prim import NegOp

        kind = weak_kind(self)
        if kind is bool:
            return -weak_bool_as_int(self)  # -True is -1 in Python
        if kind is not None:
            return self.graph.add(NegOp(self.value))  # a Python scalar stays one (Graph.add)
        return call(np.negative, (self,), {}, "unary minus")

    def __pos__(self) -> Any:
        from fusebind.api.numpy_ufuncs import call
        from fusebind.api.trace import weak_kind

        if weak_kind(self) is not None:
            return self
        return call(np.positive, (self,), {}, "unary plus")

    def __abs__(self) -> Any:
        from fusebind.api.numpy_ufuncs import call
        from fusebind.api.trace import weak_bool_as_int, weak_kind
        from fusebind.dialect.prim import AbsOp

        kind = weak_kind(self)
        if kind is bool:
            return abs(weak_bool_as_int(self))
        if kind is not None:
            return self.graph.add(AbsOp(self.value))
        return call(np.absolute, (self,), {}, "abs")

    def __round__(self, ndigits: Any = None) -> Any:
        raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': round() of an array: numpy.ndarray "
                                   "doesn't define __round__ (numpy raises TypeError too); fusebind has no rounding "
                                   "op, so round outside the jitted function")

    def __invert__(self) -> Any:
        from fusebind.api.numpy_ufuncs import call
        from fusebind.api.trace import binary, weak_kind

        if weak_kind(self) is not None:
            return binary("sub", -1, self)  # Python: ~n == -1 - n (~True == -2)
        return call(np.invert, (self,), {}, "~")

    # ------------------------------------------------------------ methods
    # Each is numpy.<name>(x, ...) (numpy_dispatch.call): the same probe, axis checks and dtypes.
    def sum(self, *args: Any, **kwargs: Any) -> Any:
        from fusebind.api.numpy_dispatch import call

        return call(np.sum, (self, *args), kwargs)

    def max(self, *args: Any, **kwargs: Any) -> Any:
        from fusebind.api.numpy_dispatch import call

        return call(np.max, (self, *args), kwargs)

    def min(self, *args: Any, **kwargs: Any) -> Any:
        from fusebind.api.numpy_dispatch import call

        return call(np.min, (self, *args), kwargs)

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        from fusebind.api.numpy_dispatch import call

        return call(np.mean, (self, *args), kwargs)

    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> Any:
        from fusebind.api.numpy_dispatch import call

        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return call(np.reshape, (self, tuple(dims)), {"order": order, "copy": copy})

    def transpose(self, *axes: Any) -> Any:
        from fusebind.api.numpy_dispatch import call

        perm = axes[0] if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))) else axes
        return call(np.transpose, (self, tuple(perm) if perm else None), {})

    def flatten(self, order: str = "C") -> Any:
        from fusebind.api.numpy_dispatch import call

        return call(np.ravel, (self, order), {})

    def copy(self, order: str = "K") -> "Tracer":
        return self

    @property
    def T(self) -> Any:
        return self.transpose()

    @property
    def mT(self) -> Any:
        from fusebind.api.numpy_dispatch import call

        return call(np.matrix_transpose, (self,), {})

    @property
    def real(self) -> "Tracer":
        return self

    @property
    def imag(self) -> Any:
        from fusebind.api.numpy_dispatch import call

        return call(np.imag, (self,), {})

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __getattr__(self, name: str) -> Any:
        """The other ndarray methods: numpy.<name>(x, ...) where that is the same, else a clear refusal."""
        from fusebind.api.numpy_dispatch import attribute, has_attribute

        if name.startswith("_") or not has_attribute(name) or "graph" not in self.__dict__:
            raise AttributeError(f"'Tracer' object has no attribute '{name}'")
        return attribute(self, name)
