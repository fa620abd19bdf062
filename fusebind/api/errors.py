"""The errors the Python API raises at the user's call site.

Owns `TraceError` (the traced program is wrong: shapes that do not
broadcast, bad axes) and re-exports `ArgumentError` (an argument has the
wrong dtype, rank or shape) and `UnsupportedOperation` (an op, ufunc or
dtype fusebind does not support) so users catch them from one place.
"""

from __future__ import annotations

from fusebind.runtime.executor import ArgumentError
from fusebind.runtime.plan import UnsupportedOperation


class TraceError(ValueError):
    """The traced function is not a valid array program (e.g. shapes that do not broadcast)."""


__all__ = ["ArgumentError", "TraceError", "UnsupportedOperation"]
