"""Checking a call's arguments and its `out=` arrays against a function's
signature, before a plan runs them.

Owns `ArgumentError` (a call argument or `out=` array that does not fit),
`format_array_type` (`float32[4,8]`, as errors print a type), the exact
checks the executor runs on its slow path (`check_arguments`: count, dtype,
rank, static dims; `check_outputs`: count, type, dtype, shape, C-contiguous,
writeable, no overlap with an input or another output, except an
(argument, result) pair `Plan.inplace_args` allows, passed as the very same
memory), and `fast_out_ok`, the cheap sufficient test that lets the fast
path take an `out=` array without them.

`check_arguments` and `check_outputs` take the executor as their first
argument and are `Executor` methods (assigned in its class body, so calling
one is one call, as before); they read its `name`, `arg_names` and
`arg_types` only.

Must not: run kernels, build plans (plan.py), or cast or broadcast what
does not fit: a mismatch is an error that names what was asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from fusebind.dialect.errors import ArgumentError

if TYPE_CHECKING:
    from fusebind.runtime.plan import Plan


def format_array_type(dtype: Any, shape: Sequence[int | None]) -> str:
    """`float32[4,8]` (a dynamic dim prints as `?`)."""
    return f"{np.dtype(dtype)}[{','.join('?' if d is None else str(d) for d in shape)}]"


def check_arguments(executor: Any, arrays: Sequence[np.ndarray]) -> None:
    """Raise ArgumentError naming the first argument that does not fit."""
    names = executor.arg_names
    if len(arrays) != len(executor.arg_types):
        raise ArgumentError(f"fusebind: '{executor.name}' takes {len(executor.arg_types)} arguments "
                            f"({', '.join(names)}), got {len(arrays)}")
    for i, (a, (dtype, shape)) in enumerate(zip(arrays, executor.arg_types)):
        fits = (a.dtype == dtype and a.ndim == len(shape)
                and all(d is None or d == s for d, s in zip(shape, a.shape)))
        if not fits:
            raise ArgumentError(f"fusebind: argument '{names[i]}' (#{i}) of '{executor.name}': expected "
                                f"{format_array_type(dtype, shape)}, got {format_array_type(a.dtype, a.shape)}")


def check_outputs(executor: Any, plan: Plan, arrays: Sequence[np.ndarray], out: Any) -> list[np.ndarray | None]:
    """The caller's `out=` as one entry per result, or ArgumentError naming
    what does not fit (count, type, dtype, shape, layout, overlap)."""
    n = len(plan.result_slots)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != n:
        raise ArgumentError(f"fusebind: '{executor.name}' returns {n} array{'s' if n != 1 else ''}, but out= gives "
                            f"{len(outs)}; pass {'one array' if n == 1 else f'a tuple of {n} arrays (or None)'}")
    checked: list[tuple[str, np.ndarray]] = []
    for i, (o, (shape, dtype)) in enumerate(zip(outs, plan.result_types)):
        if o is None:
            continue
        label = "out" if n == 1 else f"out[{i}]"
        want = format_array_type(dtype, shape or ())
        if not isinstance(o, np.ndarray):
            raise ArgumentError(f"fusebind: {label} of '{executor.name}' must be a numpy array {want}, "
                                f"got {type(o).__name__}")
        if o.dtype != dtype or o.shape != shape:
            raise ArgumentError(f"fusebind: {label} of '{executor.name}': expected {want}, got "
                                f"{format_array_type(o.dtype, o.shape)}; results are not cast or broadcast")
        if not o.flags.c_contiguous:
            raise ArgumentError(f"fusebind: {label} of '{executor.name}' is not C-contiguous (strides {o.strides}); "
                                "pass a contiguous array, e.g. np.empty(shape, dtype)")
        if not o.flags.writeable:
            raise ArgumentError(f"fusebind: {label} of '{executor.name}' is read-only; pass a writeable array")
        for j, a in enumerate(arrays):
            if not (np.may_share_memory(a, o) and np.shares_memory(a, o)):
                continue
            if (j, i) in plan.inplace_args and same_memory(a, o):
                continue
            raise ArgumentError(
                f"fusebind: {label} of '{executor.name}' overlaps argument '{executor.arg_names[j]}' (#{j}) in memory; "
                "the kernel would read inputs it has already overwritten. Pass an output array that shares no "
                "memory with the inputs (only a region marked fused.inplace may write over its operand)")
        for other_label, other in checked:
            if np.may_share_memory(other, o) and np.shares_memory(other, o):
                raise ArgumentError(f"fusebind: {label} and {other_label} of '{executor.name}' overlap in memory; "
                                    "pass a separate array for each result")
        checked.append((label, o))
    return outs


def fast_out_ok(args: Sequence[Any], out: Any) -> bool:
    """A cheap sufficient test that `out` may take the fast path: an ndarray
    with no base, every input an ndarray with no base and not `out` itself.
    Distinct arrays without a base own distinct allocations (numpy sets
    `base` on every view and on arrays over borrowed buffers), so they cannot
    overlap; anything else (views, subclasses, lists, tuples of outputs)
    takes the slow path, which checks exactly (`check_outputs`). Used by
    `FastPath.call` (steps.py), the one fast call path."""
    if type(out) is not np.ndarray or out.base is not None:
        return False
    for a in args:
        if a is out or type(a) is not np.ndarray or a.base is not None:
            return False
    return True


def same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """`a` and `b` are the very same elements (pointer, shape, strides, dtype)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.shape == b.shape
            and a.strides == b.strides and a.dtype == b.dtype)
