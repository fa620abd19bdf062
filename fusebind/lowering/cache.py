"""The on-disk object cache.

Owns: `ObjectCache` (one directory of object files), `cache_key` and
`ObjectCache.from_env()` (where the cache lives: `$FUSEBIND_CACHE_DIR`, else
`$XDG_CACHE_HOME/fusebind`, else `~/.cache/fusebind`; `FUSEBIND_CACHE=0`
turns it off).

An entry is `MAGIC`, the sha256 of `symbol + b"\n" + code`, the symbol, then
the object bytes (an entry of another `MAGIC`, e.g. written by an older
fusebind, is treated like a corrupt one: a miss, rebuilt and overwritten). It
is written to a temp file in the same directory and renamed into
place (atomic on POSIX), so several processes can share one cache; readers
verify the hash and treat a corrupt or truncated entry as a miss (it is then
rebuilt and overwritten). Files are created 0o600 in a 0o700 directory. A
read-only or full directory only costs the cache: the first failed write
warns, later ones are silent, compilation goes on. A writer killed between
creating its temp file and the rename leaves a `.tmp-*` file that no reader
ever opens; `put` removes such files older than `STALE_TEMP_SECONDS`, best
effort (a failure to sweep never fails the put).

Must not: import `mlir` or `llvmlite` (a hit has to be cheap).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The entry format. FBOBJ2: the hash covers the symbol line too (FBOBJ1 hashed the code only).
MAGIC = b"FBOBJ2\n"
# Bump when emit.py / pipeline.py change what a given key compiles to.
FORMAT_VERSION = "1"
# A temp file this old belongs to a writer that died (a live one renames within seconds).
STALE_TEMP_SECONDS = 3600.0
TEMP_PREFIX = ".tmp-"


class CacheWarning(UserWarning):
    """The object cache could not be written; compilation continues without it."""


def cache_key(**parts: Any) -> str:
    """A stable hex key over JSON-serialisable parts (recipe, dtypes, shapes, target …)."""
    text = json.dumps({"format": FORMAT_VERSION, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class CachedObject:
    symbol: str
    object_code: bytes


@dataclass
class ObjectCache:
    """A directory of cached object files (or, with `directory=None`, no cache)."""

    directory: Path | None
    _warned: bool = field(default=False, repr=False)
    hits: int = 0
    misses: int = 0

    @staticmethod
    def from_env(env: dict[str, str] | None = None) -> "ObjectCache":
        env = dict(os.environ) if env is None else env
        if env.get("FUSEBIND_CACHE", "1").strip().lower() in ("0", "false", "off", "no"):
            return ObjectCache(None)
        if env.get("FUSEBIND_CACHE_DIR"):
            return ObjectCache(Path(env["FUSEBIND_CACHE_DIR"]))
        base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return ObjectCache(Path(base) / "fusebind")

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    def path_of(self, key: str) -> Path:
        if self.directory is None:
            raise ValueError("ObjectCache: the cache is disabled (FUSEBIND_CACHE=0); there is no path")
        return self.directory / f"{key}.o"

    def get(self, key: str) -> CachedObject | None:
        """The entry for `key`, or None if absent, unreadable or corrupt."""
        if self.directory is None:
            return None
        try:
            data = self.path_of(key).read_bytes()
        except OSError:
            self.misses += 1
            return None
        entry = _decode(data)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def put(self, key: str, entry: CachedObject) -> bool:
        """Store atomically. Returns False (and warns once) if the directory cannot take it."""
        if self.directory is None:
            return False
        if "\n" in entry.symbol:
            raise ValueError(f"ObjectCache.put: the symbol {entry.symbol!r} contains a newline; "
                             "an entry stores it on one line (kernel symbols are fb_ + alphanumerics)")
        tmp: str | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".o", dir=self.directory)  # created 0o600
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(entry))
            os.replace(tmp, self.path_of(key))
            tmp = None
            self.sweep_stale_temps()
            return True
        except OSError as exc:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if not self._warned:
                self._warned = True
                warnings.warn(f"fusebind: cannot write the object cache in {self.directory} ({exc}); "
                              "compiling without caching. Set FUSEBIND_CACHE_DIR to a writable directory "
                              "or FUSEBIND_CACHE=0 to silence this.", CacheWarning, stacklevel=3)
            return False

    def sweep_stale_temps(self, older_than: float = STALE_TEMP_SECONDS) -> int:
        """Remove `.tmp-*` files not modified for `older_than` seconds (left by
        writers that died before their rename). Best effort: never raises;
        returns how many were removed."""
        if self.directory is None:
            return 0
        cutoff = time.time() - older_than
        removed = 0
        try:
            with os.scandir(self.directory) as entries:
                for e in entries:
                    if not e.name.startswith(TEMP_PREFIX):
                        continue
                    try:
                        if e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_mtime < cutoff:
                            os.unlink(e.path)
                            removed += 1
                    except OSError:  # gone already (another sweeper), or not ours to remove
                        continue
        except OSError:
            pass
        return removed


@functools.lru_cache(maxsize=16)
def _shared(directory: str | None) -> ObjectCache:
    return ObjectCache(Path(directory) if directory is not None else None)


def default_cache() -> ObjectCache:
    """The cache the environment names, one instance per directory per process
    (so a read-only directory warns once, and hit/miss counts accumulate)."""
    where = ObjectCache.from_env().directory
    return _shared(str(where) if where is not None else None)


def _digest(symbol: bytes, code: bytes) -> bytes:
    h = hashlib.sha256(symbol)
    h.update(b"\n")
    h.update(code)
    return h.hexdigest().encode()


def _encode(entry: CachedObject) -> bytes:
    symbol = entry.symbol.encode()
    return MAGIC + _digest(symbol, entry.object_code) + b"\n" + symbol + b"\n" + entry.object_code


def _decode(data: bytes) -> CachedObject | None:
    if not data.startswith(MAGIC):
        return None
    rest = data[len(MAGIC):]
    digest, sep, rest = rest.partition(b"\n")
    symbol, sep2, code = rest.partition(b"\n")
    if not sep or not sep2 or not code:
        return None
    if _digest(symbol, code) != digest:
        return None
    try:
        return CachedObject(symbol.decode(), code)
    except UnicodeDecodeError:
        return None
