"""fusebind's Python API: `jit`, `compile` and the array functions.

Owns nothing but the public names; see trace.py (tracing), functions.py
(exp, softmax, ...), jit.py (the callable), capture.py (scalar arguments,
captured arrays, `constant`) and compile.py (MLIR input).
"""

from fusebind.api.capture import ConstantArray, constant
from fusebind.api.compile import CompiledFunction, EntryError, compile
from fusebind.api.errors import (
    ArgumentError, FusebindAxisError, FusebindError, FusebindIndexError, FusebindOverflowError, FusebindValueError,
    IntegerPowerError, NumpyMismatchError, TraceError, UnsupportedOperation,
)
from fusebind.api.functions import (
    erf, exp, gelu, layer_norm, log, matmul, maximum, minimum, relu, sigmoid, softmax, sqrt, tanh, where,
)
from fusebind.api.jit import JitFunction, jit

__all__ = [
    "ArgumentError", "CompiledFunction", "ConstantArray", "EntryError", "FusebindAxisError", "FusebindError",
    "FusebindIndexError", "FusebindOverflowError", "FusebindValueError", "IntegerPowerError",
    "NumpyMismatchError", "JitFunction", "TraceError", "UnsupportedOperation", "compile",
    "constant", "erf", "exp", "gelu", "jit", "layer_norm", "log", "matmul", "maximum", "minimum", "relu", "sigmoid", "softmax",
    "sqrt", "tanh", "where",
]
