"""An internal error while compiling a region (an exception that is not an fb error, e.g. an
emitter bug) never hides as "not fused": FUSEBIND_STRICT=1 (the suite's setting) raises
`FusebindInternalError`; without it, the region runs on arm 0 with one `InternalErrorWarning`
per exception type, and `explain()`'s diagnostics keep the error."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusebind as fb
from fusebind.lowering import ObjectCache, emitter
from fusebind.runtime import jit, strict
from fusebind.runtime.jit import InternalErrorWarning


@pytest.fixture
def broken_exp(monkeypatch: pytest.MonkeyPatch) -> None:
    """An emitter bug: every elementwise body raises AttributeError."""
    def boom(*args: object, **kwargs: object) -> None:
        raise AttributeError("planted emitter bug")

    monkeypatch.setattr(emitter.Emitter, "elementwise", boom)


pytestmark = pytest.mark.usefixtures("isolated_bindings")  # no kernel of this recipe is bound yet


def f(x: np.ndarray) -> np.ndarray:
    return fb.exp(x) * 2.0 + 1.0


def test_strict_mode_raises_an_internal_error(broken_exp: None, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("FUSEBIND_STRICT", "1")
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    with pytest.raises(fb.FusebindError, match="planted emitter bug") as info:
        fb.jit(f, cache=ObjectCache(tmp_path))(x)
    # where the bug surfaces first: compiling the region, or (when exp's static kernel is not yet
    # built in this process) the arm-0 plan's static kernel, which before issue 12 hid it behind a
    # broad except and ran the op's numpy reference
    assert str(info.value).startswith(("fusebind internal error while compiling region @ew_exp_mul_add: ",
                                       "fusebind internal error while building the static kernel of prim.exp: "))
    assert "AttributeError: planted emitter bug" in str(info.value)
    assert isinstance(info.value.__cause__, AttributeError)


def test_without_strict_mode_it_warns_once_and_runs_arm0(broken_exp: None, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path) -> None:
    monkeypatch.setenv("FUSEBIND_STRICT", "0")
    monkeypatch.setattr(strict, "_WARNED", set())
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    g = fb.jit(f, cache=ObjectCache(tmp_path))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = g(x)
        g(np.linspace(-1, 1, 128, dtype=np.float32))  # a second region compile: same bug, no second warning
    np.testing.assert_allclose(got, np.exp(x) * 2 + 1, rtol=1e-6)
    bugs = [w for w in seen if issubclass(w.category, InternalErrorWarning)]
    assert len(bugs) == 1 and "planted emitter bug" in str(bugs[0].message)
    assert g.stats.fused_calls == 0 and g.stats.arm0_calls == 2
