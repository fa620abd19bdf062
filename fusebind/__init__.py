"""fusebind: capability-gated fusion of tensor programs.

The public API (`import fusebind as fb`): `fb.jit`, `fb.compile`,
`fb.constant`, `fb.register_op`, the array functions (`fb.exp`,
`fb.softmax`, ...) and the user-facing errors. They are imported lazily
(PEP 562), so `import fusebind` stays cheap for the packages that only need
`fusebind.runtime`. The array functions are generated from the op registry
(fusebind.api.functions), so they are not listed here: any public name
that is not one of `_API` is looked up in `fusebind.api.__all__`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: the API's names other than the array functions
_API = (
    "ArraySpec", "ArgumentError", "CompiledFunction", "ConstantArray", "EntryError", "FusebindAxisError", "FusebindError",
    "FusebindIndexError", "FusebindOverflowError", "FusebindValueError", "IndexOutOfBounds", "IntegerPowerError",
    "NumpyMismatchError", "JitFunction", "OpRegistrationError", "TraceError", "UnsupportedOperation", "compile",
    "constant", "jit", "register_op", "VmapFunction", "vmap",
    "nn",  # fb.nn.conv / max_pool / ...: convolution and pooling (fusebind/api/nn.py)
)


def __getattr__(name: str) -> Any:
    if name.startswith("_") and name not in ("__all__",):
        raise AttributeError(f"module 'fusebind' has no attribute {name!r}")  # (probes of private names stay cheap)
    if name == "onnx":  # fb.onnx.load(...): the ONNX door, a subpackage (its own room above the api)
        return importlib.import_module("fusebind.onnx")
    api = importlib.import_module("fusebind.api")  # only here: the one lazy import of the root (PEP 562)
    if name == "__all__":
        return ["__version__", *api.__all__]
    if name in _API or name in api.__all__:
        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fusebind' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))
