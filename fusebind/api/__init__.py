"""fusebind's Python API: `jit`, `compile`, `register_op` and the array functions.

Owns nothing but the public names; see trace.py (tracing), functions.py
(exp, softmax, ...: the op functions are generated from the op registry,
so their names here are too), ops.py (`register_op`), jit.py (the callable), vmap.py (`vmap`),
capture.py (scalar arguments, captured arrays, `constant`), compile.py
(MLIR input) and travel.py (pickling; `ArraySpec`, the shapes `precompile` takes).
"""

from fusebind.api import functions as _functions
from fusebind.api import nn  # fb.nn: convolution and pooling
from fusebind.api.capture import ConstantArray, constant
from fusebind.api.compile import CompiledFunction, EntryError, compile
from fusebind.api.errors import (
    ArgumentError, FusebindAxisError, FusebindError, FusebindIndexError, FusebindOverflowError, FusebindValueError,
    IntegerPowerError, NumpyMismatchError, TraceError, UnsupportedOperation,
)
from fusebind.api.jit import JitFunction, jit
from fusebind.api.travel import ArraySpec
from fusebind.dialect.errors import IndexOutOfBounds
from fusebind.api.ops import OpRegistrationError, register_op
from fusebind.api.vmap import VmapFunction, vmap

#: the names that are not array functions (those come from functions.__all__)
_NAMED = [
    "ArraySpec", "ArgumentError", "CompiledFunction", "ConstantArray", "EntryError", "FusebindAxisError", "FusebindError",
    "FusebindIndexError", "FusebindOverflowError", "FusebindValueError", "IndexOutOfBounds", "IntegerPowerError",
    "NumpyMismatchError", "JitFunction", "OpRegistrationError", "TraceError", "UnsupportedOperation", "compile",
    "constant", "jit", "register_op", "VmapFunction", "vmap",
]
globals().update({name: getattr(_functions, name) for name in _functions.__all__})

__all__ = sorted([*_NAMED, *_functions.__all__])
