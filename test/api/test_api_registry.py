"""The `fb.*` op functions, `fb.__all__` and the ufunc table come from the op registry (issue 12).

Every list here is read from `registered_ops()`, so a new op class with an API_NAME or a NUMPY_UFUNC is
tested with no edit of this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
import fusebind.api as api
from fusebind.api import functions
from fusebind.api.numpy_ufuncs import ELEMENTWISE
from fusebind.dialect.registry import registered_ops
from fusebind.dialect.types import FLOAT_TYPES

BUILTIN = [cls for cls in registered_ops() if "." not in cls.KIND]
WITH_API = [cls for cls in BUILTIN if cls.API_NAME]
WITH_UFUNC = [cls for cls in BUILTIN if cls.NUMPY_UFUNC and cls.NUMPY_UFUNC != "matmul"]


def _operands(cls: type) -> tuple:
    """Operands numpy and the op both take: floats in (0, 2) for float ops (log, sqrt), ints otherwise."""
    n = len(cls.get_irdl_definition().operands)
    if cls.KIND == "select":
        return (np.array([True, False, True]), np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]))
    if cls.KIND == "matmul":
        return (np.arange(6.0).reshape(2, 3) / 7, np.arange(6.0).reshape(3, 2) / 5)
    base = np.array([0.25, 0.5, 1.5, 1.75], np.float32)
    if "i32" in cls.DTYPES and (cls.KIND in ("floordiv", "rem", "pow") or not cls.DTYPES & FLOAT_TYPES):
        return tuple(np.array([3, 7, 2, 5], np.int32) if i == 0 else np.array([2, 3, 1, 2], np.int32)
                     for i in range(n))
    return tuple(base * (i + 1) for i in range(n))


def test_the_api_names_are_the_registry_s_and_the_composites() -> None:
    names = sorted([cls.API_NAME for cls in WITH_API] + list(functions.COMPOSITES))
    assert functions.__all__ == names
    assert {"exp", "log", "sqrt", "tanh", "erf", "sigmoid", "relu", "maximum", "minimum", "where"} <= set(names)
    for name in names:
        assert name in api.__all__ and name in fb.__all__
        assert getattr(fb, name) is getattr(api, name) is getattr(functions, name)
    assert fb.register_op is api.register_op
    assert sorted(set(fb.__all__) - {"__version__"}) == sorted(api.__all__)


@pytest.mark.parametrize("cls", WITH_API, ids=lambda c: c.API_NAME)
def test_each_generated_function_gives_numpy_s_answer_traced_and_eager(cls: type) -> None:
    fn = getattr(fb, cls.API_NAME)
    assert fn.op_class is cls
    args = _operands(cls)
    eager = fn(*args)  # no traced operand: numpy's own function, or the op's reference
    expect = getattr(np, cls.NUMPY_UFUNC or cls.API_NAME)(*args) if hasattr(np, cls.NUMPY_UFUNC or cls.API_NAME) \
        else cls(*_block_args(args)).reference(*args)
    np.testing.assert_allclose(eager, expect, rtol=1e-6)
    got = fb.jit(fn)(*args)
    assert got.dtype == np.asarray(expect).dtype and got.shape == np.shape(expect)
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)


def _block_args(arrays: tuple) -> list:
    from xdsl.ir import Block

    from fusebind.dialect.types import name_of_numpy_dtype, tensor_type

    return list(Block(arg_types=[tensor_type(a.shape, name_of_numpy_dtype(a.dtype)) for a in arrays]).args)


@pytest.mark.parametrize("cls", WITH_UFUNC, ids=lambda c: c.NUMPY_UFUNC)
def test_every_op_s_numpy_ufunc_is_in_the_table_and_traces_to_it(cls: type) -> None:
    assert cls.NUMPY_UFUNC in ELEMENTWISE
    ufunc = getattr(np, cls.NUMPY_UFUNC)
    args = _operands(cls)
    f = fb.jit(lambda *xs: ufunc(*xs))
    np.testing.assert_allclose(f(*args), ufunc(*args), rtol=1e-6)
    assert cls.name in f.mlir(*args)


def test_a_generated_function_refuses_a_dtype_its_op_does_not_take_naming_both() -> None:
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(lambda m: fb.relu(m))(np.array([True, False]))
    from fusebind.dialect.prim import ReluOp
    from fusebind.dialect.types import NUMERIC_TYPES, numpy_dtype

    assert ReluOp.DTYPES == NUMERIC_TYPES  # every float and integer width, not bool
    takes = ", ".join(str(numpy_dtype(e)) for e in sorted(NUMERIC_TYPES))
    assert str(info.value) == ("fusebind: in '<lambda>': fusebind.relu of a bool array is not supported: prim.relu "
                               f"takes {takes}; cast first: x.astype(np.float32)")
    assert "uint8" in takes and "float32" in takes
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.exp(np.ones(2), np.ones(2))
    assert str(info.value) == "fusebind.exp() takes 1 operand (x), 2 given"
