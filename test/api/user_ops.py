"""User-defined ops for the tests (test_user_ops.py, and `fusebind-opt --plugin` in test/lit/tools).

Each is one class, defined only here, in its own dialect `mylib`: `mylib.cube` (x*x*x) and
`mylib.hypot2` (a*a + b*b), on f32 / f64. Importing this module registers both (once per process: the
registry is append-only and re-registering the same class is a no-op).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from xdsl.irdl import irdl_op_definition

import fusebind as fb
from fusebind.dialect import BinaryOp, UnaryOp


@irdl_op_definition
class CubeOp(UnaryOp):
    name = "mylib.cube"
    DTYPES: ClassVar[frozenset[str]] = frozenset({"f32", "f64"})
    FLOPS_PER_ELEMENT: ClassVar[float] = 2.0

    def scalar_body(self, b: Any, *args: Any) -> Any:
        x = args[0]
        return b.mul(b.mul(x, x), x)

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        (x,) = arrays
        return x * x * x


@irdl_op_definition
class Hypot2Op(BinaryOp):
    name = "mylib.hypot2"
    DTYPES: ClassVar[frozenset[str]] = frozenset({"f32", "f64"})
    FLOPS_PER_ELEMENT: ClassVar[float] = 3.0

    def scalar_body(self, b: Any, *args: Any) -> Any:
        x, y = args
        return b.add(b.mul(x, x), b.mul(y, y))

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        a, b = arrays
        return a * a + b * b


cube = fb.register_op(CubeOp)
hypot2 = fb.register_op(Hypot2Op)
