"""Lowering broadcasts dims (ints or SSA names) by the dialect's one rule, `types.broadcast_shapes`."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.dialect.types import broadcast_shapes
from fusebind.lowering.linalg_types import broadcast_dims
from fusebind.lowering.scalar_text import ScalarEmitError


@pytest.mark.parametrize("shapes, expected", [
    ([[4, 1], [1, 3]], [4, 3]),
    ([[2, 3], [3]], [2, 3]),
    ([[1], ["%a"]], ["%a"]),            # a name is a dynamic dim: it wins over 1
    ([["%a", 3], [4, 1]], [4, 3]),      # a static size other than 1 wins over a name
    ([[1, "%n"], ["%m", 1]], ["%m", "%n"]),
    ([["%a"], ["%b"]], ["%a"]),         # two names: the first
    ([[], [5]], [5]),
    ([], []),
])
def test_broadcast_dims_is_numpys_rule_with_names_as_dynamic_dims(shapes: list, expected: list) -> None:
    assert broadcast_dims(shapes, "prim.add") == expected
    static = [[d for d in s] for s in shapes if all(isinstance(d, int) for d in s)]
    if len(static) == len(shapes) and shapes:
        assert tuple(expected) == np.broadcast_shapes(*map(tuple, static)) == broadcast_shapes(*static)


def test_shapes_that_do_not_broadcast_name_the_op() -> None:
    with pytest.raises(ScalarEmitError, match=r"^prim\.mul: shapes \[\[2, '%a'\], \[3, 1\]\] do not broadcast$"):
        broadcast_dims([[2, "%a"], [3, 1]], "prim.mul")
