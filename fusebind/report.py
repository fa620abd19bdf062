"""What the `fusebind` command reports about one compiled and checked function.

Owns the report records (`FunctionReport` and its rows), collecting them from
an executor's plan and the binding table (`plan_report`, `region_rows`, `kernel_rows`), the
check against the reference outputs (`check_outputs`), and rendering
(`format_report` for people, `FunctionReport.as_dict` for `--json`).

Must not: compile, run or time anything (cli.py does), or write the table.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

#: Default bound on the normwise relative error max|out - ref| / max|ref|, per float dtype.
DEFAULT_TOLERANCE = {"float32": 1e-4, "float64": 1e-9}


@dataclass(frozen=True)
class RegionRow:
    """One fused region of the optimized function and the arm that ran."""

    name: str
    fused_id: int
    ops: int
    op_names: tuple[str, ...]
    arm: str
    reason: str
    arm0_cost: str
    fused_cost: str


@dataclass(frozen=True)
class KernelRow:
    """One kernel the plan resolves to: key, dtypes, backend, source, cost,
    and which row of its slot it is and why it won (`resolve.choose_row`)."""

    node: str
    key: str
    dtypes: str
    backend: str
    source: str
    cost: str
    row: str = ""


@dataclass(frozen=True)
class CheckResult:
    """Outputs against the reference interpreter."""

    passed: bool
    max_abs_error: float
    max_rel_error: float  # normwise: max|out - ref| / max|ref|
    tolerance: float
    detail: str = ""


@dataclass(frozen=True)
class Timing:
    """Median seconds per call, measured interleaved in one process."""

    repeat: int
    fusebind: float
    interpreter: float
    numpy: float | None = None


@dataclass
class FunctionReport:
    """Everything `fusebind run` says about one entry function."""

    source: str
    entry: str
    seed: int
    inputs: list[str]
    machine: str = ""  # the machine model the costs were priced with (MachineModel.describe())
    regions: list[RegionRow] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    kernels: list[KernelRow] = field(default_factory=list)
    compiles: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    arm_calls: dict[str, int] = field(default_factory=dict)
    check: CheckResult | None = None
    timing: Timing | None = None
    #: `--profile`: one dict per plan step (cli_profile.profile_rows); empty without it
    profile: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.check is not None and self.check.passed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"passed": self.passed}


# ----------------------------------------------------------------- collecting
def fmt_cost(cost: Any) -> str:
    """`1.2 us (944 flop, 1.15e+03 B, composed)` or `UNKNOWN_COST`."""
    if cost is None or not getattr(cost, "is_known", False):
        return "UNKNOWN_COST"
    return f"{cost.ns / 1000:.3g} us ({cost.flops:.3g} flop, {cost.bytes:.3g} B, {cost.trust})"


def region_rows(decisions: Sequence[Any]) -> list[RegionRow]:
    """Rows from a plan's region decisions (`RegionDecision`)."""
    return [RegionRow(d.name, int(d.fused_id), len(d.ops), tuple(d.ops), d.arm, d.reason, fmt_cost(d.arm0_cost),
                      fmt_cost(d.fused_cost)) for d in decisions]


def kernel_rows(func: Any, table: Any, backend: str, fused_arm: dict[str, int]) -> list[KernelRow]:
    """The kernel each node of `func` resolves to in `table`, deduplicated.

    `fused_arm` maps a region name to the id whose fused arm runs; a region
    on arm 0 lists the kernels of its primitives instead. A node with no
    kernel (views, constants) runs its numpy reference and is listed so.
    """
    from fusebind.dialect.fused import RegionOp
    from fusebind.runtime.resolve import KernelMiss, compile_one, node_dtypes

    rows: dict[tuple[str, str], KernelRow] = {}

    def add(node: Any, fused_id: int | None = None) -> None:
        label = f"@{node.region_name}" if isinstance(node, RegionOp) else node.name
        dtypes = "(" + ", ".join(d.value for d in node_dtypes(node)) + ")"
        try:
            r = compile_one(node, table, backend, fused_id=fused_id)
            row = KernelRow(label, repr(r.key), dtypes, backend, r.row.source, fmt_cost(r.cost),
                            f"row {r.index} of {r.of}: {r.why}")
        except KernelMiss:
            if node.name in ("prim.constant", "prim.reshape", "prim.broadcast_to"):
                return  # views and constants: no kernel by design
            row = KernelRow(label, "-", dtypes, backend, "numpy reference (no kernel bound)", "UNKNOWN_COST")
        rows.setdefault((row.key if row.key != "-" else label, dtypes), row)

    for op in func.body.blocks[0].ops:
        if op.name == "func.return":
            continue
        if isinstance(op, RegionOp):
            fid = fused_arm.get(op.region_name)
            if fid:
                add(op, fid)
                continue
            for inner in list(op.body.blocks[0].ops)[:-1]:
                add(inner)
            continue
        add(op)
    return list(rows.values())


