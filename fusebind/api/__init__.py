"""fusebind's Python API: `jit`, `compile` and the array functions.

Owns nothing but the public names; see trace.py (tracing), functions.py
(exp, softmax, ...), jit.py (the callable) and compile.py (MLIR input).
"""

from fusebind.api.compile import CompiledFunction, compile
from fusebind.api.errors import (
    ArgumentError, FusebindAxisError, FusebindError, FusebindValueError, TraceError, UnsupportedOperation,
)
from fusebind.api.functions import (
    erf, exp, gelu, layer_norm, log, matmul, maximum, minimum, relu, sigmoid, softmax, sqrt, tanh, where,
)
from fusebind.api.jit import JitFunction, jit

__all__ = [
    "ArgumentError", "CompiledFunction", "FusebindAxisError", "FusebindError", "FusebindValueError", "JitFunction", "TraceError", "UnsupportedOperation", "compile", "erf",
    "exp", "gelu", "jit", "layer_norm", "log", "matmul", "maximum", "minimum", "relu", "sigmoid", "softmax",
    "sqrt", "tanh", "where",
]
