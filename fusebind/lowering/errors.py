"""The one error type of the lowering pipeline, and how it writes reproducers.

Owns: `LoweringError` and `write_reproducer`. Every failure between a prim
region and a loaded kernel surfaces as a `LoweringError` that names the stage,
carries the IR at that stage and a command that reproduces the failure.
Must not: import `mlir` or `llvmlite` (the error has to be constructible on a
cache hit, where neither is loaded).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from fusebind.dialect.errors import FusebindError, FusebindValueError

STAGES = ("emit", "mlir-parse", "mlir-passes", "translate", "llvm-parse", "llvm-opt", "codegen", "load")

_SUFFIX = {"emit": ".mlir", "mlir-parse": ".mlir", "mlir-passes": ".mlir", "translate": ".mlir"}


class LoweringError(FusebindError, RuntimeError):
    """A failure at one stage of prim -> linalg -> LLVM IR -> object -> kernel.

    Attributes:
        stage: one of `STAGES`.
        message: what went wrong (MLIR/LLVM diagnostics included).
        ir: the IR text that was the input of the failing stage ("" if none).
        reproducer: a shell command that replays the failing stage on `ir`.
    """

    def __init__(self, stage: str, message: str, ir: str = "", reproducer: str = "") -> None:
        if stage not in STAGES:
            raise FusebindValueError(f"LoweringError: unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
        self.stage = stage
        self.message = message
        self.ir = ir
        self.reproducer = reproducer
        text = f"lowering failed at stage '{stage}': {message}"
        if reproducer:
            text += f"\n  reproduce with: {reproducer}"
        super().__init__(text)

    @classmethod
    def at(cls, stage: str, message: str, ir: str = "", pipeline: str | None = None) -> "LoweringError":
        """Build the error and, when there is IR, write it to a reproducer file."""
        reproducer = write_reproducer(stage, ir, pipeline) if ir else ""
        return cls(stage, message, ir, reproducer)


def _repro_dir() -> Path:
    base = os.environ.get("FUSEBIND_CACHE_DIR")
    root = Path(base) if base else Path(tempfile.gettempdir())
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        return Path(tempfile.mkdtemp(prefix="fusebind-repro-", dir=root))
    except OSError:
        return Path(tempfile.mkdtemp(prefix="fusebind-repro-"))


def write_reproducer(stage: str, ir: str, pipeline: str | None = None) -> str:
    """Write `ir` to a fresh file and return the command that replays `stage` on it.

    Never raises: if nothing can be written, the command says so.
    """
    try:
        path = _repro_dir() / f"{stage}{_SUFFIX.get(stage, '.ll')}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(ir)
    except OSError as exc:
        return f"(could not write the IR for a reproducer: {exc})"
    cmd = f"{sys.executable} -m fusebind.lowering.repro --stage {stage} {path}"
    if pipeline:
        cmd += f" --pipeline '{pipeline}'"
    return cmd
