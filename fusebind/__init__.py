"""fusebind: capability-gated fusion of tensor programs.

The public API (`import fusebind as fb`): `fb.jit`, `fb.compile`,
`fb.constant`, the array functions (`fb.exp`, `fb.softmax`, ...) and the
user-facing errors. They are imported lazily (PEP 562), so `import
fusebind` stays cheap for the packages that only need `fusebind.runtime`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API = (
    "ArgumentError", "CompiledFunction", "ConstantArray", "EntryError", "FusebindAxisError", "FusebindError",
    "FusebindIndexError", "FusebindOverflowError", "FusebindValueError", "IntegerPowerError",
    "NumpyMismatchError", "JitFunction", "TraceError", "UnsupportedOperation", "compile",
    "constant", "erf", "exp", "gelu", "jit", "layer_norm", "log", "matmul", "maximum", "minimum", "relu", "sigmoid", "softmax",
    "sqrt", "tanh", "where",
)

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module("fusebind.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fusebind' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
