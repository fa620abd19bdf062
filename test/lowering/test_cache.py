"""The on-disk object cache: keys, atomic owner-only entries, corruption
handling, read-only directories, and a hit in a new process without mlir."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.lowering.cache import MAGIC, STALE_TEMP_SECONDS, CacheWarning, CachedObject
from fusebind.runtime.kernel import Kernel

from lowering_helpers import REGION_MODULE, _region


def test_from_env_locations(tmp_path: Path) -> None:
    assert not ObjectCache.from_env({"FUSEBIND_CACHE": "0", "FUSEBIND_CACHE_DIR": str(tmp_path)}).enabled
    assert ObjectCache.from_env({"FUSEBIND_CACHE_DIR": str(tmp_path / "c")}).directory == tmp_path / "c"
    assert ObjectCache.from_env({"XDG_CACHE_HOME": str(tmp_path)}).directory == tmp_path / "fusebind"
    home = ObjectCache.from_env({"HOME": str(tmp_path)}).directory
    assert home is not None and home.name == "fusebind" and home.parent.name == ".cache"


def test_entries_are_owner_only_and_round_trip(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path / "c")
    assert cache.put("k1", CachedObject("sym", b"\x7fELF-bytes"))
    assert cache.get("k1") == CachedObject("sym", b"\x7fELF-bytes")
    assert stat.S_IMODE(os.stat(tmp_path / "c").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache.path_of("k1")).st_mode) == 0o600
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["k1.o"]  # no temp file left behind


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_entry_is_a_miss_and_gets_rebuilt(damage: str, tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    module = parse_module(REGION_MODULE)
    first = decompose_region(_region(module), cache=cache)
    assert not first.from_cache
    (entry,) = tmp_path.glob("*.o")
    data = entry.read_bytes()
    bad = {"truncate": data[: len(data) // 2], "flip": data[:-1] + bytes([data[-1] ^ 1]),
           "garbage": b"not an object", "empty": b""}[damage]
    entry.write_bytes(bad)
    assert cache.get(entry.stem) is None
    again = decompose_region(_region(module), cache=cache)
    assert not again.from_cache and again.object_code == first.object_code
    assert entry.read_bytes() == data  # rebuilt in place
    assert decompose_region(_region(module), cache=cache).from_cache


def test_key_separates_dtypes_shapes_and_target(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    decompose_region(_region(parse_module(REGION_MODULE)), cache=cache)
    decompose_region(_region(parse_module(REGION_MODULE.replace("64xf32", "65xf32"))), cache=cache)
    decompose_region(_region(parse_module(REGION_MODULE.replace("64xf32", "64xf64"))), cache=cache)
    decompose_region(_region(parse_module(REGION_MODULE)), cache=cache, dynamic=True)
    assert len(list(tmp_path.glob("*.o"))) == 4


def test_read_only_cache_dir_warns_once_and_still_compiles(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        ro = tmp_path / "file-not-dir"
        ro.write_text("x")  # root ignores permissions; a path under a file cannot be created either
        cache = ObjectCache(ro / "c")
    else:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        cache = ObjectCache(ro)
    module = parse_module(REGION_MODULE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d1 = decompose_region(_region(module), cache=cache)
        d2 = decompose_region(_region(module), cache=cache)
    assert d1.object_code and d2.object_code and not d2.from_cache
    assert [w.category for w in caught] == [CacheWarning]


def test_default_cache_from_env_warns_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("FUSEBIND_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("FUSEBIND_CACHE", raising=False)
    module = parse_module(REGION_MODULE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert decompose_region(_region(module)).object_code
    assert [w.category for w in caught] == [CacheWarning]


def test_cache_disabled_compiles_every_time() -> None:
    cache = ObjectCache(None)
    module = parse_module(REGION_MODULE)
    assert not decompose_region(_region(module), cache=cache).from_cache
    assert not decompose_region(_region(module), cache=cache).from_cache


def test_hit_in_a_new_process_does_not_import_mlir(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        import numpy as np
        from fusebind.dialect import parse_module
        from fusebind.lowering import decompose_region
        from fusebind.runtime.dtypes import descriptor_for
        from fusebind.runtime.kernel import Kernel
        module = parse_module({REGION_MODULE!r})
        region = next(op for op in module.walk() if op.name == "fused.region")
        d = decompose_region(region)
        k = Kernel.from_decomposition(d)
        a = np.arange(64, dtype=np.float32) - 32
        out = np.empty(64, np.float32)
        k(descriptor_for(a), descriptor_for(a), descriptor_for(a), descriptor_for(out))
        ok = np.array_equal(out, np.where(a * a + a < 0, 0, a * a + a))
        # (a hit is found by the pre-emission key: it never emits, lowering/build.py's prebuilt index)
        from fusebind.lowering.build import code_fingerprint
        # (compiling never loads mlir.dialects.linalg's OpDSL: pipeline.py asks no value for its owner)
        print(d.from_cache, "mlir" in sys.modules, ok, "emit" in d.timings, "mlir.dialects.linalg" in sys.modules,
              code_fingerprint())
    """)
    env = {**os.environ, "FUSEBIND_CACHE_DIR": str(tmp_path)}
    env.pop("FUSEBIND_CACHE", None)
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    *flags, code = first.stdout.split()
    assert flags == ["False", "True", "True", "True", "False"]
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    *flags, code2 = second.stdout.split()
    # no emission, unless a fusebind source file changed in between (the key's code fingerprint)
    assert flags == ["True", "False", "True", str(code2 != code), "False"]


