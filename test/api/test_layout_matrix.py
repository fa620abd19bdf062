"""The op x dtype x layout x arm matrix of issue 13's layout functions (and gathers, functional
updates, joins and creation functions): numpy's value, dtype and shape through the interpreter,
arm 0 and the fused arm, behind a broadcasting consumer, on contiguous and non-contiguous
arguments. The reference is numpy's own code (an fb.* call has its numpy form beside it).

Compile count dominates, so kernels are shared: every op reads one argument shape (4, 6), the ops
of one dtype are traced into one function (one result per op, each behind the consumer
`r * s + r` with `s` of shape (1,): a real broadcast), and that function is compiled once per arm;
the layouts (transposed, negative strides, Fortran order, a stepped view) are calls of the same
compiled function, not new kernels. Default: each op on one dtype (ops are dealt round robin over
the dtypes they accept), every layout. FUSEBIND_LONG=1: every op on every dtype it accepts.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.trace import trace_graph
from fusebind.dialect import interpret, print_module

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
DTYPES = (np.float32, np.float64, np.int32, np.int64, np.bool_)
SHAPE = (4, 6)
NUMERIC = DTYPES[:4]

Op = Callable[[Any], Any]

#: name -> (function of x of SHAPE, the dtypes it accepts[, numpy's own form when the function
#: calls fb.*: the reference must not be fusebind's eager code])
OPS: dict[str, tuple[Any, ...]] = {
    # basic indexing and splits
    "x[1:, ::-2]": (lambda x: x[1:, ::-2], DTYPES),
    "x[:, 0]": (lambda x: x[:, 0], DTYPES),
    "x[None, -1, ..., None]": (lambda x: x[None, -1, ..., None], DTYPES),
    "x[::-1, 4:1:-2]": (lambda x: x[::-1, 4:1:-2], DTYPES),
    "split": (lambda x: np.split(x, 2, axis=1)[1], DTYPES),
    "split axis -2": (lambda x: np.split(x, [1, 3], axis=-2)[2], DTYPES),
    "array_split": (lambda x: np.array_split(x, 4, axis=1)[3], DTYPES),
    # flips, rolls, tiles, repeats
    "flip": (lambda x: np.flip(x), DTYPES),
    "flip axis 0": (lambda x: np.flip(x, 0), DTYPES),
    "fliplr": (lambda x: np.fliplr(x), DTYPES),
    "flipud": (lambda x: np.flipud(x), DTYPES),
    "roll flat": (lambda x: np.roll(x, 2), DTYPES),
    "roll axis 1": (lambda x: np.roll(x, -1, axis=1), DTYPES),
    "roll two axes": (lambda x: np.roll(x, (1, 8), axis=(0, 1)), DTYPES),
    "tile": (lambda x: np.tile(x, (2, 1)), DTYPES),
    "tile 3-D": (lambda x: np.tile(x, (2, 1, 2)), DTYPES),
    "repeat axis 0": (lambda x: np.repeat(x, 2, axis=0), DTYPES),
    "repeat counts": (lambda x: np.repeat(x, [1, 2, 0, 1, 1, 3], axis=1), DTYPES),
    "x.repeat flat": (lambda x: x.repeat(2), DTYPES),
    # shapes
    "broadcast_to": (lambda x: np.broadcast_to(x[:1], (3, 6)), DTYPES),
    "expand_dims": (lambda x: np.expand_dims(x, 1), DTYPES),
    "expand_dims two": (lambda x: np.expand_dims(x, (0, -1)), DTYPES),
    "squeeze": (lambda x: np.squeeze(x[:1]), DTYPES),
    "moveaxis": (lambda x: np.moveaxis(x[None], 0, -1), DTYPES),
    "swapaxes": (lambda x: np.swapaxes(x, 0, 1), DTYPES),
    "x.T": (lambda x: x.T, DTYPES),
    "ravel": (lambda x: np.ravel(x), DTYPES),
    "flatten": (lambda x: x.flatten(), DTYPES),
    "reshape(-1)": (lambda x: x.reshape(-1), DTYPES),
    "reshape(2, -1)": (lambda x: x.reshape(2, -1, order="C"), DTYPES),
    # triangles and diagonals
    "tril": (lambda x: np.tril(x), DTYPES),
    "triu 1": (lambda x: np.triu(x, 1), DTYPES),
    "tril -1": (lambda x: np.tril(x, -1), DTYPES),
    "diag": (lambda x: np.diag(x), DTYPES),
    "diag of 1-D": (lambda x: np.diag(x[0], 1), DTYPES),
    "diagonal 1": (lambda x: np.diagonal(x, 1), DTYPES),
    "trace": (lambda x: np.trace(x), NUMERIC),
    "x.trace offset -1": (lambda x: x.trace(offset=-1), NUMERIC),
    # pads
    "pad constant": (lambda x: np.pad(x, 1, constant_values=2), DTYPES),
    "pad edge": (lambda x: np.pad(x, ((1, 0), (2, 1)), mode="edge"), DTYPES),
    "pad reflect": (lambda x: np.pad(x, 2, mode="reflect"), DTYPES),
    "pad wrap": (lambda x: np.pad(x, (1, 3), mode="wrap"), DTYPES),
    "pad symmetric": (lambda x: np.pad(x, 1, mode="symmetric"), DTYPES),
    # gathers by constant indices
    "take": (lambda x: np.take(x, [0, -1, 2], axis=1), DTYPES),
    "x.take flat": (lambda x: x.take([5, -1, 0, 23]), DTYPES),
    "take_along_axis": (lambda x: np.take_along_axis(x, np.array([[0], [1], [-1], [2]]), axis=1), DTYPES),
    "choose": (lambda x: np.choose(np.array([[0, 1, 0, 1, 1, 0]] * 4), [x, x[::-1]]), DTYPES),
    # functional updates (scatter)
    "fb.at set": (lambda x: fb.at(x)[1:3, ::-2].set(x[0, :3]), DTYPES, lambda x: _at(x, None, (slice(1, 3), slice(None, None, -2)), x[0, :3])),
    "fb.at add repeats": (lambda x: fb.at(x)[[0, -1, 0]].add(x[1]), NUMERIC, lambda x: _at(x, np.add, [0, -1, 0], x[1])),
    "fb.at max": (lambda x: fb.at(x)[:, [2, 2, -1]].max(x[:, :3]), DTYPES,
                  lambda x: _at(x, np.maximum, (slice(None), [2, 2, -1]), x[:, :3])),
    "fb.put_along_axis": (lambda x: fb.put_along_axis(x, np.array([[1], [0], [-1], [5]]), x[:, :1], axis=1), DTYPES,
                          lambda x: _put_along(x, np.array([[1], [0], [-1], [5]]), x[:, :1], 1)),
    # joins
    "concatenate": (lambda x: np.concatenate([x, x[:, :2]], axis=1), DTYPES),
    "concatenate axis None": (lambda x: np.concatenate([x, x[0]], axis=None), DTYPES),
    "stack": (lambda x: np.stack([x, x[::-1]], axis=1), DTYPES),
    "hstack": (lambda x: np.hstack([x, x]), DTYPES),
    "vstack": (lambda x: np.vstack([x, x[:1]]), DTYPES),
    "dstack": (lambda x: np.dstack([x, x]), DTYPES),
    "column_stack": (lambda x: np.column_stack([x, x[:, 0]]), DTYPES),
    "append": (lambda x: np.append(x, x[:1], axis=0), DTYPES),
    # creation functions, read with x
    "zeros_like": (lambda x: np.zeros_like(x) + x, DTYPES),
    "ones_like": (lambda x: np.ones_like(x) * x, DTYPES),
    "full_like": (lambda x: np.full_like(x, 3) - x, NUMERIC),
    "fb.zeros_like": (lambda x: fb.zeros_like(x) + x, DTYPES, lambda x: np.zeros_like(x) + x),
    "fb.arange": (lambda x: x + fb.arange(6, dtype=x.dtype), NUMERIC, lambda x: x + np.arange(6, dtype=x.dtype)),
    "np.arange": (lambda x: x * np.arange(6, dtype=x.dtype), NUMERIC),
    "fb.linspace": (lambda x: x * fb.linspace(0, 1, 6, dtype=x.dtype), (np.float32, np.float64),
                    lambda x: x * np.linspace(0, 1, 6, dtype=x.dtype)),
    "fb.eye": (lambda x: x * fb.eye(4, 6, k=1, dtype=x.dtype), DTYPES, lambda x: x * np.eye(4, 6, k=1, dtype=x.dtype)),
    "fb.identity": (lambda x: x[:, :4] * fb.identity(4, dtype=x.dtype), DTYPES,
                    lambda x: x[:, :4] * np.identity(4, dtype=x.dtype)),
    "fb.full": (lambda x: x - fb.full((4, 6), 2, dtype=x.dtype), NUMERIC, lambda x: x - np.full((4, 6), 2, dtype=x.dtype)),
    "fb.ones": (lambda x: x * fb.ones((1, 6), dtype=x.dtype), DTYPES, lambda x: x * np.ones((1, 6), dtype=x.dtype)),
    "fb.zeros": (lambda x: x + fb.zeros(6, dtype=x.dtype), DTYPES, lambda x: x + np.zeros(6, dtype=x.dtype)),
}


def _at(x: np.ndarray, ufunc: Any, key: Any, v: np.ndarray) -> np.ndarray:
    """numpy's own `x[key] = v` (ufunc None) or `ufunc.at(x, key, v)` on a copy."""
    y = x.copy()
    if ufunc is None:
        y[key] = v
    else:
        ufunc.at(y, key, v)
    return y


