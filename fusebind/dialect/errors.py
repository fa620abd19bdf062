"""The error hierarchy: one common base, and the errors of the IR boundary.

Every error a user can cause derives from `FusebindError`, and also from
the builtin exception numpy (or Python) would raise for the same mistake,
so existing `except TypeError:` / `except ValueError:` clauses keep working.
This module lives in the lowest layer so that every layer can use the base;
it imports nothing but numpy.

Everything that goes wrong while reading, verifying or interpreting IR text
surfaces as a `FusebindIRError` subclass carrying a message and, where known,
a 1-based line and column.
"""

from __future__ import annotations

import numpy as np


class FusebindError(Exception):
    """The common base of every fusebind error (`fb.FusebindError`)."""


class UnsupportedOperation(FusebindError, TypeError):
    """An op, numpy function, dtype or call form fusebind does not support.

    The message names what was asked and what to use instead."""


class ArgumentError(FusebindError, TypeError, ValueError):
    """A call argument has the wrong dtype, rank or shape, or the wrong count."""


class FusebindValueError(FusebindError, ValueError):
    """A value numpy would reject with ValueError (e.g. a reduction over an empty axis)."""


class FusebindTypeError(FusebindError, TypeError):
    """An argument of the wrong kind given to a fusebind API (an option, a constructor field)."""


class FusebindInternalError(FusebindError, RuntimeError):
    """A fusebind bug caught by an internal check; the message says what broke. Please report it."""


class EntryError(FusebindError, KeyError):
    """A module has no function of the requested name, or several functions and
    no `entry` to choose one. A KeyError, so existing `except KeyError` clauses
    keep working; its message names the functions the module defines."""

    def __str__(self) -> str:  # KeyError's str() would show the message quoted, as a repr
        return str(self.args[0]) if self.args else ""


class FusebindAxisError(FusebindError, np.exceptions.AxisError):
    """A bad `axis` argument (out of range, or repeated), as numpy's AxisError."""

    def __init__(self, message: str) -> None:
        # AxisError(msg) with one argument keeps the message as given.
        np.exceptions.AxisError.__init__(self, message)


class FusebindIndexError(FusebindError, IndexError):
    """An index out of range (numpy raises IndexError)."""


class IndexOutOfBounds(FusebindIndexError):
    """An index outside its axis (numpy raises IndexError: "index 5 is out of bounds for axis 0 with
    size 3"); raised at trace time for a constant index. A subclass of FusebindIndexError, so
    `except fb.FusebindIndexError` and `except IndexError` both catch it."""


class FusebindOverflowError(FusebindError, OverflowError):
    """A Python int does not fit the dtype numpy would convert it to (numpy raises OverflowError)."""


class NumpyMismatchError(FusebindError, RuntimeError):
    """fusebind's traced answer would differ from numpy's in dtype or shape: a
    fusebind bug, raised instead of a wrong answer."""


class FusebindIRError(FusebindError):
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


class OpRegistrationError(FusebindValueError):
    """An op class cannot be registered: its name is taken by an earlier registration (the message
    names that registration's source), it uses a prefix fusebind owns (`prim.`), or it lacks a fact
    the registry needs. The registry is append-only, so nothing is replaced."""


class UnknownOpError(FusebindError, KeyError):
    """No registered op has this KIND or name; the message names close matches. A KeyError, so
    `except KeyError` (a table lookup's failure) keeps working."""

    def __str__(self) -> str:  # KeyError's str() would show the message quoted, as a repr
        return str(self.args[0]) if self.args else ""


class ShapeInferenceError(FusebindValueError):
    """An op's shape rule (`infer_shape`) refuses its operand shapes or properties; the message
    names the op and why. Verifiers re-raise it as a verification error, shape specialization as
    its own error naming the call's arguments."""
