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

The cache holds code this process will run, so it trusts a directory only
if no one else can write into it (`directory_problem`, the rule ssh applies
to `~/.ssh`): the directory and each parent up to the home directory
(inclusive), or up to `/` when it lies outside home, must be owned by the
current user or root and not writable by group or others. Symlinks are
resolved first and the canonical path is the one used. Two refinements:
- a *parent* (never the cache directory itself) that is group/other
  writable but has the sticky bit, like `/tmp`, passes: there only a file's
  owner can rename or remove it, so our own 0700 directory below cannot be
  swapped. The cache directory itself must not be writable by anyone else,
  sticky or not (others could add entries under keys not yet written);
- write bits do not count on a read-only mount (no one can write there).
A directory that fails is refused: one `CacheWarning` per directory per
process says why and how to fix it, the cache is off, nothing is written
there. Directories fusebind creates are created 0o700 (each missing level)
and checked again after creation (someone may have got there first). An
entry is opened with `O_NOFOLLOW` and checked with `fstat` on the open
descriptor: a regular file owned by the current user, not writable by group
or others; anything else (a symlink, another user's file) is a miss and is
never read (`read_private_file`; calibrate.py reads the machine model the
same way).

A key includes the `op_fingerprint` of each user op its parts name (see `cache_key`).

The portable layer (docs/PORTABLE.md): object code that arrived in a pickled
fusebind function (`runtime/portable.py` verified its hashes and the machine
key) is installed here by key (`install_portable`), process-wide like the
disk cache (`portable_layer.py`; the key covers everything the code depends on, so it holds in
every session). Every `ObjectCache.get` looks there first, so the normal
optimize -> region -> key path finds such a kernel as a hit and never
compiles it; while the layer holds anything, even a cache that is off
(`FUSEBIND_CACHE=0`) is `enabled` for it and keeps what it builds in memory.
It is bounded (`PORTABLE_LIMIT` entries, the oldest dropped first).
`RecordingCache` is the other half: a cache that keeps every entry it
serves or stores, so a pickling process learns exactly which keys a
function's kernels have.

Must not: import `mlir` or `llvmlite` (a hit has to be cheap).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
import tempfile
import threading
import time
import warnings
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from fusebind.dialect.errors import FusebindValueError
from fusebind.lowering.portable_layer import (  # noqa: F401 - the portable layer, re-exported
    PORTABLE_LIMIT,
    clear_portable,
    install_portable,
    portable_active,
    portable_counts,
    portable_get,
    portable_put,
)

# The entry format. FBOBJ2: the hash covers the symbol line too (FBOBJ1 hashed the code only).
MAGIC = b"FBOBJ2\n"
# Bump when emit.py / pipeline.py change what a given key compiles to.
FORMAT_VERSION = "1"
# The symbol line of a note (get_note): no kernel symbol has this form.
NOTE_SYMBOL = "fb-note-v1"
NOTE_SUFFIX = ".note"  # (beside the `.o` objects, never mistaken for one)
# A temp file this old belongs to a writer that died (a live one renames within seconds).
STALE_TEMP_SECONDS = 3600.0
TEMP_PREFIX = ".tmp-"


class CacheWarning(UserWarning):
    """The object cache could not be written, or its directory is not private
    enough to run code from; compilation continues without it."""


def cache_key(**parts: Any) -> str:
    """A stable hex key over JSON-serialisable parts (recipe, dtypes, shapes, target …).

    Every registered user op whose full name the parts mention (the canonical recipe names
    its ops) adds its `op_fingerprint`, the hash of its facts and of the source of its
    `scalar_body` and `reference`: an edited body gives another key, so it cannot load code
    built from the old one. Built-in ops need none (FORMAT_VERSION and the fusebind version
    cover them), and a process with no user op pays nothing more."""
    text = json.dumps({"format": FORMAT_VERSION, **parts}, sort_keys=True, default=str)
    ops = user_op_fingerprints(text)
    if ops:
        text += json.dumps({"user_ops": ops}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def user_op_fingerprints(text: str) -> dict[str, str]:
    """{full name: op_fingerprint} of the registered user ops `text` names."""
    from fusebind.dialect.registry import op_fingerprint, user_ops

    return {cls.name: op_fingerprint(cls) for cls in user_ops() if cls.name in text}


@dataclass
class CachedObject:
    symbol: str
    object_code: bytes


@dataclass
class ObjectCache:
    """A directory of cached object files (or, with `directory=None`, no cache).

    The directory is vetted (`vet_directory`) on first use; a refused one
    makes the cache behave as off (`enabled` is False)."""

    directory: Path | None
    _warned: bool = field(default=False, repr=False, compare=False)
    hits: int = 0
    misses: int = 0
    # True: vetted and present; False: refused; None: not decided yet (absent, or not asked).
    _trusted: bool | None = field(default=None, repr=False, compare=False)
    _root: Path | None = field(default=None, repr=False, compare=False)  # the canonical path, once vetted

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
        """Whether the cache is on: a directory is named and it is not refused (or
        the portable layer holds kernels, which every cache serves first)."""
        if portable_active():
            return True
        return self.directory is not None and self._vet(create=False) is not None

    def path_of(self, key: str) -> Path:
        if self.directory is None:
            raise FusebindValueError("ObjectCache: the cache is disabled (FUSEBIND_CACHE=0); there is no path")
        return self.directory / f"{key}.o"

    def _vet(self, create: bool) -> Path | None:
        """The canonical directory to use, or None when refused. `create`: make
        it (0o700) if absent; may raise OSError then."""
        if self.directory is None or self._trusted is False:
            return None
        if self._trusted and (not create or self._root.is_dir()):  # type: ignore[union-attr]
            return self._root
        root = vet_directory(self.directory, create=create)
        if root is None:
            self._trusted = False
            return None
        self._root = root
        if root.is_dir():
            self._trusted = True
        return root

    def get(self, key: str) -> CachedObject | None:
        """The entry for `key`, or None if absent, unreadable, corrupt, not a
        regular file of ours (a symlink, another user's), or the directory is refused.
        The portable layer (installed from pickles) is looked up first."""
        if portable_active():
            entry = portable_get(key)
            if entry is not None:
                self.hits += 1
                return entry
        root = self._vet(create=False)
        if root is None:
            return None
        data = read_private_file(root / f"{key}.o")
        entry = _decode(data) if data is not None else None
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def get_note(self, key: str) -> bytes | None:
        """The bytes `put_note` stored under `key` (build.py's index from a pre-emission key to an
        object's key), or None. Not a hit or a miss, and never from the portable layer: a note
        describes this checkout of fusebind, not a travelling function."""
        root = self._vet(create=False)
        data = read_private_file(root / f"{key}{NOTE_SUFFIX}") if root is not None else None
        entry = _decode(data) if data is not None else None
        return entry.object_code if entry is not None and entry.symbol == NOTE_SYMBOL else None

    def put_note(self, key: str, data: bytes) -> bool:
        """Store a note (see `get_note`) atomically; False when nothing was written."""
        return self.directory is not None and self._store(f"{key}{NOTE_SUFFIX}", CachedObject(NOTE_SYMBOL, data))

    def put(self, key: str, entry: CachedObject) -> bool:
        """Store atomically. Returns False (and warns once) if the directory cannot
        take it; False without writing if the directory is refused (warned by `vet_directory`)."""
        if self.directory is None:
            if portable_active():  # enabled only for the portable layer: keep what is built in memory
                portable_put(key, entry)
            return False
        return self._store(f"{key}.o", entry)

    def _store(self, filename: str, entry: CachedObject) -> bool:
        if "\n" in entry.symbol:
            raise FusebindValueError(f"ObjectCache.put: the symbol {entry.symbol!r} contains a newline; "
                             "an entry stores it on one line (kernel symbols are fb_ + alphanumerics)")
        tmp: str | None = None
        try:
            root = self._vet(create=True)
            if root is None:
                return False
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".o", dir=root)  # created 0o600
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(entry))
            os.replace(tmp, root / filename)
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
                              "or FUSEBIND_CACHE=0 to silence this.", CacheWarning, stacklevel=4)
            return False

    def sweep_stale_temps(self, older_than: float = STALE_TEMP_SECONDS) -> int:
        """Remove `.tmp-*` files not modified for `older_than` seconds (left by
        writers that died before their rename). Best effort: never raises;
        returns how many were removed."""
        root = self._vet(create=False)
        if root is None:
            return 0
        cutoff = time.time() - older_than
        removed = 0
        try:
            with os.scandir(root) as entries:
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


