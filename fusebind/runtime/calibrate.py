"""The measured machine model: this machine's bandwidth, flop rate and launch
overhead, measured with fusebind's own compiled kernels, and kept on disk.

Owns:
- `calibrate_machine(sizes)`: measure now (no caches). Two prim regions go
  through the normal lowering path (`decompose_region`, dynamic shapes,
  object cache) and are called through the fast call path (the thunk,
  thunk.py):
  - bandwidth: a STREAM-triad region `x * 3 + y` over float32 arrays far
    larger than the last-level cache (default 4e7 bytes each). Bytes are
    counted the way the Layer-1 model counts them (boundary I/O: two reads,
    one write; write-allocate traffic is not counted), so the model's
    `bytes / bandwidth` predicts what such a kernel takes.
  - flop rate: a dependent chain of `mul`/`add` with scalar constants
    (default 64 prim flops per element) over an L1-resident array, called
    repeatedly. Flops are counted as the model counts them (prim flops).
  - launch overhead: the thunk's per-call time for a one-element kernel
    from a Python loop (the output preallocated, as plan steps have it).
  Each figure is the minimum over several repeats (the machine is noisy);
  the launch time is taken off the bandwidth and flop timings, since the
  model adds it separately. All numbers are single-thread: the executor's
  threaded split of large kernels is decided separately (call.py,
  `SPLIT_THRESHOLD`) and not priced by this model.
- `MachineCalibration`: measure at most once per process (per cache
  location), thread-safe; read and write the result as JSON beside the
  object cache (`FUSEBIND_CACHE_DIR`, else `$XDG_CACHE_HOME/fusebind`; the
  same rules as `ObjectCache.from_env`), keyed by the host CPU name and
  features, the fusebind version and `CALIBRATION_FORMAT`. The directory
  must pass the object cache's trust check (`vet_directory`, cache.py: it
  and its parents owned by the user or root, not writable by others), else
  nothing is read or written there (one `CacheWarning`); the file is read
  only as a regular file of the current user, opened without following a
  symlink (`read_private_file`): the model steers which code runs. The file is
  owner-only and written atomically (temp file + rename); a corrupt,
  mismatched or stale (older than `MAX_AGE_SECONDS`) file is ignored and
  re-measured. A measurement taken while no core was idle (`machine_busy`)
  is used by that process but never stored, so a busy moment cannot skew
  every later process's costs. `FUSEBIND_CACHE=0`: measured once per
  process, nothing written.
- `machine_model(choice)`: the model the runtime prices with. `choice` is a
  `MachineModel`, `"default"`, `"measured"`, or None, which reads
  `FUSEBIND_MACHINE` (`default` forces `MachineModel.default()`, for tests
  and reproducible output; unset or `measured`: the measured model).
- `measured_machine()`: the measured model (the tools layer passes it to
  `fuse{machine=measured}`: `fusebind.tools.passes.SERVICES`).

If measuring fails (no native target, a lowering error), the model is the
documented default and a `MachineCalibrationWarning` says why.

Must not: run at import time (the first plan or compile that prices a
region asks for it), or write the binding table (calibration kernels are
loaded and called directly, never bound).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from fusebind.dialect.errors import FusebindInternalError, FusebindTypeError, FusebindValueError
from fusebind.compiler.cost import MACHINE_CHOICES, MachineModel
from fusebind.runtime.session import Session, default_session

#: Environment variable choosing the machine model (`default` or `measured`).
MACHINE_ENV = "FUSEBIND_MACHINE"
#: Bump when what `calibrate_machine` measures changes meaning.
CALIBRATION_FORMAT = "1"


class MachineCalibrationWarning(UserWarning):
    """Calibration failed or its file could not be written; fusebind goes on."""


@dataclass(frozen=True)
class CalibrationSizes:
    """How much work each probe does (tests pass small ones).

    stream_elements: float32 elements per triad array (1e7 = 4e7 bytes, well
    beyond the LLC); compute_elements: the flop probe's array (2048 float32:
    8 KiB in and out, L1-resident); chain_pairs: mul+add pairs per element;
    compute_calls / launch_calls: calls per timed batch; repeats: batches
    (the minimum counts).
    """

    stream_elements: int = 10_000_000
    compute_elements: int = 2048
    chain_pairs: int = 32
    compute_calls: int = 50
    launch_calls: int = 2000
    repeats: int = 5

    def __post_init__(self) -> None:
        for name in ("stream_elements", "compute_elements", "chain_pairs", "compute_calls", "launch_calls",
                     "repeats"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise FusebindValueError(f"CalibrationSizes.{name} must be an int >= 1, got {value!r}")


# ----------------------------------------------------------------- the probes
def _triad_text() -> str:
    t = "tensor<?xf32>"
    return f"""func.func @calibrate_triad(%a: {t}, %b: {t}) -> {t} {{
  %r = fused.region @calibrate_triad (%a, %b) : ({t}, {t}) -> {t} {{
  ^bb0(%x: {t}, %y: {t}):
    %c = prim.constant dense<3.0> : tensor<f32>
    %m = prim.mul %x, %c : ({t}, tensor<f32>) -> {t}
    %s = prim.add %m, %y : ({t}, {t}) -> {t}
    fused.yield %s : {t}
  }}
  func.return %r : {t}
}}"""


def _chain_text(pairs: int) -> str:
    t = "tensor<?xf32>"
    body = ["%c1 = prim.constant dense<0.999> : tensor<f32>", "%c2 = prim.constant dense<0.001> : tensor<f32>"]
    prev = "%x"
    for i in range(pairs):
        body.append(f"%m{i} = prim.mul {prev}, %c1 : ({t}, tensor<f32>) -> {t}")
        body.append(f"%s{i} = prim.add %m{i}, %c2 : ({t}, tensor<f32>) -> {t}")
        prev = f"%s{i}"
    ops = "\n    ".join(body)
    return f"""func.func @calibrate_chain(%a: {t}) -> {t} {{
  %r = fused.region @calibrate_chain (%a) : ({t}) -> {t} {{
  ^bb0(%x: {t}):
    {ops}
    fused.yield {prev} : {t}
  }}
  func.return %r : {t}
}}"""


def _probe(text: str, cache: Any) -> Any:
    """Compile the one region of `text` for dynamic shapes; its thunk's builtin function."""
    from fusebind.dialect import parse_module
    from fusebind.dialect.fused import RegionOp
    from fusebind.lowering import decompose_region
    from fusebind.runtime.kernel import Kernel
    from fusebind.runtime.thunk import ANY_DIM, ThunkCall

    module = parse_module(text)
    region = next(op for op in module.walk() if isinstance(op, RegionOp))
    decomposition = decompose_region(region, None, dynamic=True, cache=cache)
    kernel = Kernel.from_decomposition(decomposition)
    operands = len(region.operands) + len(region.results)
    return ThunkCall(kernel, [[ANY_DIM]] * operands).function


