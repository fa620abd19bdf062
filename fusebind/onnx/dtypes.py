"""ONNX element types as fusebind's: `numpy_dtype_of(elem_type, where)`.

The element types fusebind has are the element table's enabled families (`fusebind.api.capture.
SUPPORTED`): an ONNX type outside them (float8, int4, string, or a family not switched on) is an
`UnsupportedModel` naming it. Shared by the importer (graph values, initializers) and the handlers
(Cast's `to`).

Must not: import the importer or a handler module.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from fusebind.api.capture import SUPPORTED
from fusebind.onnx.registry import UnsupportedModel


def elem_type_name(elem_type: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return str(elem_type)


def numpy_dtype_of(elem_type: int, where: str) -> np.dtype:
    """The numpy dtype of an ONNX element type fusebind has, or UnsupportedModel naming it."""
    try:
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        dt = None
    if dt is None or dt not in SUPPORTED:
        raise UnsupportedModel(f"{where}: the element type {elem_type_name(elem_type)} is not one fusebind has "
                               f"(it has {', '.join(sorted(str(d) for d in SUPPORTED))})")
    return dt


__all__ = ["elem_type_name", "numpy_dtype_of"]
