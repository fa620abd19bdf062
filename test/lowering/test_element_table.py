"""The one element-type table (`dialect.types.ELEMENTS`) and the views derived from it agree.

Every element-type mapping (the kernel ABI's numpy dtypes and ctypes, lowering's byte widths,
float order and integer widths) is computed from the table, so a new element type is one row.
"""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

from fusebind.dialect import types
from fusebind.dialect.errors import FusebindValueError
from fusebind.lowering import abi, linalg_types, scalar_text


#: each element type: numpy dtype, ctypes type, byte width, LLVM type, the family that switches it on
TABLE = {
    "f32": (np.float32, ctypes.c_float, 4, "float", "base"), "f64": (np.float64, ctypes.c_double, 8, "double", "base"),
    "i32": (np.int32, ctypes.c_int32, 4, "i32", "base"), "i64": (np.int64, ctypes.c_int64, 8, "i64", "base"),
    "i1": (np.bool_, ctypes.c_bool, 1, "i1", "base"),
    "f16": (np.float16, ctypes.c_uint16, 2, "half", "narrow_float"),
    "bf16": (ml_dtypes.bfloat16, ctypes.c_uint16, 2, "bfloat", "narrow_float"),
    "i8": (np.int8, ctypes.c_int8, 1, "i8", "int_widths"), "i16": (np.int16, ctypes.c_int16, 2, "i16", "int_widths"),
    "ui8": (np.uint8, ctypes.c_uint8, 1, "i8", "int_widths"), "ui16": (np.uint16, ctypes.c_uint16, 2, "i16", "int_widths"),
    "ui32": (np.uint32, ctypes.c_uint32, 4, "i32", "int_widths"),
    "ui64": (np.uint64, ctypes.c_uint64, 8, "i64", "int_widths"),
}
ON = [n for n, row in TABLE.items() if row[4] == "base" or types.FAMILIES[row[4]]]
OFF = [n for n in TABLE if n not in ON]


def test_the_abi_dtypes_are_the_element_table_with_numpys_layout() -> None:
    assert [d.value for d in abi.DType] == list(types.ELEMENTS) == list(TABLE)
    assert list(types.ELEMENT_TYPES) == ON
    for d in abi.DType:
        numpy, ctype, size, _, _ = TABLE[d.value]
        assert (d.numpy, d.ctype, d.itemsize) == (np.dtype(numpy), ctype, size)
        assert ctypes.sizeof(ctype) == types.ELEMENT_BYTES[d.value]
        if d.value in ON:
            assert abi.DType.from_numpy(numpy) is d and types.numpy_dtype(d.value) == np.dtype(numpy)
            assert types.name_of_numpy_dtype(np.dtype(numpy)) == d.value
        else:
            with pytest.raises(FusebindValueError, match="has no fusebind DType"):
                abi.DType.from_numpy(numpy)


def test_lowering_widths_and_float_order_come_from_the_table() -> None:
    assert linalg_types.ELEMENT_BYTES is types.ELEMENT_BYTES
    assert types.ELEMENT_BYTES == {n: row[2] for n, row in TABLE.items()}
    assert scalar_text.FLOAT_ELEMS[-2:] == ("f32", "f64") and set(scalar_text.FLOAT_ELEMS) == {"f16", "bf16", "f32", "f64"}
    assert scalar_text.INT_WIDTH == {"i32": 32, "i64": 64, "i1": 1, "i8": 8, "i16": 16, "ui8": 8, "ui16": 16,
                                     "ui32": 32, "ui64": 64}
    assert types.FLOAT_TYPES == {n for n in ON if TABLE[n][0] in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16)}
    assert types.INT_TYPES == {n for n in ON if np.dtype(TABLE[n][0]).kind in "iu"}
    assert {n: e.llvm for n, e in types.ELEMENTS.items() if e.prim} == {n: TABLE[n][3] for n in ON}
    assert {n: e.mlir for n, e in types.ELEMENTS.items()} == {n: TABLE[n][3].replace("half", "f16").replace(
        "bfloat", "bf16").replace("float", "f32").replace("double", "f64") for n in TABLE}


@pytest.mark.parametrize("name", [*OFF, "f32 ", "u8", None])
def test_only_the_prim_types_have_an_ir_attribute(name: object) -> None:
    with pytest.raises(FusebindValueError, match=r"unknown element type .*; expected one of " + ", ".join(ON)):
        types.element_type(name)  # type: ignore[arg-type]
    assert [str(types.element_type(n)) for n in types.ELEMENT_TYPES] == ON