def _best_per_call(fn: Callable[..., Any], args: tuple[Any, ...], calls: int, repeats: int) -> float:
    """Minimum over `repeats` batches of the mean seconds per call."""
    if fn(*args) is None:  # warm-up (first touch of the output); None: the thunk declined
        raise FusebindInternalError("calibration kernel declined its arguments (thunk returned None)")
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def _net(seconds: float, launch_s: float) -> float:
    """`seconds` less the launch time, never below half of it (noise guard)."""
    return max(seconds - launch_s, 0.5 * seconds)


def calibrate_machine(sizes: CalibrationSizes | None = None, *, cache: Any = None) -> MachineModel:
    """Measure this machine now, single-thread, with fusebind's own kernels
    (see the module doc). About 0.3-1 s with the default sizes, most of it
    the two compiles on an object-cache miss. `cache`: the object cache for
    the probe kernels (None: the default one). Raises what lowering or the
    thunk raise when the kernels cannot be built."""
    sizes = sizes or CalibrationSizes()
    triad = _probe(_triad_text(), cache)
    chain = _probe(_chain_text(sizes.chain_pairs), cache)

    one = np.ones(1, np.float32)
    launch_s = _best_per_call(triad, (one, one.copy(), np.empty(1, np.float32)), sizes.launch_calls, sizes.repeats)

    n = sizes.stream_elements
    a, b, out = np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)
    triad_s = _best_per_call(triad, (a, b, out), 1, sizes.repeats)
    del a, b, out
    bandwidth = 3 * 4 * n / _net(triad_s, launch_s)

    m = sizes.compute_elements
    x, y = np.ones(m, np.float32), np.empty(m, np.float32)
    chain_s = _best_per_call(chain, (x, y), sizes.compute_calls, sizes.repeats)
    flops = 2 * sizes.chain_pairs * m / _net(chain_s, launch_s)
    return MachineModel(bandwidth, flops, launch_s * 1e9, source="measured")


