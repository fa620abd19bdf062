"""fusebind.runtime: the one binding table and everything that runs kernels.

Public names are imported lazily (PEP 562), so `import fusebind.runtime`
costs nothing until a name is used: a cache hit in a new process must not
pay for xDSL or llvmlite it does not need.
"""

from __future__ import annotations

import importlib
from typing import Any

from fusebind.compiler import lazy_exports

_EXPORTS: dict[str, str] = {
    # bindings.py
    "BindingKey": "bindings",
    "BindingRow": "bindings",
    "BindingTable": "bindings",
    "BindingTableBuilder": "bindings",
    "BindingError": "bindings",
    "DuplicateKernelError": "bindings",
    "UnknownBackendError": "bindings",
    "KNOWN_BACKENDS": "bindings",
    "global_bindings": "bindings",
    "extend_global_bindings": "bindings",
    "bindings_generation": "bindings",
    "UNKNOWN_COST": "bindings",
    "global_recipes": "bindings",
    # session.py
    "Session": "session",
    "default_session": "session",
    "current_session": "session",
    "use_session": "session",
    # dtypes.py
    "DType": "dtypes",
    "KernelSignature": "dtypes",
    "memref_descriptor": "dtypes",
    "descriptor_for": "dtypes",
    # kernel.py
    "Kernel": "kernel",
    "KernelError": "kernel",
    # loader.py
    "load_object": "loader",
    "LoadedCode": "loader",
    "ObjectLoadError": "loader",
    # fused_kernels.py
    "RUNTIME_FUSED_BASE": "fused_kernels",
    "FusedOpId": "fused_kernels",
    "RuntimeKernelBinding": "fused_kernels",
    "FusedLookupMiss": "fused_kernels",
    "KernelNotBound": "fused_kernels",
    "AmbiguousKernel": "fused_kernels",
    "InvalidFusedOpId": "fused_kernels",
    "adopt_runtime_fused": "fused_kernels",
    "register_runtime_kernel": "fused_kernels",
    "fused_kernel_available": "fused_kernels",
    "fused_kernel_available_in": "fused_kernels",
    "lookup_runtime_kernel": "fused_kernels",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_exports.attribute(globals(), _EXPORTS, name,
                                  lambda module: importlib.import_module(f"fusebind.runtime.{module}"))


def __dir__() -> list[str]:
    return lazy_exports.names(globals(), _EXPORTS)
