"""Bug 12: verify_action="warn" returns arm 0's values after a mismatch, and
the plan stops running that fused arm (explain says why)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.runtime.fused_kernels import adopt_runtime_fused
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.arms import FusedArmMismatchWarning

pytestmark = pytest.mark.usefixtures("isolated_bindings")

N = 256


def _module(op: str, fused: bool) -> str:
    t = f"tensor<{N}xf32>"
    body = (f"  %m = prim.{op} %a, %b : ({t}, {t}) -> {t}\n"
            f"  %s = prim.add %m, %a : ({t}, {t}) -> {t}\n")
    if not fused:
        return f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n{body}  func.return %s : {t}\n}}\n"
    inner = body.replace("%a", "%x").replace("%b", "%y")
    return (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %r = fused.region @k (%a, %b) : ({t}, {t}) -> {t} {{\n  ^bb0(%x: {t}, %y: {t}):\n{inner}"
            f"    fused.yield %s : {t}\n  }}\n  func.return %r : {t}\n}}\n")


def _region(op: str):
    return next(o for o in parse_module(_module(op, True)).walk() if o.name == "fused.region")


def _adopt_wrong_kernel(tmp_path) -> None:
    """The kernel of `a - b + a`, adopted for the recipe `a * b + a`."""
    cache = ObjectCache(tmp_path / "cache")
    wrong = decompose_region(_region("sub"), cache=cache)
    right = decompose_region(_region("mul"), cache=cache)
    adopt_runtime_fused("k", _region("mul"), Kernel.from_decomposition(wrong), ["f32"] * 3, "cpu", cost=right.cost)


def _vectors(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)


def test_warn_mode_returns_arm0_values_and_stops_running_the_fused_arm(tmp_path) -> None:
    _adopt_wrong_kernel(tmp_path)
    f = fb.compile(_module("mul", False), verify=True, verify_action="warn")
    a, b = _vectors(1)
    with pytest.warns(FusedArmMismatchWarning, match=r"differs from arm 0 .*arm 0's values are returned"):
        first = f(a, b)
    np.testing.assert_array_equal(first, a * b + a)
    assert f.stats.arms.fused_calls == 1
    a2, b2 = _vectors(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the plan does not run (or warn about) that arm again
        second = f(a2, b2)
    np.testing.assert_array_equal(second, a2 * b2 + a2)
    np.testing.assert_array_equal(first, a * b + a)  # the first result is not a buffer the plan reuses
    assert f.stats.arms.fused_calls == 1 and f.stats.arms.arm0_calls == 1
    assert "chosen: arm 0 -- fused arm (FusedOpId " in f.explain(a, b)
    assert "differed from arm 0 under verify (warned)" in f.explain(a, b)


def test_raise_mode_still_raises_on_every_call(tmp_path) -> None:
    from fusebind.runtime.executor import FusedArmMismatch

    _adopt_wrong_kernel(tmp_path)
    f = fb.compile(_module("mul", False), verify=True)
    for seed in range(2):
        with pytest.raises(FusedArmMismatch, match=r"the fused arm differs from arm 0 in \d+ of 256 elements"):
            f(*_vectors(seed))


def test_a_right_kernel_adopted_after_a_failed_one_runs_even_when_priced_higher(tmp_path) -> None:
    """The row verify found wrong is passed over (not just the region): a
    correct kernel adopted later runs fused, although it is predicted slower
    than the wrong one, and explain says why the wrong row lost."""
    from fusebind.compiler.cost import CostEstimate

    _adopt_wrong_kernel(tmp_path)
    f = fb.compile(_module("mul", False), verify=True, verify_action="warn")
    a, b = _vectors(1)
    with pytest.warns(FusedArmMismatchWarning):
        f(a, b)
    right = decompose_region(_region("mul"), cache=ObjectCache(tmp_path / "cache"))
    c = right.cost
    adopt_runtime_fused("k", _region("mul"), Kernel.from_decomposition(right), ["f32"] * 3, "cpu",
                        cost=CostEstimate(c.flops, c.bytes, c.ns * 1.5, "declared"))
    a2, b2 = _vectors(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(f(a2, b2), a2 * b2 + a2)
    assert f.stats.arms.fused_calls == 2
    text = f.explain(a2, b2)
    assert "row 1 of 2: llvm:" in text and "chosen: fused RuntimeFused(" in text
    assert "row 0 not used: llvm:" in text and "-- failed verify in this function: not run again" in text