# ----------------------------------------------------------------- on disk
def machine_key() -> dict[str, Any]:
    """What a stored model is valid for: this host CPU and fusebind version."""
    from fusebind import __version__
    from fusebind.lowering.codegen import host_target

    host = host_target()
    return {"format": CALIBRATION_FORMAT, "cpu": host.cpu, "features": host.features, "fusebind": __version__}


def machine_cache_path(directory: Path | None, key: Mapping[str, Any] | None = None) -> Path | None:
    """The JSON file of the model for `key` (default: this host) in `directory`
    (None: caching is off, no file)."""
    if directory is None:
        return None
    key = machine_key() if key is None else key
    digest = hashlib.sha256(json.dumps(dict(key), sort_keys=True).encode()).hexdigest()[:16]
    return Path(directory) / f"machine-{digest}.json"


#: A stored model older than this is measured again (machines change under
#: their names: a VM moves host, memory is reconfigured).
MAX_AGE_SECONDS = 7 * 24 * 3600


def load_machine(path: Path, key: Mapping[str, Any], *, now: float | None = None) -> MachineModel | None:
    """The stored model if `path` holds one for exactly `key`, measured less
    than `MAX_AGE_SECONDS` ago; None when it is missing, unreadable, corrupt,
    stale or for another key (then: measure again)."""
    from fusebind.lowering.cache import read_private_file

    raw = read_private_file(path)  # None: absent, a symlink, another user's file
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode())
        if not isinstance(data, dict) or data.get("key") != dict(key):
            return None
        measured_at = datetime.strptime(str(data.get("measured_at")), "%Y-%m-%dT%H:%M:%S%z").timestamp()
        if (time.time() if now is None else now) - measured_at > MAX_AGE_SECONDS:
            return None
        model = MachineModel.from_dict(data.get("model"))
    except (OSError, ValueError, TypeError, UnicodeDecodeError):
        return None
    return MachineModel(model.bandwidth_bytes_per_s, model.flops_per_s, model.launch_ns, source="measured")


def machine_busy(loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg,
                 cpus: int | None = None) -> bool:
    """Whether no core was idle (1-minute load average above the core count
    less half a core): a single-thread probe then measures the contention,
    not the machine. Such a measurement is used but never stored."""
    try:
        load = loadavg()[0]
    except OSError:
        return False
    return load > (cpus or os.cpu_count() or 1) - 0.5


