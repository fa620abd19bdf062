"""The object cache runs no one else's code (issue 11).

Every refusal test plants, under the key the real region looks up, a
well-formed entry with a valid hash whose code computes something else
(`-(a*b+c)` instead of `relu(a*b+c)`). `test_a_planted_entry_in_a_private_directory_runs`
is the control: in a private directory the plant is loaded and runs, so each
refusal below would fail if the check were missing. A refused directory
gives one CacheWarning (exact message), the kernel is compiled fresh (right
values, `from_cache` False) and nothing is written there. The same for the
machine-model file beside the cache (calibrate.py)."""

from __future__ import annotations

import os
import shutil
import stat
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.lowering import cache as cache_mod
from fusebind.lowering.cache import CacheWarning, CachedObject, _encode, default_cache, read_private_file
from fusebind.compiler.cost import MachineModel
from fusebind.runtime.calibrate import MachineCalibration, load_machine, machine_cache_path, machine_key, store_machine
from fusebind.runtime.kernel import Kernel

from lowering_helpers import REGION_MODULE, _region

OTHER_UID = 12345
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
# The same region name (so the same symbol), other math: the code an attacker would plant.
PLANTED_MODULE = REGION_MODULE.replace("prim.relu %s", "prim.neg %s")
A, B, C = (np.linspace(-3, 3, 64, dtype=np.float32) * k for k in (1.0, 0.5, -1.0))
REAL_VALUES = np.maximum(A * B + C, 0)
PLANTED_VALUES = -(A * B + C)


def _run(decomposition: Any) -> np.ndarray:
    from fusebind.runtime.dtypes import descriptor_for

    out = np.empty(64, np.float32)
    Kernel.from_decomposition(decomposition)(descriptor_for(A), descriptor_for(B), descriptor_for(C), descriptor_for(out))
    return out


@pytest.fixture(scope="module")
def plant(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, bytes]:
    """(entry file name the real region looks up, a valid entry holding the planted code)."""
    scratch = tmp_path_factory.mktemp("scratch")
    real = decompose_region(_region(parse_module(REGION_MODULE)), cache=ObjectCache(scratch))
    (entry,) = scratch.glob("*.o")
    other = decompose_region(_region(parse_module(PLANTED_MODULE)), cache=ObjectCache(None))
    assert other.symbol == real.symbol and other.object_code != real.object_code
    return entry.name, _encode(CachedObject(other.symbol, other.object_code))


def _write_private(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if not p.is_dir()}


