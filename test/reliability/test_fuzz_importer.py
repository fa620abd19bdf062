"""Fuzzing the ONNX importer: ONNX files are untrusted input (issue 19).

Mutated protobuf bytes of the shipped models (test/onnx's transformer block and models of onnx's
backend suite, `fuzz/fuzz_importer.py` `seed_models`) go into `import_model` as bytes: the default,
untrusted path, so onnx's C++ passes run in the importer's child process. Structured edits (a dim,
a name, an op type, an attribute, an opset, a data type, a data location) and truncations.
Contract (`check_one`): an ImportedModel or an `fb.FusebindError` with a message, never another
exception; a crash is a finding of the atheris run, which runs in its own process.
The regression corpus (corpus/onnx/) is replayed on every run.
"""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS_DIR, LONG, ROOT, scaled

pytest.importorskip("onnx", reason="the ONNX importer needs onnx (pip install 'fusebind[onnx]')")

_spec = importlib.util.spec_from_file_location("fuzz_importer", ROOT / "fuzz" / "fuzz_importer.py")
fuzz_importer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz_importer)  # type: ignore[union-attr]

SEEDS = fuzz_importer.seed_models()
NAMES = sorted(SEEDS)
ONNX_CORPUS = CORPUS_DIR / "onnx"

FUZZ = settings(max_examples=scaled(40, 3000), deadline=None, derandomize=not LONG,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(st.sampled_from(NAMES), st.integers(0, 2 ** 32 - 1), st.integers(1, 4))
def test_structured_mutations_import_or_fail_cleanly(name: str, seed: int, edits: int) -> None:
    fuzz_importer.check_one(fuzz_importer.mutated_bytes(SEEDS[name], random.Random(seed), edits))


@FUZZ
@given(st.sampled_from(NAMES), st.data())
def test_truncated_and_bit_flipped_bytes_import_or_fail_cleanly(name: str, data: st.DataObject) -> None:
    raw = bytearray(SEEDS[name])
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
    fuzz_importer.check_one(bytes(raw))


def test_every_seed_imports() -> None:
    """The seeds are models the importer takes (the fuzzer starts from valid inputs)."""
    assert len(SEEDS) >= 10
    outcomes = {name: fuzz_importer.check_one(data) for name, data in SEEDS.items()}
    assert outcomes["transformer_block"] == "ok"
    assert sum(o == "ok" for o in outcomes.values()) >= len(SEEDS) - 2, outcomes


@pytest.mark.parametrize("path", sorted(ONNX_CORPUS.glob("*.onnx")), ids=lambda p: p.name)
def test_the_onnx_regression_corpus_replays_cleanly(path: Path) -> None:
    outcome = fuzz_importer.check_one(path.read_bytes())
    expected = path.name.split("--", 1)[0]  # "<ErrorClass>--<what>.onnx": the outcome it must keep
    assert outcome == expected, (path.name, outcome)


@pytest.mark.parametrize("path", sorted((CORPUS_DIR / "onnx_traced").glob("*.onnx")), ids=lambda p: p.name)
def test_the_traced_onnx_corpus_replays_cleanly_under_a_memory_limit(path: Path) -> None:
    """Models whose attributes claim huge intermediates (a Conv padded by 2^31 once made numpy allocate
    16 GiB while tracing): imported and traced in a child limited to 4 GiB of address space, each
    keeps its outcome ("<ErrorClass>--<what>.onnx") instead of a MemoryError or a kill."""
    script = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
              f"sys.path.insert(0, {str(ROOT / 'fuzz')!r})\n"
              f"import fuzz_importer\n"
              f"print(fuzz_importer.check_one(open({str(path)!r}, 'rb').read(), trace=True))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == path.name.split("--", 1)[0]


def test_atheris_importer_harness_runs_bounded_without_crashes(tmp_path: Path) -> None:
    pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris)")
    seconds = scaled(5, 600)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, data in SEEDS.items():
        (corpus / f"{name}.onnx").write_bytes(data)
    proc = subprocess.run([sys.executable, str(ROOT / "fuzz" / "fuzz_importer.py"), f"-max_total_time={seconds}",
                           "-timeout=120", "-rss_limit_mb=4096", "-seed=12345", str(corpus)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=seconds + 300)
    crashes = sorted(p.name for p in tmp_path.glob("crash-*")) + sorted(p.name for p in tmp_path.glob("timeout-*"))
    assert proc.returncode == 0 and not crashes, (crashes, proc.stderr[-3000:])
    assert "Done" in proc.stderr and " runs in " in proc.stderr
