"""The global binding table: the default session's table, as the seed's API.

`global_bindings()` / `extend_global_bindings(fn)` / `bindings_generation()`
keep the seed's exact semantics: a copy-on-write snapshot read with no lock,
writers serialised by one lock, the generation bumped by every successful
swap and never otherwise, a nested writer refused; `global_recipes()` is the
registry runtime ids are allocated from. The state behind them is
the default session's (`session.default_session()`); a program that wants
a second, independent table makes a `Session` and calls its methods.

The table's value types (`BindingKey`, `BindingRow`, `BindingTable`,
`BindingTableBuilder`, the errors, `parse_backend`) live in table.py and are
re-exported here, where callers have always imported them from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, TypeVar

from fusebind.compiler.cost import UNKNOWN_COST
from fusebind.runtime.session import Session, default_session
from fusebind.runtime.table import (
    KNOWN_BACKENDS,
    BindingError,
    BindingKey,
    BindingRow,
    BindingTable,
    BindingTableBuilder,
    DTypes,
    DuplicateKernelError,
    Slot,
    UnknownBackendError,
    make_row,
    parse_backend,
)

__all__ = [
    "KNOWN_BACKENDS", "UNKNOWN_COST", "BindingError", "BindingKey", "BindingRow", "BindingTable",
    "BindingTableBuilder", "DTypes", "DuplicateKernelError", "Session", "Slot", "UnknownBackendError",
    "bindings_generation", "default_session", "extend_global_bindings", "global_bindings", "global_recipes",
    "make_row",
    "parse_backend",
]

if TYPE_CHECKING:
    from fusebind.compiler.recipes import RecipeRegistry

T = TypeVar("T")

_DEFAULT: Session = default_session()


def global_bindings() -> BindingTable:
    """The current global snapshot. Takes no lock: one attribute read."""
    return _DEFAULT.table


def bindings_generation() -> int:
    """Bumped by every successful swap of the global table, never otherwise."""
    return _DEFAULT.table.generation


def extend_global_bindings(fn: Callable[[BindingTableBuilder], T]) -> T:
    """Copy the global table, apply `fn` to the copy, validate, swap it in.

    Writers are serialised by one lock. If `fn` (or validation) raises, the old
    table stays and the generation does not move. If `fn` changes nothing,
    nothing is swapped. Returns what `fn` returned. `fn` must not call
    `extend_global_bindings` itself (it has the builder; nesting would
    deadlock, so it is refused).
    """
    return _DEFAULT.extend_bindings(fn)


def global_recipes() -> RecipeRegistry:
    """The global recipe registry: the default session's (created on first use)."""
    return _DEFAULT.recipes
