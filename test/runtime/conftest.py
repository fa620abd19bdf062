"""Fixtures for runtime tests: isolate the global binding table and recipes."""

from __future__ import annotations

from typing import Iterator

import pytest

from fusebind.runtime.testing import isolated_global_state


@pytest.fixture
def isolated_bindings() -> Iterator[None]:
    """An empty global table and recipe registry for one test; the previous
    state (e.g. static kernels registered at import) is restored afterwards."""
    with isolated_global_state():
        yield
