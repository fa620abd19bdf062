"""Cost types, the unknown sentinel, the machine model and Layer-1 composition."""

from __future__ import annotations

import math
import pickle

import pytest
from hypothesis import given

from fusebind.dialect import errors as fb_errors
from hypothesis import strategies as st

from fusebind.compiler import (
    TRUST_ORDER,
    UNKNOWN_COST,
    CostEstimate,
    MachineModel,
    as_region,
    cheaper,
    compose_primitives_cost,
    compose_region_cost,
    more_trusted,
)

MACHINE = MachineModel(bandwidth_bytes_per_s=10e9, flops_per_s=1e9, launch_ns=100.0)


def test_cost_estimate_is_frozen_and_validated() -> None:
    c = CostEstimate(1.0, 2.0, 3.0, "measured")
    with pytest.raises(AttributeError):
        c.ns = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"CostEstimate.ns must be finite and >= 0, got -1.0; use UNKNOWN_COST"):
        CostEstimate(1.0, 2.0, -1.0)
    with pytest.raises(ValueError, match="CostEstimate.flops must be finite"):
        CostEstimate(math.nan, 2.0, 1.0)
    with pytest.raises(ValueError, match="trust must be one of"):
        CostEstimate(1.0, 2.0, 3.0, "guessed")  # type: ignore[arg-type]


def test_trust_order_measured_over_declared_over_composed() -> None:
    assert TRUST_ORDER == ("composed", "declared", "measured")
    composed = CostEstimate(1, 1, 100.0, "composed")
    declared = CostEstimate(1, 1, 200.0, "declared")
    measured = CostEstimate(1, 1, 300.0, "measured")
    assert more_trusted(composed, measured) is measured
    assert more_trusted(measured, declared) is measured
    assert more_trusted(composed, declared) is declared
    assert more_trusted(UNKNOWN_COST, composed) is composed and more_trusted(composed, UNKNOWN_COST) is composed
    assert (composed + measured).trust == "composed" and (composed + measured).ns == 400.0


def test_unknown_cost_is_never_zero_never_equal_never_cheaper() -> None:
    zero = CostEstimate(0.0, 0.0, 0.0)
    assert UNKNOWN_COST != zero and zero != UNKNOWN_COST
    assert not UNKNOWN_COST.is_known and zero.is_known
    assert not cheaper(UNKNOWN_COST, zero) and cheaper(zero, UNKNOWN_COST)
    assert not cheaper(UNKNOWN_COST, UNKNOWN_COST)
    with pytest.raises(AttributeError, match="UNKNOWN_COST has no ns: it was never priced"):
        _ = UNKNOWN_COST.ns
    with pytest.raises(TypeError):
        _ = UNKNOWN_COST < zero  # type: ignore[operator]
    assert pickle.loads(pickle.dumps(UNKNOWN_COST)) is UNKNOWN_COST
    assert repr(UNKNOWN_COST) == "UNKNOWN_COST"


costs = st.one_of(
    st.just(UNKNOWN_COST),
    st.builds(CostEstimate, st.floats(0, 1e12), st.floats(0, 1e12), st.floats(0, 1e12), st.sampled_from(TRUST_ORDER)),
)


@given(costs, costs)
def test_cheaper_is_a_strict_total_preorder_where_unknown_never_wins(a, b) -> None:  # noqa: ANN001
    assert not (cheaper(a, b) and cheaper(b, a))
    if not a.is_known:
        assert not cheaper(a, b)
    if a.is_known and not b.is_known:
        assert cheaper(a, b)
    if a.is_known and b.is_known:
        assert cheaper(a, b) == (a.ns < b.ns)


def test_machine_model_default_is_documented_and_validated() -> None:
    d = MachineModel.default()
    assert d.bandwidth_bytes_per_s == 20e9 and d.flops_per_s == 50e9 and d.launch_ns == 500.0
    assert d.source == "default"
    assert d.describe() == "machine model (default): 20 GB/s, 50 GFLOP/s, launch 500 ns"
    with pytest.raises(ValueError, match="bandwidth_bytes_per_s must be finite and > 0"):
        MachineModel(0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="launch_ns must be finite and >= 0"):
        MachineModel(1.0, 1.0, math.inf)
    with pytest.raises(ValueError, match="source must be a non-empty string"):
        MachineModel(1.0, 1.0, 1.0, "")
    assert MACHINE.roofline_ns(1e9, 0) == pytest.approx(1e9)  # compute bound: 1 s
    assert MACHINE.roofline_ns(0, 10e9) == pytest.approx(1e9)  # memory bound: 1 s


def test_machine_model_source_is_not_part_of_equality_and_round_trips() -> None:
    m = MachineModel(12.5e9, 77e9, 123.0, "measured")
    assert m == MachineModel(12.5e9, 77e9, 123.0)  # same numbers price alike
    back = MachineModel.from_dict(m.as_dict())
    assert back == m and back.source == "measured"
    with pytest.raises(ValueError, match="missing flops_per_s"):
        MachineModel.from_dict({"bandwidth_bytes_per_s": 1.0, "launch_ns": 1.0})
    with pytest.raises(TypeError, match="needs a dict"):
        MachineModel.from_dict([1, 2, 3])


