"""Lazy public names of a package (PEP 562): the one resolver behind `fusebind.compiler` and `fusebind.runtime`.

A package `__init__` lists its public names as `_EXPORTS = {name: submodule}` and defines

    def __getattr__(name):
        return lazy_exports.attribute(globals(), _EXPORTS, name,
                                      lambda module: importlib.import_module(f"fusebind.compiler.{module}"))

The import itself stays in the package's own `__getattr__`, naming its own package literally, as the
import rule requires (test/lowering/test_import_direction.py: no import by name anywhere else); this
module only resolves a name, caches it in the package and refuses unknown ones.

Why here: the compiler is the lowest room whose package import loads nothing heavy (no xDSL), so
`fusebind.runtime` can use this and still import in a few milliseconds.
Must not: import anything of fusebind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


def attribute(namespace: dict[str, Any], exports: Mapping[str, str], name: str,
              load: Callable[[str], ModuleType]) -> Any:
    """The public `name` of the package whose globals are `namespace`: loaded from its submodule
    `exports[name]` by `load` on first use, then kept in `namespace` (so `__getattr__` runs once)."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = namespace[name] = getattr(load(module), name)
    return value


def names(namespace: dict[str, Any], exports: Mapping[str, str]) -> list[str]:
    """`dir()` of the package: what it holds and what it can load."""
    return sorted(set(namespace) | set(exports))
