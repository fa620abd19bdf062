"""Element dtypes of the binding table and the kernel ABI (runtime view).

`DType`, `KernelSignature`, `parse_dtypes` and `memref_descriptor` are defined
in `fusebind.lowering.abi` (lowering produces kernels of that ABI, and imports
flow runtime -> lowering) and re-exported here under the same names. This
module adds `descriptor_for`: a memref descriptor viewing a numpy array.
It must not import mlir or llvmlite.
"""

from __future__ import annotations

import ctypes

import numpy as np

from fusebind.dialect.errors import FusebindValueError
from fusebind.lowering.abi import DType, KernelSignature, Operand, memref_descriptor, parse_dtypes

__all__ = ["DType", "KernelSignature", "Operand", "descriptor_for", "memref_descriptor", "parse_dtypes"]


def descriptor_for(array: np.ndarray) -> ctypes.Structure:
    """A memref descriptor viewing `array` (strides in elements). The caller
    keeps `array` alive while the descriptor is used."""
    dtype = DType.from_numpy(array.dtype)
    struct = memref_descriptor(dtype, array.ndim)()
    itemsize = array.itemsize
    for stride in array.strides:
        if stride % itemsize:
            raise FusebindValueError(f"array strides {array.strides} are not multiples of its itemsize {itemsize}")
    data = ctypes.cast(array.ctypes.data, ctypes.POINTER(dtype.ctype))
    struct.allocated = data
    struct.aligned = data
    struct.offset = 0
    if array.ndim:
        struct.sizes[:] = list(array.shape)
        struct.strides[:] = [s // itemsize for s in array.strides]
    return struct
