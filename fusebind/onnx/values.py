"""What an ONNX handler knows of its inputs: constant at import (numpy, `fb.constant`) or
traced; the helpers every ops_*.py module of fusebind's own handlers shares.

`is_const` / `opt` / `const_array` / `const_ints` (a value the handler needs at import, or
UnsupportedModel naming the input), `norm_axis`, `lift` (a constant table made a traced
constant when its indices are traced: numpy's take dispatches on the table alone) and
`const_inputs` (the decorator that declares which input positions a handler needs as values).
`SequenceValue` is an ONNX sequence inside a traced graph (a tuple of values, its length static);
`takes_sequences` marks the handlers that accept one (the importer refuses a sequence given to any
other handler).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fusebind.onnx.registry import NodeContext


def is_const(x: Any) -> bool:
    """A value known at import (a numpy array or scalar), not a traced array."""
    return isinstance(x, (np.ndarray, np.generic, int, float, bool))


def opt(inputs: Sequence[Any], i: int) -> Any:
    """Input `i`, or None when it is omitted (absent, or given as None for an empty name)."""
    return inputs[i] if i < len(inputs) else None


def const_array(ctx: NodeContext, x: Any, what: str) -> np.ndarray:
    """`x` as a numpy array, or UnsupportedModel when it is traced (its value is data)."""
    if not is_const(x):
        raise ctx.unsupported(f"the {what} input is computed from the model's inputs (a data-dependent "
                              "shape or parameter); fusebind needs it constant at import")
    return np.asarray(x)


def const_ints(ctx: NodeContext, x: Any, what: str) -> list[int]:
    return [int(v) for v in const_array(ctx, x, what).reshape(-1)]


def norm_axis(ctx: NodeContext, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ctx.unsupported(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def lift(data: Any, *others: Any) -> Any:
    """`data` as a traced constant when it is numpy and one of `others` is traced: numpy's
    np.take dispatches on its data alone, so a constant table with traced indices would ask
    for the indices' values."""
    if not is_const(data) or all(is_const(o) or o is None for o in others):
        return data
    import fusebind as fb
    from fusebind.api.numpy_kernels import graph_of
    from fusebind.api.tracer import as_tracer

    value = data if isinstance(data, fb.ConstantArray) else fb.constant(np.asarray(data))
    return as_tracer(graph_of(*others), value)


def const_inputs(*positions: int) -> Any:
    """Declare the input positions whose values the handler needs at import (shapes, axes,
    pads, repeats): `fn.const_inputs`. The importer may make a graph input that feeds one of
    them a static argument (its value part of the trace key), as the node suite feeds them."""
    def mark(fn: Any) -> Any:
        fn.const_inputs = tuple(positions)
        return fn
    return mark


class SequenceValue:
    """An ONNX sequence while the graph is traced: `items`, its tensors in order (traced arrays or
    folded constants), and `dtype`, their element type (an empty sequence still has one). The length
    is static: every position a sequence op takes is known when tracing (importer.PARAM_INPUTS)."""

    __slots__ = ("items", "dtype")

    def __init__(self, items: Sequence[Any], dtype: Any) -> None:
        self.items = tuple(items)
        self.dtype = np.dtype(dtype)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"SequenceValue({len(self.items)} x {self.dtype})"


def takes_sequences(fn: Any) -> Any:
    """Mark a handler as one that accepts SequenceValue inputs (the sequence ops): `fn.takes_sequences`."""
    fn.takes_sequences = True
    return fn


def _const_i64(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _ones_tuple(n: int) -> tuple[int, ...]:
    return (1,) * n