def test_concurrent_writers_leave_one_valid_entry(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        from fusebind.lowering.cache import ObjectCache, CachedObject
        from pathlib import Path
        c = ObjectCache(Path(sys.argv[1]))
        payload = bytes(range(256)) * 4000
        for i in range(50):
            c.put("same", CachedObject("s", payload))
            e = c.get("same")
            assert e is not None and e.object_code == payload
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)]) for _ in range(3)]
    assert [p.wait() for p in procs] == [0, 0, 0]
    assert [p.name for p in tmp_path.iterdir()] == ["same.o"]


def test_the_entry_hash_covers_symbol_and_code(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    assert cache.put("k", CachedObject("fb_k", b"\x7fELF-code"))
    data = (tmp_path / "k.o").read_bytes()
    assert data.startswith(MAGIC)
    assert hashlib.sha256(b"fb_k\n\x7fELF-code").hexdigest().encode() in data
    for damaged in (data.replace(b"fb_k", b"fb_x"), data.replace(b"fb_k\n", b"fb_k\n\n")):
        (tmp_path / "k.o").write_bytes(damaged)
        assert cache.get("k") is None
    with pytest.raises(ValueError, match="contains a newline"):
        cache.put("k2", CachedObject("fb\nk", b"code"))
    assert not (tmp_path / "k2.o").exists() and not list(tmp_path.glob(".tmp-*"))


def test_an_entry_of_the_previous_format_is_refused_and_rebuilt(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    module = parse_module(REGION_MODULE)
    first = decompose_region(_region(module), cache=cache)
    (entry,) = tmp_path.glob("*.o")
    current = entry.read_bytes()
    # FBOBJ1: same layout, but the hash covered the code only.
    code = first.object_code
    old = b"FBOBJ1\n" + hashlib.sha256(code).hexdigest().encode() + b"\n" + first.symbol.encode() + b"\n" + code
    entry.write_bytes(old)
    assert cache.get(entry.stem) is None
    again = decompose_region(_region(module), cache=cache)
    assert not again.from_cache and again.object_code == code
    assert entry.read_bytes() == current  # overwritten in the current format
    assert decompose_region(_region(module), cache=cache).from_cache


def test_put_sweeps_temp_files_older_than_an_hour(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    stale = tmp_path / ".tmp-dead-writer.o"
    fresh = tmp_path / ".tmp-live-writer.o"
    other = tmp_path / "notes.txt"
    for p in (stale, fresh, other):
        p.write_bytes(b"partial")
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    assert cache.put("k", CachedObject("fb_k", b"code"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([fresh.name, other.name, "k.o"])
    assert cache.get("k") == CachedObject("fb_k", b"code")


def test_a_failing_sweep_never_fails_the_put(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ObjectCache(tmp_path)
    stale = tmp_path / ".tmp-dead-writer.o"
    stale.write_bytes(b"partial")
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))

    def refuse(path: object, *args: object, **kw: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "unlink", refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed sweep does not even warn
        assert cache.put("k", CachedObject("fb_k", b"code"))
    monkeypatch.undo()
    assert stale.exists() and cache.get("k") == CachedObject("fb_k", b"code")
    assert cache.sweep_stale_temps() == 1 and not stale.exists()