def _put_along(x: np.ndarray, idx: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
    y = x.copy()
    np.put_along_axis(y, idx, v, axis)
    return y


def deal() -> dict[Any, list[str]]:
    """Which ops each dtype runs: every accepted dtype under LONG, else round robin."""
    groups: dict[Any, list[str]] = {d: [] for d in DTYPES}
    for i, (name, (_, accepts, *_)) in enumerate(OPS.items()):
        for d in accepts if LONG else (accepts[i % len(accepts)],):
            groups[d].append(name)
    return groups


GROUPS = deal()


def base(dtype: Any, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-20, 20, shape).astype(dtype)


#: ways to pass a (4, 6) argument: the same values, contiguous or as a strided numpy view
LAYOUTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "C-contiguous": lambda a: np.ascontiguousarray(a),
    "transposed": lambda a: np.ascontiguousarray(a.T).T,
    "negative strides": lambda a: np.ascontiguousarray(a[::-1, ::-1])[::-1, ::-1],
    "Fortran order": lambda a: np.asfortranarray(a),
    "stepped view": lambda a: np.repeat(np.repeat(a, 2, axis=0), 3, axis=1)[::2, 1::3],
}


def consumer(ops: list[str], numpy: bool = False) -> Callable[..., tuple[Any, ...]]:
    """`(x, s) -> tuple(op(x) * s + op(x) for op in ops)`: each result broadcast against s (1,).
    `numpy`: with each op's numpy form (the reference)."""
    fns = [(OPS[name][2] if numpy and len(OPS[name]) > 2 else OPS[name][0]) for name in ops]

    def f(x: Any, s: Any) -> tuple[Any, ...]:
        return tuple(r * s + r for r in (fn(x) for fn in fns))
    return f


