"""Shared machinery of the reliability suite: long-run gating, the seed corpus,
the in-process `fusebind-opt` runner, a watchdog, and small kernel helpers.

Long runs are marked `@pytest.mark.slow`; they run only with `-m slow` or
`FUSEBIND_LONG=1` (otherwise they are skipped with that reason), so the
default slice stays fast. `scaled(fast, long)` picks a budget the same way
for tests that run in both modes.
"""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = Path(__file__).resolve().parent / "corpus"

#: True when the long runs were asked for through the environment.
LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")


def scaled(fast: int, long: int) -> int:
    """The budget for this run: `long` under FUSEBIND_LONG=1, else `fast`."""
    return long if LONG else fast


@pytest.fixture(autouse=True)
def _gate_slow_tests(request: pytest.FixtureRequest) -> None:
    """Skip `slow` tests unless selected with `-m ...slow...` or FUSEBIND_LONG=1."""
    if request.node.get_closest_marker("slow") is None:
        return
    selected = "slow" in (request.config.getoption("-m") or "")
    if not (LONG or selected):
        pytest.skip("long run: select with `-m slow` or FUSEBIND_LONG=1")


# --------------------------------------------------------------------------- seeds


def _split(text: str) -> list[str]:
    import re

    return [c for c in re.split(r"^\s*// -----\s*$", text, flags=re.MULTILINE) if c.strip()]


def seed_texts() -> list[str]:
    """Every chunk of the project's own MLIR files (examples and lit tests), valid or not."""
    files = sorted((ROOT / "examples").glob("*.mlir")) + sorted((ROOT / "test" / "lit").rglob("*.mlir"))
    seeds: list[str] = []
    for path in files:
        if "Output" in path.parts:
            continue
        try:
            seeds.extend(_split(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return seeds or [FALLBACK_SEED]


FALLBACK_SEED = """func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %r = fused.region @k (%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<8xf32>, %y: tensor<8xf32>):
    %m = prim.mul %x, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    fused.yield %m : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}
"""


def corpus_files() -> list[Path]:
    """The regression corpus: inputs that once broke something (replayed forever)."""
    return sorted(p for p in CORPUS_DIR.glob("*") if p.is_file() and p.suffix in (".mlir", ".txt", ".bin"))


# --------------------------------------------------------------------------- the driver


def opt_run(argv: list[str], stdin_text: str = "") -> tuple[int, str, str]:
    """`fusebind-opt` in process with captured streams: (exit code, stdout, stderr)."""
    from fusebind.tools.opt import run_opt

    out, err = io.StringIO(), io.StringIO()
    try:
        code = run_opt(argv, io.StringIO(stdin_text), out, err)
    except Exception as exc:  # the driver's contract is an exit code, never an exception
        pytest.fail(f"fusebind-opt raised {type(exc).__name__}: {exc} for argv={argv!r}")
    return code, out.getvalue(), err.getvalue()


def check_front_door(text: str) -> str:
    """The front-door contract for one input; returns 'ok' or the error type name.

    parse_module either succeeds (and the printed module parses back to the same
    text) or raises a FusebindIRError subclass. fusebind-opt exits 0 with IR on
    stdout, or 1 with a located `error:` diagnostic and no traceback.
    """
    from fusebind.dialect import FusebindIRError, parse_module, print_module

    try:
        module = parse_module(text)
        outcome = "ok"
    except FusebindIRError as err:
        outcome = type(err).__name__
        assert str(err), "an IR error must carry a message"
        module = None
    if module is not None:
        for generic in (False, True):
            printed = print_module(module, generic=generic)
            again = parse_module(printed)
            assert print_module(again, generic=generic) == printed, "print -> parse -> print is not stable"
    code, out, err = opt_run(["-"], text)
    assert code in (0, 1), f"fusebind-opt exit code {code}"
    assert "Traceback (most recent call last)" not in err and "internal error" not in err, err
    if code == 1:
        assert "error:" in err and out == "", (out, err)
    else:
        assert err == "" or "warning" in err
    assert (code == 0) == (outcome == "ok"), f"parse_module said {outcome}, fusebind-opt exit {code}: {err}"
    return outcome


# --------------------------------------------------------------------------- concurrency


def run_threads(targets: list[Callable[[], None]], timeout: float) -> list[BaseException]:
    """Start one thread per target, join with a watchdog; fail on a hang.

    Returns the exceptions the targets raised (an empty list when all passed).
    """
    errors: list[BaseException] = []
    lock = threading.Lock()

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # collected and reported by the test
                with lock:
                    errors.append(exc)
        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    alive = [t.name for t in threads if t.is_alive()]
    if alive:
        pytest.fail(f"watchdog: {len(alive)} thread(s) still running after {timeout}s (deadlock?)")
    return errors


# --------------------------------------------------------------------------- kernels

REGION_TEMPLATE = """func.func @main(%a: tensor<{n}x{e}>, %b: tensor<{n}x{e}>) -> tensor<{n}x{e}> {{
  %r = fused.region @{name} (%a, %b) : (tensor<{n}x{e}>, tensor<{n}x{e}>) -> tensor<{n}x{e}> {{
  ^bb0(%x: tensor<{n}x{e}>, %y: tensor<{n}x{e}>):
    %m = prim.{op} %x, %y : (tensor<{n}x{e}>, tensor<{n}x{e}>) -> tensor<{n}x{e}>
    %s = prim.add %m, %x : (tensor<{n}x{e}>, tensor<{n}x{e}>) -> tensor<{n}x{e}>
    fused.yield %s : tensor<{n}x{e}>
  }}
  func.return %r : tensor<{n}x{e}>
}}
"""


def region_text(n: int = 16, op: str = "mul", elem: str = "f32", name: str = "k") -> str:
    """A module whose one fused.region computes `op(a, b) + a` on tensor<n x elem>."""
    return REGION_TEMPLATE.format(n=n, e=elem, op=op, name=name)


def region_of(module: Any) -> Any:
    return next(op for op in module.walk() if op.name == "fused.region")


def expected(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    fn = {"mul": np.multiply, "add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum}[op]
    return fn(a, b) + a


def run_kernel(kernel: Any, *inputs: np.ndarray, out_like: np.ndarray) -> np.ndarray:
    """Call a loaded Kernel on C-contiguous inputs; returns the output array."""
    from fusebind.runtime.dtypes import descriptor_for

    out = np.full_like(out_like, 7)
    kernel(*(descriptor_for(np.ascontiguousarray(a)) for a in inputs), descriptor_for(out))
    return out


def operands(n: int, seed: int = 0, dtype: Any = np.float32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)


@pytest.fixture
def isolated_state() -> Iterator[None]:
    """An empty global table and recipe registry for one test, restored afterwards."""
    from fusebind.runtime.testing import isolated_global_state

    with isolated_global_state():
        yield
