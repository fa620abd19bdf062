"""Shared helpers of the api tests: run a traced function through the reference interpreter, and
compare with numpy's value, dtype and shape exactly."""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.api.trace import trace_graph
from fusebind.dialect import interpret


def interp(fn: Any, *arrays: np.ndarray) -> Any:
    """`fn` traced on `arrays` and run by the interpreter (captured arrays passed as they are now)."""
    module, graph = trace_graph(fn, arrays, [f"a{i}" for i in range(len(arrays))], "t")
    hidden = [cap.array() for cap, _ in graph.captures.values()]
    return interpret(module, *arrays, *hidden)


def same(got: Any, want: np.ndarray) -> None:
    """numpy's answer exactly: dtype, shape and values."""
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)