# ----------------------------------------------------------------- recording
class RecordingCache(ObjectCache):
    """A cache that keeps every entry it serves or stores (`entries`, by key), reading
    through to `inner` (then to the default cache) and writing through to `inner`. Always
    enabled, so every build computes its key even when those caches are off."""

    def __init__(self, inner: ObjectCache | None = None) -> None:
        super().__init__(None)
        self.inner = inner if inner is not None else default_cache()
        self._also = default_cache() if inner is not None else None
        self.entries: dict[str, CachedObject] = {}
        self._entries_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return True

    def get(self, key: str) -> CachedObject | None:
        with self._entries_lock:
            entry = self.entries.get(key)
        if entry is None:
            entry = self.inner.get(key)
            if entry is None and self._also is not None and self._also is not self.inner:
                entry = self._also.get(key)
            if entry is None:
                self.misses += 1
                return None
            with self._entries_lock:
                self.entries[key] = entry
        self.hits += 1
        return entry

    def put(self, key: str, entry: CachedObject) -> bool:
        with self._entries_lock:
            self.entries[key] = entry
        return self.inner.put(key, entry)

    # notes are not recorded: a travelling function carries objects, never this checkout's index
    def get_note(self, key: str) -> bytes | None:
        return self.inner.get_note(key)

    def put_note(self, key: str, data: bytes) -> bool:
        return self.inner.put_note(key, data)


