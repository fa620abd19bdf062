"""Internal errors that must not hide: raise under FUSEBIND_STRICT=1, else warn once and degrade.

Where a failure is a fusebind bug (an exception that is not an `fb` error) but users must still
get an answer (a region runs on arm 0, a primitive on its numpy reference), the caller degrades
and calls `internal_bug(what, err, fallback)`. With `FUSEBIND_STRICT=1`, which the test suite
sets, that raises `FusebindInternalError`, so a bug can never pass as "not fused"; otherwise it
warns once per exception type per process (`InternalErrorWarning`).
"""

from __future__ import annotations

import os
import threading
import warnings

from fusebind.dialect.errors import FusebindInternalError


class InternalErrorWarning(UserWarning):
    """A fusebind bug was met; the work ran the always-runnable way (arm 0, a numpy reference)."""


#: exception types already warned about: one warning per type per process, like the warnings
#: module's own registry (which a caller's filters may reset)
_WARNED: set[type] = set()
_WARNED_LOCK = threading.Lock()


def strict_mode() -> bool:
    """FUSEBIND_STRICT=1: internal errors raise instead of degrading (the test suite sets it)."""
    return os.environ.get("FUSEBIND_STRICT", "").strip() in ("1", "true", "yes", "on")


def internal_bug(what: str, err: BaseException, fallback: str) -> None:
    """`err` (not an fb error) happened while `what`: raise in strict mode, else warn once that
    `fallback` runs instead."""
    what = f"{what}: {type(err).__name__}: {err}"
    if strict_mode():
        raise FusebindInternalError(f"fusebind internal error while {what} (FUSEBIND_STRICT=1)") from err
    with _WARNED_LOCK:
        if type(err) in _WARNED:
            return
        _WARNED.add(type(err))
    warnings.warn(f"fusebind internal error while {what}; {fallback}. Please report it; set "
                  "FUSEBIND_STRICT=1 to raise instead", InternalErrorWarning, stacklevel=3)
