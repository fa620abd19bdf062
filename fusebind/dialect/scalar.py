"""The scalar semantics protocol of elementwise `prim` ops.

`ScalarBuilder` is how an elementwise op states what it computes on one
element: lowering implements it by emitting `arith`/`math` ops into a
`linalg.generic` body, and `NumpyScalarBuilder` (here) implements it on numpy
arrays so tests can check that every op's `scalar_body` agrees with its
`reference`. Values are opaque handles; every method returns a new one.

Semantics every implementation must follow (they are numpy's):
- `div` on floats is IEEE division; on integers it is numpy floor division
  (`//`), with `x // 0 == 0`.
- `floordiv` / `rem` are np.floor_divide / np.remainder: the quotient rounds
  toward -inf, the remainder takes the divisor's sign. Integers: x // 0 == 0,
  x % 0 == 0, MIN // -1 == MIN, MIN % -1 == 0. Floats follow numpy's
  `npy_divmod` (numpy/_core/src/npymath/npy_math_internal.h.src) op by op:
      mod = fmod(a, b)
      if b == 0:  floordiv = a / b, rem = mod (NaN)
      div = (a - mod) / b
      if mod != 0: if (b < 0) != (mod < 0): mod += b; div -= 1
      else:        mod = copysign(0, b)
      if div != 0: q = floor(div); if div - q > 0.5: q += 1
      else:        q = copysign(0, a / b)
  in the element type, so results are bit-identical to numpy's.
- `maximum`/`minimum` propagate NaN (np.maximum / np.minimum).
- `compare(pred, a, b)`: pred in `eq ne lt le gt ge`; with a NaN operand every
  predicate is false except `ne`, which is true.
- `cast(x, to)`: numpy `astype`: float→int truncates toward zero; NaN, ±inf
  and out-of-range values give INT_MIN (numpy's x86-64 answer), anything→i1
  is `x != 0`, i1→number gives 0/1.
- `fmod` is np.fmod (C's remainder, the dividend's sign; integers: x fmod 0
  == MIN fmod -1 == 0). `bitwise_and/or/xor`, `invert` on integers and i1;
  `left_shift` / `right_shift` on integers: numpy's npy_lshift / npy_rshift
  (a count of the width or more, or negative, gives 0, or -1 for `>>` of a
  negative value).
- `rsqrt(x) = 1/sqrt(x)`, `pow` follows np.power; on integers the exact power
  modulo 2^width for an exponent >= 0 (the callers never pass a negative one:
  see `prim_division.PowOp.kernel_computable`); `max_exponent`, when the
  caller knows it (a constant exponent), bounds the exponent's bits.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from fusebind.dialect.errors import FusebindValueError
from fusebind.dialect.types import numpy_dtype, name_of_numpy_dtype

PREDICATES: tuple[str, ...] = ("eq", "ne", "lt", "le", "gt", "ge")


class ScalarBuilder(Protocol):
    """Builds scalar computations; see the module docstring for the semantics."""

    def constant(self, value: float | int | bool, elem: str) -> Any: ...
    def add(self, a: Any, b: Any) -> Any: ...
    def sub(self, a: Any, b: Any) -> Any: ...
    def mul(self, a: Any, b: Any) -> Any: ...
    def div(self, a: Any, b: Any) -> Any: ...
    def floordiv(self, a: Any, b: Any) -> Any: ...
    def rem(self, a: Any, b: Any) -> Any: ...
    def fmod(self, a: Any, b: Any) -> Any: ...
    def bitwise_and(self, a: Any, b: Any) -> Any: ...
    def bitwise_or(self, a: Any, b: Any) -> Any: ...
    def bitwise_xor(self, a: Any, b: Any) -> Any: ...
    def invert(self, a: Any) -> Any: ...
    def left_shift(self, a: Any, s: Any) -> Any: ...
    def right_shift(self, a: Any, s: Any) -> Any: ...
    def neg(self, a: Any) -> Any: ...
    def abs(self, a: Any) -> Any: ...
    def maximum(self, a: Any, b: Any) -> Any: ...
    def minimum(self, a: Any, b: Any) -> Any: ...
    def math(self, fn: str, *args: Any) -> Any: ...
    def exp(self, a: Any) -> Any: ...
    def log(self, a: Any) -> Any: ...
    def sqrt(self, a: Any) -> Any: ...
    def rsqrt(self, a: Any) -> Any: ...
    def tanh(self, a: Any) -> Any: ...
    def erf(self, a: Any) -> Any: ...
    def pow(self, a: Any, b: Any, max_exponent: int | None = None) -> Any: ...
    def compare(self, pred: str, a: Any, b: Any) -> Any: ...
    def select(self, c: Any, a: Any, b: Any) -> Any: ...
    def cast(self, x: Any, to_elem: str) -> Any: ...
    def is_nan(self, x: Any) -> Any: ...
    def elem(self, x: Any) -> str: ...


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf_reference(x: np.ndarray) -> np.ndarray:
    """Elementwise erf with math.erf (no scipy), in the dtype of `x`."""
    x = np.asarray(x)
    if x.size == 0:
        return x.copy()
    return _erf(x).astype(x.dtype)


def floor_divide_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy `//` on integers, x // 0 == 0, without the divide-by-zero warning."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.floor_divide(a, b)
    return np.where(np.asarray(b) == 0, np.zeros((), out.dtype), out)


def compare_reference(pred: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    fns = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}
    if pred not in fns:
        raise FusebindValueError(f"unknown predicate {pred!r}; expected one of {', '.join(PREDICATES)}")
    return fns[pred](a, b)


class NumpyScalarBuilder:
    """A `ScalarBuilder` over numpy arrays (values are arrays of their element dtype).

    It evaluates a `scalar_body` on whole arrays, so tests can compare it with
    the op's `reference`.
    """

    def constant(self, value: float | int | bool, elem: str) -> np.ndarray:
        dt = numpy_dtype(elem)
        if dt.kind in "iu" and not isinstance(value, (bool, np.bool_)):  # wraps, as the kernel's literal: -1 is
            bits = dt.itemsize * 8                                        # ui8 255 (numpy 2 would raise)
            v = int(value) & ((1 << bits) - 1)
            return np.asarray(v - (1 << bits) if dt.kind == "i" and v >> (bits - 1) else v, dtype=dt)
        return np.asarray(value, dtype=dt)

    def _same(self, out: Any, like: np.ndarray) -> np.ndarray:
        return np.asarray(out).astype(np.asarray(like).dtype, copy=False)

    def add(self, a: Any, b: Any) -> np.ndarray:
        return self._same(np.add(a, b), a)

    def sub(self, a: Any, b: Any) -> np.ndarray:
        return self._same(np.subtract(a, b), a)

    def mul(self, a: Any, b: Any) -> np.ndarray:
        return self._same(np.multiply(a, b), a)

    def div(self, a: Any, b: Any) -> np.ndarray:
        if np.asarray(a).dtype.kind in "iu":
            return self._same(floor_divide_reference(a, b), a)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._same(np.divide(a, b), a)

    def floordiv(self, a: Any, b: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._same(np.floor_divide(a, b), a)

    def rem(self, a: Any, b: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._same(np.remainder(a, b), a)

    def fmod(self, a: Any, b: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._same(np.fmod(a, b), a)

    def bitwise_and(self, a: Any, b: Any) -> np.ndarray:
        return self._same(np.bitwise_and(a, b), a)

    def bitwise_or(self, a: Any, b: Any) -> np.ndarray:
        return self._same(np.bitwise_or(a, b), a)

    def bitwise_xor(self, a: Any, b: Any) -> np.ndarray:
        return self._same(np.bitwise_xor(a, b), a)

    def invert(self, a: Any) -> np.ndarray:
        return np.invert(a)

    def left_shift(self, a: Any, s: Any) -> np.ndarray:
        return self._same(np.left_shift(a, s), a)

    def right_shift(self, a: Any, s: Any) -> np.ndarray:
        return self._same(np.right_shift(a, s), a)

    def neg(self, a: Any) -> np.ndarray:
        return np.negative(a)

    def abs(self, a: Any) -> np.ndarray:
        return np.abs(a)

    def maximum(self, a: Any, b: Any) -> np.ndarray:
        return self._same(np.maximum(a, b), a)

    def minimum(self, a: Any, b: Any) -> np.ndarray:
        return self._same(np.minimum(a, b), a)

    def math(self, fn: str, *args: Any) -> np.ndarray:
        """numpy's ufunc `fn` in the first operand's dtype."""
        with np.errstate(all="ignore"):
            return np.asarray(getattr(np, fn)(*args)).astype(np.asarray(args[0]).dtype)

    def exp(self, a: Any) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.exp(a)

    def log(self, a: Any) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(a)

    def sqrt(self, a: Any) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.sqrt(a)

    def rsqrt(self, a: Any) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._same(np.asarray(1, dtype=np.asarray(a).dtype) / np.sqrt(a), a)

    def tanh(self, a: Any) -> np.ndarray:
        return np.tanh(a)

    def erf(self, a: Any) -> np.ndarray:
        return erf_reference(a)

    def pow(self, a: Any, b: Any, max_exponent: int | None = None) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._same(np.power(a, b), a)

    def compare(self, pred: str, a: Any, b: Any) -> np.ndarray:
        return compare_reference(pred, a, b)

    def select(self, c: Any, a: Any, b: Any) -> np.ndarray:
        return self._same(np.where(c, a, b), a)

    def cast(self, x: Any, to_elem: str) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.asarray(x).astype(numpy_dtype(to_elem))

    def is_nan(self, x: Any) -> np.ndarray:
        return np.isnan(x)

    def elem(self, x: Any) -> str:
        return name_of_numpy_dtype(np.asarray(x).dtype)
