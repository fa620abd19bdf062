"""Fuzzing `fb.compile`: mutated and truncated MLIR goes all the way in.

Each input is compiled; when that succeeds, the function is called with
random arrays matching its declared argument types (dynamic dims get a
random size). Contract: success, or an `fb.FusebindError` (IR errors from
parsing/verification, ArgumentError, EntryError, UnsupportedOperation,
KernelMiss, LoweringError, IntegerPowerError...) — never a crash or another
exception type.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import scaled, seed_texts
from index_maps import fuzz_tokens, registered_index_map_kinds

SEEDS = [t for t in seed_texts() if "func.func" in t and "RUN" not in t.split("\n", 1)[0]] or seed_texts()
TOKENS = ["prim.add", "prim.exp", "prim.reduce_sum", "prim.matmul", "fused.region", "tensor<?xf32>",
          "tensor<4x8xf64>", "tensor<i32>", "{axes = [1], keepdims}", "%0", "%a", ":", ",", "->", "(", ")",
          "{", "}", "dense<1.0>", "-1", "0", "9223372036854775807", "f32", "i1", "^bb0", "fused.yield"] + fuzz_tokens()
COUNTED: list[str] = []


def documented_errors() -> tuple[type[BaseException], ...]:
    """Every error a user can cause is an `fb.FusebindError` (IR errors, ArgumentError, EntryError,
    UnsupportedOperation, KernelMiss, LoweringError, IntegerPowerError, ...): nothing else may leave."""
    from fusebind import FusebindError

    return (FusebindError,)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(("truncate", "delete", "insert", "swap-type", "swap-op", "digit")))
        pos = draw(st.integers(0, max(0, len(text) - 1)))
        if how == "truncate":
            text = text[:pos]
        elif how == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 12)):]
        elif how == "insert":
            text = text[:pos] + " " + draw(st.sampled_from(TOKENS)) + " " + text[pos:]
        elif how == "swap-type":
            text = re.sub(r"\b(f32|f64|i32|i64)\b", draw(st.sampled_from(("f32", "f64", "i32", "i64", "i1"))),
                          text, count=draw(st.integers(1, 3)))
        elif how == "swap-op":
            text = re.sub(r"prim\.(add|mul|sub|max|exp|tanh|relu|slice|gather|take_along|concat)\b", "prim." + draw(
                st.sampled_from(("add", "div", "exp", "log", "reduce_max", "matmul", "compare", "select",
                                 *registered_index_map_kinds()))), text, count=1)
        else:
            text = re.sub(r"\b\d+\b", str(draw(st.sampled_from((0, 1, 3, 1000, -1)))), text, count=1)
    return text


def arrays_for(compiled: Any, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for dtype, shape in compiled.executor.arg_types:
        dims = tuple(int(rng.integers(1, 6)) if d is None else d for d in shape)
        if np.dtype(dtype).kind == "f":
            out.append(rng.standard_normal(dims).astype(dtype))
        elif np.dtype(dtype).kind == "b":
            out.append(rng.random(dims) < 0.5)
        else:
            out.append(rng.integers(-9, 9, size=dims).astype(dtype))
    return out


def compile_and_call(text: str, seed: int) -> str:
    """The contract for one input; returns 'ran' or the error type name."""
    import fusebind as fb

    COUNTED.append(text)
    try:
        compiled = fb.compile(text)
        if sum(int(np.prod([d or 1 for d in s])) for _, s in compiled.executor.arg_types) > 1 << 22:
            return "too-big"  # a fuzzed dim of 1e18: compiled fine, not worth allocating
        with np.errstate(all="ignore"):
            compiled(*arrays_for(compiled, seed))
        return "ran"
    except documented_errors() as err:
        assert str(err), f"{type(err).__name__} without a message"
        return type(err).__name__


@settings(max_examples=scaled(150, 3000), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(text=mutated(), seed=st.integers(0, 2**16))
def test_mutated_mlir_into_fb_compile_ends_cleanly(text: str, seed: int) -> None:
    compile_and_call(text, seed)


@pytest.mark.parametrize("seed_index", range(0, len(SEEDS), max(1, len(SEEDS) // 12)))
def test_every_seed_compiles_and_runs_or_fails_cleanly(seed_index: int) -> None:
    compile_and_call(SEEDS[seed_index], seed_index)


def test_the_fuzzer_reaches_the_executor() -> None:
    """Not vacuous: unmutated seeds and light mutations do compile and run."""
    outcomes = [compile_and_call(t, i) for i, t in enumerate(SEEDS[:40])]
    assert outcomes.count("ran") >= 5, outcomes