def check(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), (what, got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind == "f":  # the consumer may contract to an FMA in a kernel
        tol = 4 * float(np.finfo(want.dtype).eps)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 8, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


class Arms:
    """One traced function compiled once per arm: interpreter, arm 0 (no fusion), fused (fb.jit)."""

    def __init__(self, fn: Callable[..., Any], example: list[np.ndarray], cache: Any) -> None:
        self.module, graph = trace_graph(fn, example, [f"a{i}" for i in range(len(example))], "t")
        self.hidden = [cap.array() for cap, _ in graph.captures.values()]
        self.arm0 = fb.compile(print_module(self.module), optimize=False)
        self.fused = fb.jit(fn, cache=cache)

    def run(self, *args: np.ndarray) -> dict[str, tuple[Any, ...]]:
        def tup(r: Any) -> tuple[Any, ...]:
            return r if isinstance(r, tuple) else (r,)
        return {"interpreter": tup(interpret(self.module, *args, *self.hidden)),
                "arm 0": tup(self.arm0(*args, *self.hidden)), "fused": tup(self.fused(*args))}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_layout_ops_match_numpy_on_every_arm_and_layout(dtype: Any, object_cache: Any) -> None:
    names = GROUPS[dtype]
    assert names, dtype
    fn = consumer(names)
    x0, s = base(dtype, SHAPE, 1), base(dtype, (1,), 2)
    arms = Arms(fn, [x0, s], object_cache)
    for layout, make in LAYOUTS.items():
        x = make(x0)
        assert np.array_equal(x, x0) and (layout == "C-contiguous") == x.flags.c_contiguous, layout
        want = consumer(names, numpy=True)(x, s)
        for arm, got in arms.run(x, s).items():
            assert len(got) == len(want), (arm, len(got), len(want))
            for name, g, w in zip(names, got, want):
                check(g, w, f"{np.dtype(dtype).name} {name} ({layout}, {arm})")
    stats = arms.fused.stats  # every region of every call ran its fused kernel
    assert stats.fused_calls >= len(LAYOUTS) and stats.arm0_calls == 0, (stats, arms.fused.explain(x0, s))


def test_every_op_runs_in_the_default_slice() -> None:
    """Round robin leaves no op out, and each dtype gets some."""
    dealt = [n for names in GROUPS.values() for n in names]
    assert set(dealt) == set(OPS) and all(GROUPS.values())


# --------------------------------------------------------------------------- traced indices

def _gathers(x: Any, i: Any, j: Any) -> tuple[Any, ...]:
    s = x[:1, :1]
    return tuple(r * s + r for r in (np.take(x, i, axis=1), np.take_along_axis(x, j, axis=0), x[:, i],
                                     np.take(x.T, i[:2], axis=0)))


def test_gathers_by_traced_indices_match_numpy_and_raise_out_of_range(object_cache: Any) -> None:
    """np.take / take_along_axis / x[:, idx] by index arguments (negative ones too) on every
    layout, and an index out of range raises fb.IndexOutOfBounds in every arm."""
    x0 = base(np.float32, SHAPE, 3)
    i = np.array([0, -1, 5, 2, -6], np.int64)
    j = np.array([[3, -4, 0, 1, 2, -1]], np.int64)
    arms = Arms(_gathers, [x0, i, j], object_cache)
    for layout, make in LAYOUTS.items():
        x = make(x0)
        for idx in (i, i[::-1]):  # a negative-stride index argument too
            want = _gathers(x, idx, j)
            for arm, got in arms.run(x, idx, j).items():
                for k, (g, w) in enumerate(zip(got, want)):
                    check(g, w, f"gather #{k} ({layout}, {arm})")
    assert arms.fused.stats.arm0_calls == 0, arms.fused.explain(x0, i, j)
    bad = np.array([0, 1, 6, 2, 3], np.int64)
    for arm, run in (("interpreter", lambda: interpret(arms.module, x0, bad, j, *arms.hidden)),
                     ("arm 0", lambda: arms.arm0(x0, bad, j, *arms.hidden)), ("fused", lambda: arms.fused(x0, bad, j))):
        with pytest.raises(fb.IndexOutOfBounds, match="index 6 is out of bounds for axis 1 with size 6"):
            run()