# ----------------------------------------------------------------- trust
@dataclass(frozen=True)
class DirectoryProblem:
    """Why a directory may not hold code this process runs, and the fix."""

    path: str  # the offending component (the directory or one of its parents)
    why: str
    fix: str

    def message(self, directory: Path | str) -> str:
        return (f"fusebind: not using the cache directory {directory}: {self.why}. The cache is off in this "
                f"process and nothing is written there. Fix: {self.fix}, or set FUSEBIND_CACHE_DIR to a "
                "directory only you can write (FUSEBIND_CACHE=0 turns the cache off).")


def _read_only_mount(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def directory_problem(directory: Path | str) -> DirectoryProblem | None:
    """None if `directory` (which need not exist yet) may hold code run by
    this process; else the first problem, checking upward from the directory
    (the rule is in the module doc)."""
    uid = os.geteuid()
    canonical = os.path.realpath(directory)
    home = os.path.realpath(os.path.expanduser("~"))
    path = canonical
    while True:
        itself = path == canonical
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            st = None  # created 0o700 by `make_private_directory`, then checked again
        except OSError as err:
            return DirectoryProblem(path, f"{path} cannot be examined ({err.strerror or err})",
                                    "make it accessible")
        if st is not None and stat.S_ISLNK(st.st_mode):  # realpath resolved links: swapped since, or a loop
            return DirectoryProblem(path, f"{path} is a symbolic link that does not resolve to a directory",
                                    f"replace {path} with a directory")
        # Not a directory (a file in the way): not a trust question; nothing can be
        # read there and the first write fails with the system's own reason.
        if st is not None and stat.S_ISDIR(st.st_mode):
            if st.st_uid not in (uid, 0):
                return DirectoryProblem(
                    path, f"{path} is owned by uid {st.st_uid}, not by you (uid {uid}) or root, so its owner "
                    "could plant object code there that this process would run", "use a directory you own")
            writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            sticky_parent = not itself and st.st_mode & stat.S_ISVTX
            if writable and not sticky_parent and not _read_only_mount(path):
                who = {stat.S_IWGRP: "group", stat.S_IWOTH: "others"}.get(writable, "group and others")
                fix = f"`chmod 700 {path}`" if itself else f"`chmod go-w {path}`"
                return DirectoryProblem(
                    path, f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o}), so another user "
                    "could plant object code there that this process would run", fix)
        if path == home or path == os.path.dirname(path):
            return None
        path = os.path.dirname(path)


def make_private_directory(directory: Path | str) -> None:
    """Create `directory` and each missing parent 0o700 (whatever the umask:
    a umask of 0 must not make our own cache world-writable). Raises OSError."""
    missing: list[str] = []
    path = os.path.realpath(directory)
    while not os.path.lexists(path) and path != os.path.dirname(path):
        missing.append(path)
        path = os.path.dirname(path)
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue  # someone else made it: `directory_problem` judges it next
        os.chmod(path, 0o700)  # the umask can only narrow mkdir's mode (e.g. to 0o500): make it exactly 0o700


_REFUSED: set[str] = set()
_REFUSED_LOCK = threading.Lock()


def vet_directory(directory: Path | str, *, create: bool = False) -> Path | None:
    """The canonical path of `directory` if it may hold code this process
    runs (`directory_problem`); None, after one `CacheWarning` per directory
    per process, if it may not. `create`: make it first if absent (0o700;
    OSError propagates) and check again."""
    problem = directory_problem(directory)
    canonical = Path(os.path.realpath(directory))
    if problem is None and create and not canonical.is_dir():
        make_private_directory(canonical)
        problem = directory_problem(canonical)
    if problem is None:
        return canonical
    with _REFUSED_LOCK:
        first = str(canonical) not in _REFUSED
        _REFUSED.add(str(canonical))
    if first:
        warnings.warn(problem.message(directory), CacheWarning, stacklevel=3)
    return None


def read_private_file(path: Path | str) -> bytes | None:
    """The bytes of `path` if it is a regular file owned by the current user
    and not writable by group or others, judged on the open descriptor
    (`O_NOFOLLOW`: a symlink is refused, not followed; `O_NONBLOCK`: a FIFO
    cannot hang the open); None otherwise, or if it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            return None
        chunks = []
        while chunk := os.read(fd, max(st.st_size, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=16)
def _shared(directory: str | None) -> ObjectCache:
    return ObjectCache(Path(directory) if directory is not None else None)


#: a cache that stands in for the default one in this context (`recording_default`)
_STAND_IN: ContextVar[ObjectCache | None] = ContextVar("fusebind_default_cache", default=None)


@contextlib.contextmanager
def recording_default(cache: ObjectCache) -> Iterator[ObjectCache]:
    """Make `cache` what `default_cache()` returns in this context (this thread, and the JIT
    work it submits): a pickling process's replay records kernels built through the default."""
    token = _STAND_IN.set(cache)
    try:
        yield cache
    finally:
        _STAND_IN.reset(token)


def default_cache() -> ObjectCache:
    """The cache the environment names, one instance per directory per process
    (so a read-only directory warns once, and hit/miss counts accumulate);
    inside `recording_default(c)`, `c`."""
    stand_in = _STAND_IN.get()
    if stand_in is not None:
        return stand_in
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