def store_machine(path: Path, key: Mapping[str, Any], model: MachineModel) -> bool:
    """Write `model` for `key` to `path` atomically (temp file in the same
    directory, then rename), owner-only. False (with a warning) on failure;
    False, writing nothing, if the directory is refused (`vet_directory`
    warned)."""
    from fusebind.lowering.cache import vet_directory

    text = json.dumps({"key": dict(key), "model": model.as_dict(),
                       "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=1, sort_keys=True)
    tmp: str | None = None
    try:
        root = vet_directory(path.parent, create=True)  # created 0o700 if absent
        if root is None:
            return False
        fd, tmp = tempfile.mkstemp(prefix=".machine-", suffix=".tmp", dir=root)  # created 0o600
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, root / path.name)
        return True
    except OSError as err:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        warnings.warn(f"fusebind: cannot store the measured machine model at {path} ({err}); it will be measured "
                      "again in the next process. Set FUSEBIND_CACHE_DIR to a writable directory.",
                      MachineCalibrationWarning, stacklevel=3)
        return False


# ----------------------------------------------------------------- per process
def _cache_directory(env: Mapping[str, str]) -> Path | None:
    """Where `env` puts the cache (None: off); not yet vetted."""
    from fusebind.lowering.cache import ObjectCache

    return ObjectCache.from_env(dict(env)).directory


class MachineCalibration:
    """This process's measured model: read from disk or measured, at most once
    per cache location, under one lock (concurrent askers wait for the one
    measurement). `calibrations` and `disk_hits` count what it did.

    measure: the calibration to run (tests pass one with small sizes).
    """

    def __init__(self, measure: Callable[[], MachineModel] | None = None,
                 busy: Callable[[], bool] | None = None) -> None:
        self._measure = measure or calibrate_machine
        # Only the real probe consults the load (tests inject their own measure and busy).
        self._busy = busy or (machine_busy if measure is None else (lambda: False))
        self._lock = threading.Lock()
        self._models: dict[str | None, MachineModel] = {}
        self.calibrations = 0
        self.disk_hits = 0
        self.busy_skips = 0

    def measured(self, env: Mapping[str, str] | None = None) -> MachineModel:
        """The measured model (disk cache per `env`'s cache rules, then measure)."""
        env = os.environ if env is None else env
        directory = _cache_directory(env)
        memo = str(directory) if directory is not None else None
        with self._lock:
            model = self._models.get(memo)
            if model is not None:
                return model
            from fusebind.lowering.cache import vet_directory

            key = machine_key()
            # A refused directory (warned once) is treated as caching off: measure, store nothing.
            root = vet_directory(directory) if directory is not None else None
            path = machine_cache_path(root, key)
            model = load_machine(path, key) if path is not None else None
            if model is not None:
                self.disk_hits += 1
            else:
                model = self._calibrate()
                if path is not None and model.source == "measured":
                    if self._busy():
                        self.busy_skips += 1
                        warnings.warn("fusebind: the machine was busy while its model was measured; the result "
                                      "is used in this process only and measured again in the next one.",
                                      MachineCalibrationWarning, stacklevel=3)
                    else:
                        store_machine(path, key, model)
            self._models[memo] = model
            return model

    def _calibrate(self) -> MachineModel:
        self.calibrations += 1
        try:
            return self._measure()
        except Exception as err:  # any failure: price with the documented default, say why once
            warnings.warn(f"fusebind: measuring the machine model failed ({type(err).__name__}: {err}); "
                          f"using the documented default. Set {MACHINE_ENV}=default to skip measuring.",
                          MachineCalibrationWarning, stacklevel=4)
            return MachineModel.default()

    def model(self, choice: MachineModel | str | None = None, env: Mapping[str, str] | None = None) -> MachineModel:
        """The model for `choice` (see `machine_model`)."""
        if isinstance(choice, MachineModel):
            return choice
        env = os.environ if env is None else env
        if choice is None:
            raw = env.get(MACHINE_ENV, "").strip().lower() or "measured"
            where = f"{MACHINE_ENV}={env.get(MACHINE_ENV)!r}"
        elif isinstance(choice, str):
            raw, where = choice.strip().lower(), f"machine={choice!r}"
        else:
            raise FusebindTypeError(f"machine must be a MachineModel, 'default', 'measured' or None, "
                            f"got {type(choice).__name__}")
        if raw == "default":
            return MachineModel.default()
        if raw == "measured":
            return self.measured(env)
        raise FusebindValueError(f"fusebind: unknown machine model {where}; expected one of {', '.join(MACHINE_CHOICES)}")


def process_calibration(session: Session | None = None) -> MachineCalibration:
    """The `MachineCalibration` of `session` (None: the default session's, the
    process's); its counters say whether it measured."""
    return (session or default_session()).slot("calibration", MachineCalibration)


def measured_machine() -> MachineModel:
    """This machine's measured model (once per process; cached on disk)."""
    return process_calibration().measured()


def machine_model(choice: MachineModel | str | None = None) -> MachineModel:
    """The model the runtime prices with: a `MachineModel` as given;
    `"default"`/`"measured"`; None: `FUSEBIND_MACHINE` (unset = measured)."""
    if isinstance(choice, MachineModel):
        return choice
    return process_calibration().model(choice)


__all__ = [
    "CALIBRATION_FORMAT", "CalibrationSizes", "MACHINE_ENV", "MachineCalibration", "MachineCalibrationWarning",
    "MAX_AGE_SECONDS", "calibrate_machine", "load_machine", "machine_busy", "machine_cache_path", "machine_key",
    "machine_model", "measured_machine", "process_calibration", "store_machine",
]
