"""The torch tests' gate: `slow` tests (the whole aten sweep, every float dtype) run only with
`-m slow` or FUSEBIND_LONG=1, as test/reliability's."""

from __future__ import annotations

import os

import pytest

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")


@pytest.fixture(autouse=True)
def _gate_slow_tests(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("slow") is None:
        return
    if not (LONG or "slow" in (request.config.getoption("-m") or "")):
        pytest.skip("long run: select with `-m slow` or FUSEBIND_LONG=1")
