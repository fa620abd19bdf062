"""fusebind's ONNX door: an importer from `onnx.ModelProto` to prim IR, and the standard
ONNX backend module (`fusebind.onnx.backend`).

This room sits above `fusebind.api` (a model becomes a function traced by `fb.jit`) and
below the top-level modules (the CLI's `fusebind run model.onnx` and `fusebind import`).

`fusebind.onnx.load(path_or_proto)` (frontdoor.py) gives a model as a callable, like
`fb.compile`'s; `UnsupportedModel` is what a model fusebind does not run raises. Both are
imported lazily (PEP 562), so `import fusebind.onnx` stays cheap for the backend runner.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module of this package that defines it
_LAZY = {"load": "frontdoor", "OnnxFunction": "frontdoor", "UnsupportedModel": "registry",
         "InvalidModel": "trust", "ExternalDataRefused": "trust", "ModelTooLarge": "trust"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fusebind.onnx' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"fusebind.onnx.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["ExternalDataRefused", "InvalidModel", "ModelTooLarge", "OnnxFunction", "UnsupportedModel", "load"]
