"""The measured machine model: calibration with fusebind's own kernels, its
disk cache (round trip across processes, corrupt and mismatched files),
`FUSEBIND_MACHINE`, once-per-process under threads, and its use by the
executor, `explain` and the CLI report.

The suite runs with `FUSEBIND_MACHINE=default` (test/conftest.py); these
tests opt in to the measured model explicitly, with small probe sizes or a
seeded cache file, so no test measures with the full-size probes."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from fusebind.compiler.cost import MachineModel, compose_primitives_cost
from fusebind.runtime.calibrate import (
    CalibrationSizes,
    MachineCalibration,
    MachineCalibrationWarning,
    calibrate_machine,
    MAX_AGE_SECONDS,
    load_machine,
    machine_busy,
    machine_cache_path,
    machine_key,
    process_calibration,
    store_machine,
)

TINY = CalibrationSizes(stream_elements=1 << 16, compute_elements=256, chain_pairs=4, compute_calls=5,
                        launch_calls=50, repeats=2)
SEEDED = MachineModel(12.5e9, 77e9, 123.0, "measured")


def _seed(directory: Path, model: MachineModel = SEEDED) -> Path:
    key = machine_key()
    path = machine_cache_path(directory, key)
    assert path is not None and store_machine(path, key, model)
    return path


class _Counting:
    """A stand-in calibration returning fixed numbers, counting its calls."""

    def __init__(self, model: MachineModel = MachineModel(30e9, 60e9, 40.0, "measured"), delay: float = 0.0) -> None:
        self.model, self.delay, self.calls = model, delay, 0

    def __call__(self) -> MachineModel:
        self.calls += 1
        time.sleep(self.delay)
        return self.model


# ----------------------------------------------------------------- measuring
def test_calibrate_returns_sane_single_thread_numbers() -> None:
    m = calibrate_machine(TINY)
    assert m.source == "measured"
    for value in (m.bandwidth_bytes_per_s, m.flops_per_s, m.launch_ns):
        assert math.isfinite(value) and value > 0
    assert 1e9 <= m.bandwidth_bytes_per_s <= 1000e9
    assert 1e9 <= m.flops_per_s <= 10000e9
    assert 10.0 <= m.launch_ns <= 100_000.0


def test_calibration_sizes_are_validated() -> None:
    with pytest.raises(ValueError, match="CalibrationSizes.repeats must be an int >= 1, got 0"):
        CalibrationSizes(repeats=0)


# ----------------------------------------------------------------- the disk cache
def test_measured_once_then_read_from_disk_by_a_new_calibration(tmp_path: Path) -> None:
    env = {"FUSEBIND_CACHE_DIR": str(tmp_path)}
    measure = _Counting()
    first = MachineCalibration(measure)
    m = first.measured(env)
    assert m == measure.model and first.calibrations == 1 and first.disk_hits == 0
    assert first.measured(env) is m and measure.calls == 1  # memoized in the process
    path = machine_cache_path(tmp_path)
    assert path is not None and path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["key"] == machine_key() and data["model"]["flops_per_s"] == 60e9
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind

    second = MachineCalibration(_Counting(MachineModel(1e9, 1e9, 1.0)))
    again = second.measured(env)
    assert again == m and again.source == "measured"
    assert second.calibrations == 0 and second.disk_hits == 1


def test_a_new_process_reads_the_file_and_does_not_measure(tmp_path: Path) -> None:
    _seed(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "FUSEBIND_MACHINE"}
    env["FUSEBIND_CACHE_DIR"] = str(tmp_path)
    code = ("import json\n"
            "from fusebind.runtime.calibrate import machine_model, process_calibration\n"
            "m = machine_model()\n"
            "p = process_calibration()\n"
            "print(json.dumps([p.calibrations, p.disk_hits, m.as_dict()]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    calibrations, disk_hits, model = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (calibrations, disk_hits) == (0, 1)
    assert MachineModel.from_dict(model) == SEEDED and model["source"] == "measured"


@pytest.mark.parametrize("content", ["{not json", "", '{"key": 1, "model": 2}', "\x00\xff binary"])
def test_a_corrupt_file_is_ignored_and_re_measured(tmp_path: Path, content: str) -> None:
    path = _seed(tmp_path)
    path.write_text(content, errors="surrogateescape")
    measure = _Counting()
    cal = MachineCalibration(measure)
    assert cal.measured({"FUSEBIND_CACHE_DIR": str(tmp_path)}) == measure.model
    assert cal.calibrations == 1 and cal.disk_hits == 0
    assert load_machine(path, machine_key()) == measure.model  # rewritten, valid


def test_a_measurement_on_a_busy_machine_is_used_but_never_stored(tmp_path: Path) -> None:
    """Regression: a model measured while other work held every core (3.8 GB/s
    against ~16 GB/s quiet) was stored and priced every later process."""
    measure = _Counting()
    env = {"FUSEBIND_CACHE_DIR": str(tmp_path)}
    busy = MachineCalibration(measure, busy=lambda: True)
    with pytest.warns(MachineCalibrationWarning, match="busy"):
        assert busy.measured(env) == measure.model
    assert busy.busy_skips == 1 and not any(tmp_path.iterdir())
    quiet = MachineCalibration(measure, busy=lambda: False)
    assert quiet.measured(env) == measure.model and quiet.busy_skips == 0
    assert load_machine(machine_cache_path(tmp_path), machine_key()) == measure.model


def test_busy_means_no_idle_core() -> None:
    assert machine_busy(lambda: (1.9, 0.0, 0.0), cpus=2)
    assert not machine_busy(lambda: (1.2, 0.0, 0.0), cpus=2)
    assert not machine_busy(lambda: (0.2, 0.0, 0.0), cpus=1)
    assert machine_busy(lambda: (0.7, 0.0, 0.0), cpus=1)


def test_a_stale_file_is_measured_again(tmp_path: Path) -> None:
    path = _seed(tmp_path)
    key = machine_key()
    assert load_machine(path, key) == SEEDED
    assert load_machine(path, key, now=time.time() + MAX_AGE_SECONDS + 60) is None
    data = json.loads(path.read_text())
    del data["measured_at"]
    path.write_text(json.dumps(data))
    assert load_machine(path, key) is None  # undated: measured again


def test_a_file_for_another_cpu_or_version_is_ignored(tmp_path: Path) -> None:
    key = machine_key()
    path = machine_cache_path(tmp_path, key)
    assert path is not None
    for other in ({**key, "cpu": "someothercpu"}, {**key, "fusebind": "0.0.0-other"}, {**key, "format": "0"}):
        path.write_text(json.dumps({"key": other, "model": SEEDED.as_dict()}))
        assert load_machine(path, key) is None
    invalid = {**SEEDED.as_dict(), "flops_per_s": -1.0}
    path.write_text(json.dumps({"key": key, "model": invalid}))
    assert load_machine(path, key) is None
    cal = MachineCalibration(_Counting())
    assert cal.measured({"FUSEBIND_CACHE_DIR": str(tmp_path)}) != SEEDED and cal.calibrations == 1


def test_cache_off_measures_once_per_process_and_writes_nothing(tmp_path: Path) -> None:
    env = {"FUSEBIND_CACHE": "0", "FUSEBIND_CACHE_DIR": str(tmp_path)}
    measure = _Counting()
    cal = MachineCalibration(measure)
    assert cal.measured(env) is cal.measured(env)
    assert measure.calls == 1 and list(tmp_path.iterdir()) == []


def test_xdg_cache_home_is_the_fallback_location(tmp_path: Path) -> None:
    cal = MachineCalibration(_Counting())
    cal.measured({"XDG_CACHE_HOME": str(tmp_path)})
    assert machine_cache_path(tmp_path / "fusebind") is not None
    assert machine_cache_path(tmp_path / "fusebind").exists()  # type: ignore[union-attr]


def test_an_unwritable_location_warns_and_still_returns_the_model(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cal = MachineCalibration(_Counting())
    with pytest.warns(MachineCalibrationWarning, match="cannot store the measured machine model"):
        m = cal.measured({"FUSEBIND_CACHE_DIR": str(blocker / "cache")})
    assert m.flops_per_s == 60e9


def test_threads_share_one_measurement() -> None:
    measure = _Counting(delay=0.05)
    cal = MachineCalibration(measure)
    env = {"FUSEBIND_CACHE": "0"}
    results: list[MachineModel] = []
    threads = [threading.Thread(target=lambda: results.append(cal.measured(env))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert measure.calls == 1 and cal.calibrations == 1


def test_a_failing_calibration_warns_once_and_prices_with_the_default(tmp_path: Path) -> None:
    calls = []

    def broken() -> MachineModel:
        calls.append(1)
        raise RuntimeError("no native target")

    cal = MachineCalibration(broken)
    env = {"FUSEBIND_CACHE_DIR": str(tmp_path)}
    with pytest.warns(MachineCalibrationWarning, match="RuntimeError: no native target"):
        m = cal.measured(env)
    assert m == MachineModel.default() and m.source == "default"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cal.measured(env) is m  # not retried, no second warning
    assert len(calls) == 1 and list(tmp_path.iterdir()) == []  # a failure is not stored


# ----------------------------------------------------------------- choosing the model
def test_fusebind_machine_default_forces_the_documented_default(tmp_path: Path) -> None:
    measure = _Counting()
    cal = MachineCalibration(measure)
    env = {"FUSEBIND_MACHINE": "default", "FUSEBIND_CACHE_DIR": str(tmp_path)}
    assert cal.model(None, env) == MachineModel.default() and cal.model(None, env).source == "default"
    assert measure.calls == 0
    assert cal.model(None, {"FUSEBIND_CACHE_DIR": str(tmp_path)}) == measure.model  # unset: measured
    assert cal.model(None, {"FUSEBIND_MACHINE": "measured", "FUSEBIND_CACHE_DIR": str(tmp_path)}) == measure.model
    assert cal.model("default", {}) == MachineModel.default()
    assert cal.model(SEEDED, env) is SEEDED
    with pytest.raises(ValueError, match="unknown machine model FUSEBIND_MACHINE='fastest'; expected one of "
                                         "default, measured"):
        cal.model(None, {"FUSEBIND_MACHINE": "fastest"})
    with pytest.raises(TypeError, match="machine must be a MachineModel, 'default', 'measured' or None"):
        cal.model(3.5, env)  # type: ignore[arg-type]


# ----------------------------------------------------------------- used and shown
_CHAIN = """func.func @chain(%a: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<4096xf32> {
  %m = prim.mul %a, %b : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %e = prim.exp %m : tensor<4096xf32> -> tensor<4096xf32>
  %r = prim.add %e, %b : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  func.return %r : tensor<4096xf32>
}"""


def _priced_with(cost: object, model: MachineModel) -> bool:
    return cost.ns == pytest.approx(model.roofline_ns(cost.flops, cost.bytes) + model.launch_ns)  # type: ignore[attr-defined]


def test_the_executor_prices_and_explains_with_the_measured_model(tmp_path: Path, monkeypatch) -> None:
    import fusebind as fb

    _seed(tmp_path)
    monkeypatch.delenv("FUSEBIND_MACHINE", raising=False)
    monkeypatch.setenv("FUSEBIND_CACHE_DIR", str(tmp_path))
    before = process_calibration().calibrations
    f = fb.compile(_CHAIN)
    assert f.executor.options.machine is None  # nothing resolved before the first plan
    a = np.linspace(0.0, 1.0, 4096, dtype=np.float32)
    b = np.full(4096, 0.5, np.float32)
    np.testing.assert_allclose(f(a, b), np.exp(a * b) + b, rtol=1e-5)
    plan = f.executor.plan_for([a, b])
    assert plan.machine == SEEDED and plan.machine.source == "measured"
    assert f.executor.machine == SEEDED
    (decision,) = plan.decisions
    assert decision.arm == "fused"
    assert _priced_with(decision.fused_cost, SEEDED)  # the JIT's compiled cost, priced with the same model
    assert not _priced_with(decision.fused_cost, MachineModel.default())
    fused = [d for d in f.executor.decisions if d.verdict == "fused"]
    assert fused and all(_priced_with(d.fused_cost, SEEDED) for d in fused)  # the optimizer's pricing too
    assert "machine model (measured): 12.5 GB/s, 77 GFLOP/s, launch 123 ns" in f.explain(a, b)
    assert process_calibration().calibrations == before  # read from the seeded file, never measured


def test_the_arm0_cost_is_the_measured_models_composition(tmp_path: Path, monkeypatch) -> None:
    import fusebind as fb
    from fusebind.dialect.fused import RegionOp

    _seed(tmp_path)
    monkeypatch.delenv("FUSEBIND_MACHINE", raising=False)
    monkeypatch.setenv("FUSEBIND_CACHE_DIR", str(tmp_path))
    f = fb.compile(_CHAIN)
    a = np.ones(4096, np.float32)
    plan = f.executor.plan_for([a, a])
    (region,) = [op for op in f.executor.optimized_module.walk() if isinstance(op, RegionOp)]
    body = list(region.body.blocks[0].ops)[:-1]
    (decision,) = plan.decisions
    assert decision.arm0_cost == compose_primitives_cost(body, SEEDED)
    assert decision.arm0_cost != compose_primitives_cost(body, MachineModel.default())


def test_an_explicit_machine_option_wins_over_the_environment(tmp_path: Path, monkeypatch) -> None:
    import fusebind as fb

    _seed(tmp_path)
    monkeypatch.setenv("FUSEBIND_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FUSEBIND_MACHINE", "default")
    a = np.ones(4096, np.float32)
    assert "machine model (measured): 12.5 GB/s" in fb.compile(_CHAIN, machine="measured").explain(a, a)
    mine = MachineModel(1e9, 2e9, 3.0)
    assert "machine model (custom): 1 GB/s, 2 GFLOP/s, launch 3 ns" in fb.compile(_CHAIN, machine=mine).explain(a, a)

    @fb.jit(machine="default")
    def g(x):
        return fb.exp(x) + 1.0

    assert "machine model (default): 20 GB/s, 50 GFLOP/s, launch 500 ns" in g.explain(a)
    with pytest.raises(ValueError, match="machine must be a MachineModel, None, or one of default, measured; "
                                         "got 'fastest'"):
        fb.compile(_CHAIN, machine="fastest")


def test_the_cli_report_names_the_machine_model() -> None:
    import io

    from fusebind.cli import main

    out, err = io.StringIO(), io.StringIO()
    assert main(["run", "--example", "chain", "--dim", "64", "--repeat", "0", "-q"], stdout=out, stderr=err) == 0
    assert "machine model (default): 20 GB/s, 50 GFLOP/s, launch 500 ns" in out.getvalue()  # the suite's default
    out = io.StringIO()
    assert main(["run", "--example", "chain", "--dim", "64", "--repeat", "0", "-q", "--json"], stdout=out,
                stderr=err) == 0
    assert all(r["machine"].startswith("machine model (default)") for r in json.loads(out.getvalue()))