def plan_report(rep: FunctionReport, executor: Any, plan: Any, arrays: Sequence[np.ndarray]) -> FunctionReport:
    """`rep` filled from the executor's plan for `arrays`: machine, regions,
    rejections, kernels bound, compiles, notes, arm calls."""
    from fusebind.runtime.bindings import global_bindings

    rep.machine = (plan.machine or executor.machine).describe()
    rep.regions = region_rows(plan.decisions)
    rep.rejected = [d.remark().removeprefix("remark: ") for d in executor.decisions if d.verdict != "fused"]
    fused_arm = {d.name: int(d.fused_id) for d in plan.decisions if d.arm == "fused"}
    shapes = tuple(tuple(a.shape) for a in arrays)
    rep.kernels = kernel_rows(executor.optimized_func(global_bindings(), shapes), global_bindings(),
                              executor.options.backend, fused_arm)
    rep.compiles = [f"@{r.name} -> id {r.fused_id} in {r.seconds * 1e3:.0f} ms" if not r.error
                    else f"@{r.name} failed: {r.error}" for r in executor.compiler.records.values()]
    rep.notes = list(plan.notes)
    arms = executor.stats.arms
    rep.arm_calls = {"fused": arms.fused_calls, "arm 0": arms.arm0_calls}
    return rep


def check_outputs(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray], tolerance: float | None) -> CheckResult:
    """Compare every output with its reference.

    Floats: the normwise relative error max|out - ref| / max|ref| must be at
    most the tolerance (per-dtype default), and NaNs must sit at the same
    places. Integers and booleans must match exactly.
    """
    worst_abs, worst_rel, tol_used, problems = 0.0, 0.0, 0.0, []
    for i, (out, ref) in enumerate(zip(outs, refs)):
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape or out.dtype != ref.dtype:
            problems.append(f"result #{i} is {out.dtype}{list(out.shape)}, the reference {ref.dtype}{list(ref.shape)}")
            continue
        if ref.dtype.kind != "f":
            bad = int(np.count_nonzero(out != ref))
            if bad:
                problems.append(f"result #{i}: {bad} of {ref.size} elements differ")
                worst_abs = max(worst_abs, float(np.max(np.abs(out.astype(np.float64) - ref.astype(np.float64)))))
            continue
        tol = tolerance if tolerance is not None else DEFAULT_TOLERANCE.get(str(ref.dtype), 1e-4)
        tol_used = max(tol_used, tol)
        nan_out, nan_ref = np.isnan(out), np.isnan(ref)
        if not np.array_equal(nan_out, nan_ref):
            problems.append(f"result #{i}: NaNs at {int(np.count_nonzero(nan_out != nan_ref))} places differ")
        ok = ~nan_ref & ~nan_out
        if not ok.any():
            continue
        diff = np.abs(out[ok].astype(np.float64) - ref[ok].astype(np.float64))
        abs_err = float(np.max(diff)) if diff.size else 0.0
        scale = float(np.max(np.abs(ref[ok].astype(np.float64))))
        rel = abs_err / scale if scale > 0 else (0.0 if abs_err == 0 else math.inf)
        worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel)
        if rel > tol:
            problems.append(f"result #{i}: normwise relative error {rel:.3g} > tolerance {tol:.3g}")
    return CheckResult(not problems, worst_abs, worst_rel, tol_used, "; ".join(problems))


# ----------------------------------------------------------------- rendering
def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-2 else f"{seconds * 1e3:.2f} ms"


def format_report(rep: FunctionReport) -> str:
    """The human-readable report of one function."""
    lines = [f"== {rep.source} @{rep.entry} (seed {rep.seed})",
             f"inputs: {', '.join(rep.inputs) if rep.inputs else 'none'}"]
    if rep.machine:
        lines.append(rep.machine)
    lines.append(f"fused regions: {len(rep.regions)}")
    for r in rep.regions:
        lines.append(f"  id {r.fused_id:<6} @{r.name:<28} {r.ops:>3} ops  arm: {r.arm}")
        lines.append(f"      cost: arm 0 {r.arm0_cost}; fused {r.fused_cost}")
        lines.append(f"      why: {r.reason}")
    for line in rep.rejected:
        lines.append(f"  not fused: {line}")
    lines.append(f"kernels bound: {len(rep.kernels)}")
    for k in rep.kernels:
        row = f"; {k.row}" if k.row else ""
        lines.append(f"  {k.key:<22} {k.dtypes:<28} {k.backend:<4} {k.source}  [{k.node}; {k.cost}{row}]")
    for c in rep.compiles:
        lines.append(f"compiled: {c}")
    for n in rep.notes:
        lines.append(f"note: {n}")
    if rep.arm_calls:
        lines.append("arms run: " + ", ".join(f"{k} {v}" for k, v in rep.arm_calls.items()))
    c = rep.check
    if c is not None:
        verdict = "PASS" if c.passed else "FAIL"
        lines.append(f"check vs reference interpreter: {verdict} (max abs error {c.max_abs_error:.3g}, "
                     f"normwise relative error {c.max_rel_error:.3g}, tolerance {c.tolerance:.3g})"
                     + (f": {c.detail}" if c.detail else ""))
    t = rep.timing
    if t is not None:
        parts = [f"fusebind {_us(t.fusebind)}",
                 f"reference interpreter {_us(t.interpreter)} ({t.interpreter / t.fusebind:.2f}x)"]
        if t.numpy is not None:
            parts.append(f"plain numpy {_us(t.numpy)} ({t.numpy / t.fusebind:.2f}x)")
        lines.append(f"time per call (median of {t.repeat}, interleaved; Nx = its time / fusebind's): "
                     + ", ".join(parts))
    return "\n".join(lines)
