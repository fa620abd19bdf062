"""The object cache's portable layer: object code that arrived in a pickled fusebind function.

`runtime/portable.py` verifies a pickle's kernels (their sha256, the machine key) and installs
them here by object-cache key; `ObjectCache.get` (cache.py) looks here first, so the normal
optimize -> region -> key path finds them as hits and never compiles them. Process-wide like
the disk cache: a key covers everything its code depends on, so it holds in every session.
Bounded: at most `PORTABLE_LIMIT` entries, the oldest dropped first. The entries are
`cache.CachedObject`s (this module does not import cache.py, which imports it).

Must not: import `mlir` or `llvmlite`.
"""

from __future__ import annotations

import threading
from typing import Any

#: at most this many portable entries are kept (the oldest installed are dropped first)
PORTABLE_LIMIT = 4096
_PORTABLE: "dict[str, Any]" = {}
_PORTABLE_LOCK = threading.Lock()
_PORTABLE_COUNTS = {"installed": 0, "hits": 0}


def portable_put(key: str, entry: Any) -> None:
    with _PORTABLE_LOCK:
        _PORTABLE.pop(key, None)
        _PORTABLE[key] = entry  # re-inserted: the newest
        while len(_PORTABLE) > PORTABLE_LIMIT:
            del _PORTABLE[next(iter(_PORTABLE))]


def install_portable(entries: "dict[str, Any]") -> int:
    """Install verified object code by object-cache key (runtime/portable.py checks hashes
    and the machine key first); returns how many keys were new."""
    new = 0
    for key, entry in entries.items():
        new += key not in _PORTABLE
        portable_put(key, entry)
    with _PORTABLE_LOCK:
        _PORTABLE_COUNTS["installed"] += new
    return new


def portable_get(key: str) -> Any:
    """The installed portable entry for `key`, or None."""
    entry = _PORTABLE.get(key)
    if entry is not None:
        with _PORTABLE_LOCK:
            _PORTABLE_COUNTS["hits"] += 1
    return entry


def portable_counts() -> dict[str, int]:
    """{"entries": held now, "installed": keys ever installed, "hits": lookups served}."""
    with _PORTABLE_LOCK:
        return {"entries": len(_PORTABLE), **_PORTABLE_COUNTS}


def clear_portable() -> None:
    """Drop every portable entry (tests; a process that no longer wants them)."""
    with _PORTABLE_LOCK:
        _PORTABLE.clear()


def portable_active() -> bool:
    """Does the layer hold anything (then every cache serves it, even one that is off)?"""
    return bool(_PORTABLE)