def _decompose_twice(cache: ObjectCache) -> tuple[list[Any], list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = [decompose_region(_region(parse_module(REGION_MODULE)), cache=cache) for _ in range(2)]
    return runs, caught


def _message(directory: Path, why: str, fix: str) -> str:
    return (f"fusebind: not using the cache directory {directory}: {why}. The cache is off in this process and "
            f"nothing is written there. Fix: {fix}, or set FUSEBIND_CACHE_DIR to a directory only you can "
            "write (FUSEBIND_CACHE=0 turns the cache off).")


PLANT = "could plant object code there that this process would run"


def test_a_planted_entry_in_a_private_directory_runs(tmp_path: Path, plant: tuple[str, bytes]) -> None:
    """The control: without a trust problem the plant is loaded (so the tests below can fail)."""
    directory = tmp_path / "c"
    directory.mkdir(mode=0o700)
    _write_private(directory / plant[0], plant[1])
    (d, _), caught = _decompose_twice(ObjectCache(directory))
    assert d.from_cache and caught == []
    np.testing.assert_array_equal(_run(d), PLANTED_VALUES)


# ----------------------------------------------------------------- refused directories
def _dir_0777(tmp: Path) -> tuple[Path, Path, str, str]:
    d = tmp / "c"
    d.mkdir()
    d.chmod(0o777)
    return d, d, "writable by group and others (mode 0777)", f"`chmod 700 {d}`"


def _dir_0770(tmp: Path) -> tuple[Path, Path, str, str]:
    d = tmp / "c"
    d.mkdir()
    d.chmod(0o770)
    return d, d, "writable by group (mode 0770)", f"`chmod 700 {d}`"


def _dir_sticky_1777(tmp: Path) -> tuple[Path, Path, str, str]:
    d = tmp / "c"  # sticky excuses a parent, never the cache directory itself
    d.mkdir()
    d.chmod(0o1777)
    return d, d, "writable by group and others (mode 1777)", f"`chmod 700 {d}`"


def _parent_0777(tmp: Path) -> tuple[Path, Path, str, str]:
    p = tmp / "p"
    p.mkdir()
    p.chmod(0o777)
    (p / "c").mkdir(mode=0o700)
    return p / "c", p, "writable by group and others (mode 0777)", f"`chmod go-w {p}`"


def _grandparent_0757(tmp: Path) -> tuple[Path, Path, str, str]:
    g = tmp / "g"
    g.mkdir()
    g.chmod(0o757)
    (g / "p").mkdir(mode=0o700)
    (g / "p" / "c").mkdir(mode=0o700)
    return g / "p" / "c", g, "writable by others (mode 0757)", f"`chmod go-w {g}`"


def _dir_foreign(tmp: Path) -> tuple[Path, Path, str, str]:
    d = tmp / "c"
    d.mkdir(mode=0o700)
    os.chown(d, OTHER_UID, -1)
    return d, d, f"owned by uid {OTHER_UID}, not by you (uid {os.geteuid()}) or root, so its owner", \
        "use a directory you own"


def _parent_foreign(tmp: Path) -> tuple[Path, Path, str, str]:
    p = tmp / "p"
    p.mkdir(mode=0o755)
    (p / "c").mkdir(mode=0o700)
    os.chown(p, OTHER_UID, -1)
    return p / "c", p, f"owned by uid {OTHER_UID}, not by you (uid {os.geteuid()}) or root, so its owner", \
        "use a directory you own"


BAD_DIRECTORIES: dict[str, Any] = {
    "directory-0777": _dir_0777, "directory-0770": _dir_0770, "directory-sticky-1777": _dir_sticky_1777,
    "parent-0777": _parent_0777, "grandparent-0757": _grandparent_0757,
    "directory-foreign-owner": pytest.param(_dir_foreign, marks=needs_root),
    "parent-foreign-owner": pytest.param(_parent_foreign, marks=needs_root),
}


def _why(path: Path, what: str) -> str:
    return f"{path} is {what}" + ("" if what.endswith("its owner") else ", so another user") + f" {PLANT}"


@pytest.mark.parametrize("make", BAD_DIRECTORIES.values(), ids=BAD_DIRECTORIES.keys())
def test_a_planted_entry_with_a_valid_hash_in_a_bad_directory_never_runs(
        make: Callable[[Path], tuple[Path, Path, str, str]], tmp_path: Path, plant: tuple[str, bytes]) -> None:
    directory, culprit, what, fix = make(tmp_path)
    _write_private(directory / plant[0], plant[1])
    before = _snapshot(directory)
    cache = ObjectCache(directory)
    runs, caught = _decompose_twice(cache)
    assert [str(w.message) for w in caught] == [_message(directory, _why(culprit, what), fix)]
    assert [w.category for w in caught] == [CacheWarning]
    assert [d.from_cache for d in runs] == [False, False]
    np.testing.assert_array_equal(_run(runs[0]), REAL_VALUES)
    assert _snapshot(directory) == before  # nothing written, the plant untouched
    assert not cache.enabled and cache.get(plant[0][:-2]) is None and cache.hits == 0


def test_a_refused_directory_warns_once_per_process(tmp_path: Path) -> None:
    directory, *_ = _dir_0777(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert not ObjectCache(directory).put("k", CachedObject("fb_k", b"code"))
    assert [w.category for w in caught] == [CacheWarning] and list(directory.iterdir()) == []


def test_the_default_cache_refuses_a_0777_fusebind_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            plant: tuple[str, bytes]) -> None:
    directory, *_ = _dir_0777(tmp_path)
    _write_private(directory / plant[0], plant[1])
    monkeypatch.setenv("FUSEBIND_CACHE_DIR", str(directory))
    monkeypatch.delenv("FUSEBIND_CACHE", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = decompose_region(_region(parse_module(REGION_MODULE)))
    assert not default_cache().enabled and not d.from_cache
    assert [w.category for w in caught] == [CacheWarning]
    np.testing.assert_array_equal(_run(d), REAL_VALUES)
    assert sorted(p.name for p in directory.iterdir()) == [plant[0]]


@needs_root
def test_a_directory_taken_over_between_the_check_and_its_creation_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_make = cache_mod.make_private_directory

    def raced(directory: Any) -> None:  # another user creates it first; our mkdir then finds it there
        os.mkdir(directory, 0o700)
        os.chown(directory, OTHER_UID, -1)
        real_make(directory)

    monkeypatch.setattr(cache_mod, "make_private_directory", raced)
    cache = ObjectCache(tmp_path / "c")
    with pytest.warns(CacheWarning, match=f"owned by uid {OTHER_UID}"):
        assert not cache.put("k", CachedObject("fb_k", b"code"))
    assert list((tmp_path / "c").iterdir()) == [] and not cache.enabled


# ----------------------------------------------------------------- accepted directories
def test_a_sticky_world_writable_parent_like_tmp_is_accepted(tmp_path: Path) -> None:
    tmp_like = tmp_path / "tmp"
    tmp_like.mkdir()
    tmp_like.chmod(0o1777)
    cache = ObjectCache(tmp_like / "mine" / "c")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.put("k", CachedObject("fb_k", b"code")) and cache.get("k") == CachedObject("fb_k", b"code")
    assert stat.S_IMODE(os.stat(tmp_like / "mine").st_mode) == 0o700


def test_every_directory_fusebind_creates_is_0700_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        cache = ObjectCache(tmp_path / "a" / "b" / "c")
        assert cache.put("k", CachedObject("fb_k", b"code"))
    finally:
        os.umask(old)
    for level in ("a", "a/b", "a/b/c"):
        assert stat.S_IMODE(os.stat(tmp_path / level).st_mode) == 0o700, level
    assert cache.get("k") == CachedObject("fb_k", b"code")


def test_the_check_stops_at_the_home_directory_as_ssh_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"  # above HOME: not judged (as ssh); beside HOME: judged
    shared.mkdir()
    shared.chmod(0o777)
    home = shared / "home"
    home.mkdir(mode=0o755)
    monkeypatch.setenv("HOME", str(home))
    assert cache_mod.directory_problem(home / ".cache" / "fusebind") is None
    problem = cache_mod.directory_problem(shared / "elsewhere")
    assert problem is not None and problem.path == str(shared)
    home.chmod(0o775)  # HOME itself is judged
    problem = cache_mod.directory_problem(home / ".cache" / "fusebind")
    assert problem is not None and problem.path == str(home) and problem.fix == f"`chmod go-w {home}`"


def test_the_default_location_under_a_normal_home_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    monkeypatch.setenv("HOME", str(home))
    for name in ("FUSEBIND_CACHE_DIR", "XDG_CACHE_HOME", "FUSEBIND_CACHE"):
        monkeypatch.delenv(name, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache = default_cache()
        assert cache.directory == home / ".cache" / "fusebind" and cache.enabled
        first = decompose_region(_region(parse_module(REGION_MODULE)))
        second = decompose_region(_region(parse_module(REGION_MODULE)))
    assert not first.from_cache and second.from_cache
    np.testing.assert_array_equal(_run(second), REAL_VALUES)
    assert stat.S_IMODE(os.stat(home / ".cache").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(home / ".cache" / "fusebind").st_mode) == 0o700
    assert len(list((home / ".cache" / "fusebind").glob("*.o"))) == 1


def test_an_existing_0755_dot_cache_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    (home / ".cache").chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    cache = ObjectCache.from_env({"HOME": str(home)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.put("k", CachedObject("fb_k", b"code")) and cache.get("k") is not None


# ----------------------------------------------------------------- refused entries
def _symlinked(directory: Path, name: str, data: bytes, tmp: Path) -> Path:
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    _write_private(elsewhere / name, data)
    (directory / name).symlink_to(elsewhere / name)
    return elsewhere / name


def _foreign_entry(directory: Path, name: str, data: bytes, tmp: Path) -> Path:
    _write_private(directory / name, data)
    os.chown(directory / name, OTHER_UID, -1)
    return directory / name


def _group_writable_entry(directory: Path, name: str, data: bytes, tmp: Path) -> Path:
    _write_private(directory / name, data)
    (directory / name).chmod(0o620)
    return directory / name


def _fifo_entry(directory: Path, name: str, data: bytes, tmp: Path) -> Path:
    os.mkfifo(directory / name, 0o600)  # opening it for reading must not hang
    return directory / name


BAD_ENTRIES: dict[str, Any] = {
    "symlink": _symlinked, "group-writable": _group_writable_entry, "fifo": _fifo_entry,
    "foreign-owner": pytest.param(_foreign_entry, marks=needs_root),
}


@pytest.mark.parametrize("make", BAD_ENTRIES.values(), ids=BAD_ENTRIES.keys())
def test_a_bad_entry_in_a_private_directory_is_a_miss_and_never_read(
        make: Callable[..., Path], tmp_path: Path, plant: tuple[str, bytes]) -> None:
    directory = tmp_path / "c"
    directory.mkdir(mode=0o700)
    target = make(directory, plant[0], plant[1], tmp_path)
    assert read_private_file(directory / plant[0]) is None
    cache = ObjectCache(directory)
    assert cache.get(plant[0][:-2]) is None and cache.misses == 1
    (d, again), caught = _decompose_twice(cache)
    assert caught == [] and not d.from_cache and again.from_cache  # rebuilt in place, then a hit
    np.testing.assert_array_equal(_run(d), REAL_VALUES)
    np.testing.assert_array_equal(_run(again), REAL_VALUES)
    entry = directory / plant[0]
    assert stat.S_ISREG(os.lstat(entry).st_mode) and os.lstat(entry).st_uid == os.geteuid()
    if target != entry:
        assert target.read_bytes() == plant[1]  # the link was replaced, its target left alone


# ----------------------------------------------------------------- the machine model beside the cache
SEEDED = MachineModel(12.5e9, 77e9, 123.0, "measured")
MEASURED = MachineModel(30e9, 60e9, 40.0, "measured")


def _seeded_file(tmp: Path) -> Path:
    good = tmp / "good"
    path = machine_cache_path(good)
    assert path is not None and store_machine(path, machine_key(), SEEDED)
    return path


def _calibration() -> tuple[MachineCalibration, list[int]]:
    calls: list[int] = []
    return MachineCalibration(lambda: calls.append(1) or MEASURED), calls


def test_the_seeded_machine_model_is_read_from_a_private_directory(tmp_path: Path) -> None:
    seeded = _seeded_file(tmp_path)
    cal, calls = _calibration()
    assert cal.measured({"FUSEBIND_CACHE_DIR": str(seeded.parent)}) == SEEDED and calls == [] and cal.disk_hits == 1


@pytest.mark.parametrize("make", [_dir_0777, _parent_0777, pytest.param(_dir_foreign, marks=needs_root)],
                         ids=["directory-0777", "parent-0777", "directory-foreign-owner"])
def test_the_machine_model_in_a_bad_directory_is_not_read_nor_written(make: Any, tmp_path: Path) -> None:
    seeded = _seeded_file(tmp_path)
    directory, culprit, what, fix = make(tmp_path)
    shutil.copy(seeded, directory / seeded.name)
    before = _snapshot(directory)
    cal, calls = _calibration()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cal.measured({"FUSEBIND_CACHE_DIR": str(directory)}) == MEASURED
    assert calls == [1] and cal.disk_hits == 0
    assert [str(w.message) for w in caught] == [_message(directory, _why(culprit, what), fix)]
    assert _snapshot(directory) == before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not store_machine(directory / seeded.name, machine_key(), MEASURED)
    assert caught == [] and _snapshot(directory) == before  # refused: already warned, nothing written


def test_a_symlinked_machine_model_file_is_not_read(tmp_path: Path) -> None:
    seeded = _seeded_file(tmp_path)
    directory = tmp_path / "c"
    directory.mkdir(mode=0o700)
    (directory / seeded.name).symlink_to(seeded)
    assert load_machine(directory / seeded.name, machine_key()) is None
    cal, calls = _calibration()
    assert cal.measured({"FUSEBIND_CACHE_DIR": str(directory)}) == MEASURED and calls == [1]
    assert not (directory / seeded.name).is_symlink()  # stored over the link, not through it
    assert load_machine(seeded, machine_key()) == SEEDED
    assert load_machine(directory / seeded.name, machine_key()) == MEASURED


@needs_root
def test_a_machine_model_file_of_another_user_is_not_read(tmp_path: Path) -> None:
    seeded = _seeded_file(tmp_path)
    os.chown(seeded, OTHER_UID, -1)
    assert load_machine(seeded, machine_key()) is None
    cal, calls = _calibration()
    assert cal.measured({"FUSEBIND_CACHE_DIR": str(seeded.parent)}) == MEASURED and calls == [1]
