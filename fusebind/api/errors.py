"""The errors the Python API raises at the user's call site.

Owns `TraceError` (the traced program is wrong: shapes that do not
broadcast, bad axes) and re-exports the user-facing rest so users catch
them from one place: `FusebindError` (the base of every fusebind error),
`ArgumentError` (an argument has the wrong dtype, rank or shape),
`UnsupportedOperation` (an op, numpy function or dtype fusebind does not
support), `FusebindAxisError` and `FusebindValueError`.
"""

from __future__ import annotations

from fusebind.dialect.errors import FusebindAxisError, FusebindError, FusebindValueError, UnsupportedOperation
from fusebind.runtime.executor import ArgumentError


class TraceError(FusebindError, ValueError):
    """The traced function is not a valid array program (e.g. shapes that do not broadcast)."""


__all__ = ["ArgumentError", "FusebindAxisError", "FusebindError", "FusebindValueError", "TraceError",
           "UnsupportedOperation"]
