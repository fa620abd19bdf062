"""Runs the lit suite under test/lit once, and reports one pytest item per lit file.

So `python -m pytest` is the single test command: a failing lit test fails
the pytest item of the same name, with lit's output attached.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

LIT_ROOT = Path(__file__).parent / "lit"


def _lit_files() -> list[Path]:
    files = []
    for path in sorted(LIT_ROOT.rglob("*")):
        if path.suffix not in (".mlir", ".py") or path.name == "lit.cfg.py" or "Output" in path.parts:
            continue
        if "RUN:" in path.read_text(errors="replace"):
            files.append(path)
    return files


@pytest.fixture(scope="session")
def lit_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    out = tmp_path_factory.mktemp("lit") / "results.xml"
    env = dict(os.environ)
    env.setdefault("FUSEBIND_CACHE_DIR", str(tmp_path_factory.mktemp("lit-cache")))
    proc = subprocess.run(
        [sys.executable, "-c", "from lit.main import main; main()", "-q", "--xunit-xml-output", str(out), str(LIT_ROOT)],
        capture_output=True, text=True, env=env,
    )
    if not out.exists():
        pytest.fail(f"lit did not run:\n{proc.stdout}\n{proc.stderr}")
    results: dict[str, tuple[str, str]] = {}
    for case in ET.parse(out).getroot().iter("testcase"):
        # lit names a case by suite name plus its folder path (dots), then file name.
        folder = case.get("classname", "").partition(".")[2].replace(".", "/")
        name = f"{folder}/{case.get('name', '')}" if folder else case.get("name", "")
        failure = case.find("failure")
        skipped = case.find("skipped")
        if failure is not None:
            results[name] = ("fail", failure.text or "")
        elif skipped is not None:
            results[name] = ("skip", skipped.get("message", ""))
        else:
            results[name] = ("pass", "")
    return results


@pytest.mark.parametrize("path", _lit_files(), ids=lambda p: str(p.relative_to(LIT_ROOT)))
def test_lit(path: Path, lit_results: dict[str, tuple[str, str]]) -> None:
    rel = str(path.relative_to(LIT_ROOT))
    status = lit_results.get(rel)
    if status is None:
        pytest.fail(f"lit reported nothing for {rel}; known: {sorted(lit_results)[:5]}…")
    kind, text = status
    if kind == "skip":
        pytest.skip(text or "lit marked it unsupported")
    assert kind == "pass", text
