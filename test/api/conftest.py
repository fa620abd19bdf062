"""Fixtures for API tests: one object cache per session, an isolated table per test."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from fusebind.lowering import ObjectCache
from fusebind.runtime.testing import isolated_global_state


@pytest.fixture(scope="session")
def object_cache(tmp_path_factory: pytest.TempPathFactory) -> ObjectCache:
    return ObjectCache(Path(tmp_path_factory.mktemp("fusebind-api-cache")))


@pytest.fixture(autouse=True)
def isolated_bindings() -> Iterator[None]:
    with isolated_global_state():
        yield
