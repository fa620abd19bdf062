"""Fixtures for the lowering tests: a per-session object cache directory.
Helpers live in lowering_helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusebind.lowering import ObjectCache


@pytest.fixture(scope="session")
def object_cache(tmp_path_factory: pytest.TempPathFactory) -> ObjectCache:
    return ObjectCache(Path(tmp_path_factory.mktemp("fusebind-cache")))
