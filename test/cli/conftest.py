"""Fixtures for the `fusebind` command tests: one object cache per session."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def cli_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """FUSEBIND_CACHE_DIR in a session temp dir, for in-process runs and subprocesses."""
    path = tmp_path_factory.mktemp("fusebind-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FUSEBIND_CACHE_DIR", str(path))
        yield path

