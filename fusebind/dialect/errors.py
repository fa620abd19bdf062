"""The error types of the IR boundary.

Everything that goes wrong while reading, verifying or interpreting IR text
surfaces as a `FusebindIRError` subclass carrying a message and, where known,
a 1-based line and column.
"""

from __future__ import annotations


class FusebindIRError(Exception):
    """Base of IR errors: `message`, and `line`/`column` (1-based) when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        return f"{self.line}:{self.column or 1}: {self.message}"


class IRParseError(FusebindIRError):
    """The text is not valid IR syntax (or names an unknown op, type or attribute)."""


class IRVerifyError(FusebindIRError):
    """The IR parsed but an op's verifier rejected it."""


class InterpretError(FusebindIRError, ValueError):
    """The interpreter cannot run: bad arguments, unknown entry, unsupported op."""
