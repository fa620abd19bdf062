"""Suite-wide isolation: every test run gets its own object cache directory,
so tests never read or write the user's `$XDG_CACHE_HOME/fusebind`, and
prices with the documented default machine model (`FUSEBIND_MACHINE=default`:
deterministic decisions, no calibration per session). Tests of the measured
model opt in explicitly (test/runtime/test_calibrate.py). `FUSEBIND_STRICT=1`:
an internal error while compiling a region raises instead of running the
region unfused, so bugs cannot hide as "not fused".

A test that needs the default location sets the environment itself
(pytest's `monkeypatch.setenv`)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_OWN_CACHE: list[str] = []


def pytest_configure(config: object) -> None:
    if "FUSEBIND_CACHE_DIR" not in os.environ:
        path = tempfile.mkdtemp(prefix="fusebind-test-cache-")
        _OWN_CACHE.append(path)
        os.environ["FUSEBIND_CACHE_DIR"] = path
    os.environ.setdefault("FUSEBIND_MACHINE", "default")
    # a fusebind bug while compiling raises instead of degrading silently to arm 0 (runtime/jit.py)
    os.environ.setdefault("FUSEBIND_STRICT", "1")


def pytest_unconfigure(config: object) -> None:
    for path in _OWN_CACHE:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def c_library(tmp_path):
    """`c_library(name, source)`: `source` compiled by `cc` into `tmp_path/lib<name>.so` (its path);
    the test is skipped, with the reason, when the host has no C compiler."""
    import subprocess

    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) on PATH to build the shared library")

    def build(name: str, source: str):
        src = tmp_path / f"{name}.c"
        src.write_text(source)
        lib = tmp_path / f"lib{name}.so"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True, timeout=120)
        return lib
    return build