def _seed_measured(directory, model: MachineModel) -> None:
    from fusebind.runtime.calibrate import machine_cache_path, machine_key, store_machine

    key = machine_key()
    assert store_machine(machine_cache_path(directory, key), key, model)


def test_fuse_services_name_the_machine_models_and_refuse_what_they_were_not_given() -> None:
    from fusebind.compiler.fusion_passes import FuseServices

    bare = FuseServices()
    assert bare.machine("default") == MachineModel.default()
    assert bare.machine(" Default ").source == "default"
    with pytest.raises(ValueError, match="unknown machine model 'fast'; expected one of default, measured"):
        bare.machine("fast")
    # the compiler alone cannot measure this machine or see the table: it says so, it never guesses
    with pytest.raises(fb_errors.FusebindInternalError, match="machine=measured needs this machine's measured model"):
        bare.machine("measured")
    with pytest.raises(fb_errors.FusebindInternalError, match=r"fuse\{gate=table\} needs the runtime's binding table"):
        bare.table("cpu")
    seeded = MachineModel(12.5e9, 77e9, 123.0, "measured")
    given = FuseServices(measured_machine=lambda: seeded)
    assert given.machine("measured") is seeded
    assert not hasattr(MachineModel, "measure")  # the cost model receives a model, it never fetches one


def test_the_measured_model_reaches_the_tools_fuse_pass_from_the_runtime(tmp_path, monkeypatch) -> None:
    from fusebind.tools.passes import FusePass, measured_machine

    seeded = MachineModel(12.5e9, 77e9, 123.0, "measured")
    _seed_measured(tmp_path, seeded)
    monkeypatch.setenv("FUSEBIND_CACHE_DIR", str(tmp_path))
    m = measured_machine()
    assert m == seeded and m.source == "measured"
    assert measured_machine() is m  # once per process (per cache location)
    assert FusePass(gate="all", machine="measured").context().machine is m


def test_fuse_pass_keeps_the_default_machine_unless_asked(tmp_path, monkeypatch) -> None:
    from fusebind.compiler.fusion_passes import FusePass, machine_with
    from fusebind.tools.passes import FusePass as ServedFusePass

    assert FusePass(gate="all").context().machine.source == "default"
    over = FusePass(gate="all", launch_ns=0.0).context().machine
    assert over.launch_ns == 0.0 and over.bandwidth_bytes_per_s == 20e9 and over.source == "default, overridden"
    seeded = MachineModel(12.5e9, 77e9, 123.0, "measured")
    _seed_measured(tmp_path, seeded)
    monkeypatch.setenv("FUSEBIND_CACHE_DIR", str(tmp_path))
    assert ServedFusePass(gate="all", machine="measured").context().machine == seeded
    assert machine_with(-1.0, 2.0, seeded) == MachineModel(12.5e9, 2e9, 123.0)
    with pytest.raises(ValueError, match="unknown machine model 'bogus'"):
        FusePass(gate="all", machine="bogus").context()


def _region(n: str = "1024") -> str:
    t = f"tensor<{n}xf32>"
    return f"""
%r = fused.region @chain (%a, %b) : ({t}, {t}) -> {t} {{
^bb0(%x: {t}, %y: {t}):
  %m = prim.mul %x, %y : ({t}, {t}) -> {t}
  %e = prim.exp %m : {t} -> {t}
  %r = prim.relu %e : {t} -> {t}
  fused.yield %r : {t}
}}"""


def test_compose_region_cost_is_a_roofline_over_body_flops_and_boundary_bytes() -> None:
    region = as_region(_region())
    body = [op for op in region.body.block.ops if op.name.startswith("prim.")]
    flops = sum(op.flops() for op in body)
    assert flops == 1024 * (1 + 8 + 1)  # mul, exp, relu per element (dialect facts)
    cost = compose_region_cost(region, MACHINE)
    nbytes = 3 * 1024 * 4  # two inputs, one output; intermediates never touch memory
    assert (cost.flops, cost.bytes, cost.trust) == (flops, nbytes, "composed")
    assert cost.ns == pytest.approx(max(flops / 1e9, nbytes / 10e9) * 1e9 + 100.0)


def test_unfused_primitives_cost_more_than_the_region() -> None:
    region = as_region(_region())
    body = [op for op in region.body.block.ops if op.name.startswith("prim.")]
    fused = compose_region_cost(region, MACHINE)
    unfused = compose_primitives_cost(body, MACHINE)
    # mul reads 2 writes 1; exp and relu read 1 write 1: 7 arrays moved, three launches.
    assert unfused.bytes == 7 * 1024 * 4 and unfused.flops == fused.flops
    expected_ns = sum(MACHINE.roofline_ns(op.flops(), b * 1024 * 4) + 100.0 for op, b in zip(body, (3, 2, 2)))
    assert unfused.ns == pytest.approx(expected_ns)
    assert cheaper(fused, unfused)


def test_dynamic_shapes_compose_to_unknown() -> None:
    region = as_region(_region("?"))
    assert compose_region_cost(region, MACHINE) is UNKNOWN_COST
    body = [op for op in region.body.block.ops if op.name.startswith("prim.")]
    assert compose_primitives_cost(body, MACHINE) is UNKNOWN_COST
