"""The kernel error channel end to end (kernel ABI v2): a fused gather by indices computed inside
the function is checked in its kernel, and a bad index raises fb.IndexOutOfBounds after the call,
with numpy's words, naming the function and the argument the index came from; in range, numpy's
values; the plan, the table and the fast path are fine after an error (the next call works).

One module-wide table (isolated); three kernels serve every case."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

import fusebind as fb
from fusebind.runtime.testing import isolated_global_state

# np.take(x, idx % 7 + 3, axis=0) * 2: the gather's index is computed, so only the kernel can
# check it (no call-time check of an argument, no in_bounds promise). The indices come first:
# the region reads them first, so its operands are the function's arguments (the fast path).
TEXT = """
func.func @{name}(%{b}: tensor<6xi64>, %{a}: tensor<5x3xf32>) -> tensor<6x3xf32> {{
  %seven = prim.constant dense<7> : tensor<i64>
  %three = prim.constant dense<3> : tensor<i64>
  %m = prim.rem %{b}, %seven : (tensor<6xi64>, tensor<i64>) -> tensor<6xi64>
  %j = prim.add %m, %three : (tensor<6xi64>, tensor<i64>) -> tensor<6xi64>
  %g = prim.gather %{a}, %j {{axis = 0}} : (tensor<5x3xf32>, tensor<6xi64>) -> tensor<6x3xf32>
  %two = prim.constant dense<2.0> : tensor<f32>
  %r = prim.mul %g, %two : (tensor<6x3xf32>, tensor<f32>) -> tensor<6x3xf32>
  func.return %r : tensor<6x3xf32>
}}
"""

X = np.arange(15, dtype=np.float32).reshape(5, 3).copy()
GOOD = np.array([0, 1, 7, -6, -7, 8], np.int64)  # % 7 + 3 -> 3, 4, 3, 4, 3, 4
BAD = np.array([0, 1, 2, -6, 9, 8], np.int64)  # % 7 + 3 -> 5 at position 2 (first), 5 at 4


def want(idx: np.ndarray) -> np.ndarray:
    return np.take(X, idx % 7 + 3, axis=0) * 2


def message(fn: str, arg: str, index: int = 5) -> str:
    return (rf"^fusebind: in '{fn}': prim\.gather: index {index} is out of bounds for axis 0 with size 5 "
            rf"\(from argument '{arg}'; checked in the kernel llvm:")


@pytest.fixture(scope="module", autouse=True)
def table() -> Iterator[None]:
    with isolated_global_state():
        yield


@pytest.fixture(scope="module")
def f() -> fb.CompiledFunction:
    return fb.compile(TEXT.format(name="f", a="x", b="idx"))


def test_numpy_is_what_the_kernel_checks() -> None:
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        np.take(X, BAD % 7 + 3, axis=0)


def test_in_range_values_then_the_error_then_values_again(f: fb.CompiledFunction) -> None:
    np.testing.assert_array_equal(f(GOOD, X), want(GOOD))
    assert f.executor.fast is not None  # one fused kernel: the fast path checks the status itself
    for _ in range(2):  # the plan, the fast path and the table survive the error
        with pytest.raises(fb.IndexOutOfBounds, match=message("f", "idx")) as info:
            f(BAD, X)
        assert isinstance(info.value, IndexError) and isinstance(info.value, fb.FusebindError)
        np.testing.assert_array_equal(f(GOOD[::-1].copy(), X), want(GOOD[::-1]))
    stats = f.executor.stats
    assert stats.arms.arm0_calls == 0 and stats.arms.fused_calls >= 3, stats  # the kernel checked, not arm 0


def test_the_first_bad_index_in_loop_order_and_negative_ones(f: fb.CompiledFunction) -> None:
    idx = np.array([0, 1, 0, -6, 9, 5], np.int64)  # 9 -> 5 first, then 5 -> 8
    with pytest.raises(fb.IndexOutOfBounds, match=message("f", "idx", 5)):
        f(idx, X)
    with pytest.raises(fb.IndexOutOfBounds, match=message("f", "idx", 8)):
        f(np.array([0, 5, 9, 0, 0, 0], np.int64), X)


def test_out_is_not_returned_after_an_error(f: fb.CompiledFunction) -> None:
    out = np.empty((6, 3), np.float32)
    with pytest.raises(fb.IndexOutOfBounds, match=message("f", "idx")):
        f(BAD, X, out=out)
    assert f(GOOD, X, out=out) is out
    np.testing.assert_array_equal(out, want(GOOD))


def test_the_argument_is_named_per_function_not_per_kernel(f: fb.CompiledFunction) -> None:
    """A second function of the same region reuses the kernel; its error names its own argument."""
    g = fb.compile(TEXT.format(name="g", a="table", b="labels"))
    f(GOOD, X)
    with pytest.raises(fb.IndexOutOfBounds, match=message("g", "labels")):
        g(BAD, X)
    with pytest.raises(fb.IndexOutOfBounds, match=message("f", "idx")):
        f(BAD, X)


def test_jit_of_computed_indices_on_the_plan_path() -> None:
    """fb.jit of np.take(x, idx % 7 + 3): the region reads idx first, so its operands are not the
    call's arguments in order (no fast path): the executor names the argument."""

    @fb.jit
    def take3(x, idx):
        return np.take(x, idx % 7 + 3, axis=0) * 2

    np.testing.assert_array_equal(take3(X, GOOD), want(GOOD))
    assert take3._fast is None
    with pytest.raises(fb.IndexOutOfBounds, match=message("take3", "idx")):
        take3(X, BAD)
    np.testing.assert_array_equal(take3(X, GOOD[::-1].copy()), want(GOOD[::-1]))
    assert take3.stats.arm0_calls == 0 and take3.stats.fused_calls == 2, take3.stats


def test_jit_take_along_a_view_of_the_labels_into_a_sum() -> None:
    """Cross-entropy's pick (take_along_axis by labels[:, None] + 1, then a sum) is one fused
    kernel; the index operand is a view of the argument made outside it, and is named."""
    logits = np.arange(8 * 10, dtype=np.float32).reshape(8, 10) / 7

    @fb.jit
    def pick(logits, labels):
        return np.take_along_axis(logits, labels[:, None] + 1, axis=1).sum()

    labels = np.array([0, -2, 8, 3, -11, 5, 1, 2])
    np.testing.assert_allclose(pick(logits, labels), np.take_along_axis(logits, labels[:, None] + 1, 1).sum(),
                               rtol=1e-6)
    bad = labels.copy()
    bad[2] = 9
    with pytest.raises(fb.IndexOutOfBounds, match=r"^fusebind: in 'pick': prim\.take_along: index 10 is out of "
                                                  r"bounds for axis 1 with size 10 \(from argument 'labels'"):
        pick(logits, bad)
    assert pick.stats.arm0_calls == 0, pick.stats
