"""The errors the Python API raises at the user's call site.

Owns `TraceError` (the traced program is wrong: shapes that do not
broadcast, bad axes) and re-exports the user-facing rest so users catch
them from one place: `FusebindError` (the base of every fusebind error),
`ArgumentError` (an argument has the wrong dtype, rank or shape),
`UnsupportedOperation` (an op, numpy function or dtype fusebind does not
support), the numpy-compatible `FusebindAxisError`, `FusebindValueError`,
`FusebindIndexError`, `FusebindOverflowError` and `IntegerPowerError`, and
`NumpyMismatchError` (a fusebind bug caught before it became a wrong answer).
"""

from __future__ import annotations

from fusebind.dialect.errors import (
    ArgumentError, EntryError, FusebindAxisError, FusebindError, FusebindIndexError, FusebindOverflowError,
    FusebindValueError, NumpyMismatchError, UnsupportedOperation,
)
from fusebind.dialect.prim_division import IntegerPowerError


class TraceError(FusebindError, ValueError):
    """The traced function is not a valid array program (e.g. shapes that do not broadcast)."""


__all__ = ["ArgumentError", "EntryError", "FusebindAxisError", "FusebindError", "FusebindIndexError", "FusebindOverflowError",
           "FusebindValueError", "IntegerPowerError", "NumpyMismatchError", "TraceError", "UnsupportedOperation"]
