"""The one element-type table (`dialect.types.ELEMENTS`) and the views derived from it agree.

Every element-type mapping (the kernel ABI's numpy dtypes and ctypes, lowering's byte widths,
float order and integer widths) is computed from the table, so a new element type is one row.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from fusebind.dialect import types
from fusebind.dialect.errors import FusebindValueError
from fusebind.lowering import abi, linalg_types, scalar_text


def test_the_abi_dtypes_are_the_prim_element_types_with_numpys_layout() -> None:
    assert [d.value for d in abi.DType] == list(types.ELEMENT_TYPES) == ["f32", "f64", "i32", "i64", "i1"]
    expected = {"f32": (np.float32, ctypes.c_float, 4), "f64": (np.float64, ctypes.c_double, 8),
                "i32": (np.int32, ctypes.c_int32, 4), "i64": (np.int64, ctypes.c_int64, 8),
                "i1": (np.bool_, ctypes.c_bool, 1)}
    for d in abi.DType:
        numpy, ctype, size = expected[d.value]
        assert (d.numpy, d.ctype, d.itemsize) == (np.dtype(numpy), ctype, size)
        assert abi.DType.from_numpy(numpy) is d and types.numpy_dtype(d.value) == np.dtype(numpy)
        assert types.name_of_numpy_dtype(np.dtype(numpy)) == d.value
        assert ctypes.sizeof(ctype) == types.ELEMENT_BYTES[d.value]


def test_lowering_widths_and_float_order_come_from_the_table() -> None:
    assert linalg_types.ELEMENT_BYTES is types.ELEMENT_BYTES
    assert types.ELEMENT_BYTES == {"f32": 4, "f64": 8, "i32": 4, "i64": 8, "i1": 1, "f16": 2, "i8": 1, "i16": 2}
    assert scalar_text.FLOAT_ELEMS == ("f16", "f32", "f64")
    assert scalar_text.INT_WIDTH == {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
    assert (types.FLOAT_TYPES, types.INT_TYPES) == ({"f32", "f64"}, {"i32", "i64"})
    assert {n: e.llvm for n, e in types.ELEMENTS.items() if e.prim} == {
        "f32": "float", "f64": "double", "i32": "i32", "i64": "i64", "i1": "i1"}


@pytest.mark.parametrize("name", ["f16", "i8", "bf16", "f32 ", None])
def test_only_the_prim_types_have_an_ir_attribute(name: object) -> None:
    with pytest.raises(FusebindValueError, match=r"unknown element type .*; expected one of f32, f64, i32, i64, i1"):
        types.element_type(name)  # type: ignore[arg-type]
    assert [str(types.element_type(n)) for n in types.ELEMENT_TYPES] == ["f32", "f64", "i32", "i64", "i1"]
