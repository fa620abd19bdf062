"""lowering: from a `fused.region` to a cost and native object code.

prim ops -> `linalg` on tensors (emit.py) -> upstream MLIR passes in process
(pipeline.py) -> LLVM IR -> llvmlite O3 for the host (codegen.py) -> object
code, cached on disk (cache.py). Importing this package imports neither
`mlir` nor `llvmlite`; they load on first use.
"""

from fusebind.lowering.abi import DType, KernelSignature
from fusebind.lowering.build import BuiltObject, build_object, compile_text
from fusebind.lowering.cache import ObjectCache, cache_key
from fusebind.lowering.decompose import Decomposition, InlineResult, decompose_region, inline_region, kernel_signature
from fusebind.lowering.emit import EmittedKernel, TensorSpec, emit_linalg
from fusebind.lowering.errors import STAGES, LoweringError

__all__ = [
    "BuiltObject", "DType", "Decomposition", "EmittedKernel", "InlineResult", "KernelSignature", "LoweringError", "ObjectCache", "STAGES",
    "TensorSpec", "build_object", "cache_key", "compile_text", "decompose_region", "emit_linalg", "inline_region",
    "kernel_signature",
]
