"""Cost types and the Layer-1 cost model.

This module owns: `CostEstimate` (flops, bytes, ns, trust), the
`UNKNOWN_COST` sentinel and the one comparison the rest of fusebind may use
(`cheaper`), the `MachineModel` (bandwidth, flop rate, launch overhead; its
documented `default()`), and the Layer-1 composition of a cost from IR
(`compose_region_cost`, `compose_primitives_cost`).

It reads only IR, duck-typed: an op's `flops()` and the tensor types of its
operands and results. It never imports the runtime, never runs a kernel, and
never fetches a machine model: every price is made with the `MachineModel`
value it is given. This machine's measured model is the runtime's
(`fusebind.runtime.calibrate`); whoever needs it passes it in (`fusebind-opt`
through `fusion_passes.FuseServices`, the runtime directly).

Trust order: measured > declared > composed. An unknown cost is a sentinel,
never zero: it is not equal to any estimate and it never wins `cheaper`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

from fusebind.dialect.errors import FusebindTypeError, FusebindValueError

Trust = Literal["composed", "declared", "measured"]

#: Trust levels, least trusted first.
TRUST_ORDER: tuple[str, ...] = ("composed", "declared", "measured")


@dataclass(frozen=True)
class CostEstimate:
    """A priced cost: `flops` operations, `bytes` moved, `ns` predicted or
    measured nanoseconds, and how far to `trust` it."""

    flops: float
    bytes: float
    ns: float
    trust: Trust = "composed"

    def __post_init__(self) -> None:
        for field in ("flops", "bytes", "ns"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise FusebindTypeError(f"CostEstimate.{field} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise FusebindValueError(
                    f"CostEstimate.{field} must be finite and >= 0, got {value!r}; "
                    "use UNKNOWN_COST when the cost cannot be priced"
                )
        if self.trust not in TRUST_ORDER:
            raise FusebindValueError(
                f"CostEstimate.trust must be one of {TRUST_ORDER}, got {self.trust!r}"
            )

    @property
    def is_known(self) -> bool:
        """Always True for an estimate (False only for UNKNOWN_COST)."""
        return True

    @property
    def trust_rank(self) -> int:
        """0 for composed, 1 for declared, 2 for measured."""
        return TRUST_ORDER.index(self.trust)

    def __add__(self, other: "CostEstimate") -> "CostEstimate":
        """Sum of two costs; the result is only as trusted as the weaker one."""
        if not isinstance(other, CostEstimate):
            return NotImplemented
        trust = TRUST_ORDER[min(self.trust_rank, other.trust_rank)]
        return CostEstimate(
            self.flops + other.flops, self.bytes + other.bytes, self.ns + other.ns, trust  # type: ignore[arg-type]
        )


class UnknownCost:
    """The type of the `UNKNOWN_COST` sentinel: a cost nobody priced.

    It has no numbers on purpose (reading `.ns` raises), equals only itself,
    and has no ordering: compare costs with `cheaper`, where unknown never wins.
    """

    _instance: "UnknownCost | None" = None
    trust = "unknown"

    def __new__(cls) -> "UnknownCost":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @property
    def is_known(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        if name in ("flops", "bytes", "ns"):
            raise AttributeError(
                f"UNKNOWN_COST has no {name}: it was never priced; "
                "check `cost.is_known` or compare with `cheaper(a, b)`"
            )
        raise AttributeError(name)

    def __repr__(self) -> str:
        return "UNKNOWN_COST"

    def __reduce__(self) -> str:
        return "UNKNOWN_COST"


UNKNOWN_COST = UnknownCost()

Cost = CostEstimate | UnknownCost


def cheaper(a: Cost, b: Cost) -> bool:
    """True iff `a` is known and predicted strictly faster than `b`.

    Total over every pair: an unknown cost is never cheaper than anything,
    and any known cost is cheaper than an unknown one.
    """
    if not a.is_known:
        return False
    if not b.is_known:
        return True
    return a.ns < b.ns  # type: ignore[union-attr]


def more_trusted(a: Cost, b: Cost) -> Cost:
    """The estimate to believe of two for the same thing (measured > declared
    > composed > unknown); `a` on a tie."""
    if not b.is_known:
        return a
    if not a.is_known:
        return b
    return b if b.trust_rank > a.trust_rank else a  # type: ignore[union-attr]


# --------------------------------------------------------------------------- machine


#: The machine models a pass option or `FUSEBIND_MACHINE` can name.
MACHINE_CHOICES: tuple[str, ...] = ("default", "measured")


@dataclass(frozen=True)
class MachineModel:
    """What one kernel launch on this machine can do: streaming bandwidth
    (bytes/s), elementwise flop rate (flops/s) and a per-launch overhead.

    `source` says where the numbers came from (`"default"`, `"measured"`,
    or `"custom"` for a hand-built model); it is shown by `describe()` and
    is not part of equality (two models with the same numbers price alike).
    """

    bandwidth_bytes_per_s: float
    flops_per_s: float
    launch_ns: float
    source: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        for name in ("bandwidth_bytes_per_s", "flops_per_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise FusebindValueError(f"MachineModel.{name} must be finite and > 0, got {value!r}")
        if not (isinstance(self.launch_ns, (int, float)) and math.isfinite(self.launch_ns) and self.launch_ns >= 0):
            raise FusebindValueError(f"MachineModel.launch_ns must be finite and >= 0, got {self.launch_ns!r}")
        if not isinstance(self.source, str) or not self.source:
            raise FusebindValueError(f"MachineModel.source must be a non-empty string, got {self.source!r}")

    @staticmethod
    def default() -> "MachineModel":
        """Documented numbers for the reference machine (PERFORMANCE.md):
        ~20 GB/s single-thread STREAM triad; 50 GFLOP/s, a conservative
        single-thread AVX-512 elementwise rate; 500 ns per kernel launch from
        Python (measured call overhead of a prepared plan is 0.42-0.5 us).
        Deterministic: `fusebind-opt` and `FUSEBIND_MACHINE=default` use it."""
        return MachineModel(bandwidth_bytes_per_s=20e9, flops_per_s=50e9, launch_ns=500.0, source="default")

    def roofline_ns(self, flops: float, nbytes: float) -> float:
        """Time bound by the slower of compute and memory, without launch."""
        return max(flops / self.flops_per_s, nbytes / self.bandwidth_bytes_per_s) * 1e9

    def describe(self) -> str:
        """One line for people: `machine model (measured): 18.2 GB/s, 39.5 GFLOP/s, launch 85 ns`."""
        return (f"machine model ({self.source}): {self.bandwidth_bytes_per_s / 1e9:.3g} GB/s, "
                f"{self.flops_per_s / 1e9:.3g} GFLOP/s, launch {self.launch_ns:.3g} ns")

    def as_dict(self) -> dict[str, Any]:
        """The model as JSON-ready numbers (and its source)."""
        return {"bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "flops_per_s": self.flops_per_s,
                "launch_ns": self.launch_ns, "source": self.source}

    @staticmethod
    def from_dict(data: Any) -> "MachineModel":
        """Inverse of `as_dict`; raises ValueError (or TypeError) naming what is wrong."""
        if not isinstance(data, dict):
            raise FusebindTypeError(f"MachineModel.from_dict needs a dict, got {type(data).__name__}")
        missing = [k for k in ("bandwidth_bytes_per_s", "flops_per_s", "launch_ns") if k not in data]
        if missing:
            raise FusebindValueError(f"MachineModel.from_dict: missing {', '.join(missing)}")
        return MachineModel(data["bandwidth_bytes_per_s"], data["flops_per_s"], data["launch_ns"],
                            data.get("source", "custom"))


# --------------------------------------------------------------------------- Layer 1


def _element_bytes(element_type: Any) -> int | None:
    width = getattr(element_type, "bitwidth", None)
    if width is None:
        w = getattr(element_type, "width", None)
        width = getattr(w, "data", w)
    if not isinstance(width, int):
        return None
    return max(1, width // 8)


def _value_bytes(value: Any) -> int | None:
    """Bytes of one SSA value of tensor (or scalar) type; None if dynamic."""
    typ = value.type
    get_shape = getattr(typ, "get_shape", None)
    if get_shape is None:
        return _element_bytes(typ)
    shape = tuple(get_shape())
    if any(d is None or d < 0 for d in shape):
        return None
    elem = _element_bytes(typ.get_element_type())
    if elem is None:
        return None
    return math.prod(shape) * elem


def _boundary_bytes(values: Iterable[Any]) -> int | None:
    total = 0
    for value in values:
        nbytes = _value_bytes(value)
        if nbytes is None:
            return None
        total += nbytes
    return total


def _op_flops(op: Any) -> float | None:
    if getattr(op, "name", "").endswith(".yield") or getattr(op, "name", "") == "func.return":
        return 0.0
    flops = getattr(op, "flops", None)
    if flops is None:
        return None
    return flops()


# Gathers (an op with `gathered_bytes`, prim.gather / prim.take_along) read only the elements they
# pick: an embedding table of 50k rows read for 8 rows costs 8 rows, not the table.
def _gathered(op: Any, operand: int) -> int | None:
    """Bytes `op` reads of its operand #operand when it is a gather's data operand, else None."""
    fn = getattr(op, "gathered_bytes", None)
    return fn(operand) if fn is not None else None


def _op_bytes(op: Any) -> int | None:
    """Bytes one unfused op moves: its operands (what a gather reads of its data) and results,
    plus the extra passes a gather's reference makes over its indices (`reference_index_passes`:
    the range check and normalization run on numpy temporaries before the take)."""
    total = _boundary_bytes(op.results)
    if total is None:
        return None
    for k, operand in enumerate(op.operands):
        nbytes = _gathered(op, k)
        if nbytes is None:
            nbytes = _value_bytes(operand)
            if nbytes is None:
                return None
            nbytes *= max(1, int(getattr(op, "reference_index_passes", lambda i: 1)(k)))
        total += nbytes
    return total


def _arg_read_bytes(operand: Any, arg: Any) -> int | None:
    """Bytes a region reads of one operand: all of it, or, when every use of its block argument
    is a gather's data operand, the elements those gathers pick (at most the whole operand)."""
    whole = _value_bytes(operand)
    uses = list(getattr(arg, "uses", ()))
    picked = [_gathered(u.operation, u.index) for u in uses]
    if not uses or any(p is None for p in picked):
        return whole
    return min(sum(picked), whole) if whole is not None else sum(picked)  # type: ignore[arg-type]


def compose_region_cost(region: Any, machine: MachineModel) -> Cost:
    """Layer-1 cost of a `fused.region`: its body's flops, its boundary bytes
    (operands + results; an operand only gathered from counts the elements picked)
    and one launch, as a roofline. Any dynamic shape or
    an op that cannot count its flops gives UNKNOWN_COST."""
    flops = 0.0
    for op in region.body.block.ops:
        op_flops = _op_flops(op)
        if op_flops is None:
            return UNKNOWN_COST
        flops += op_flops
    nbytes = _boundary_bytes(region.results)
    if nbytes is None:
        return UNKNOWN_COST
    for operand, arg in zip(region.operands, region.body.block.args):
        read = _arg_read_bytes(operand, arg)
        if read is None:
            return UNKNOWN_COST
        nbytes += read
    ns = machine.roofline_ns(flops, nbytes) + machine.launch_ns
    return CostEstimate(float(flops), float(nbytes), ns, "composed")


def compose_primitives_cost(ops: Iterable[Any], machine: MachineModel) -> Cost:
    """The unfused cost of `ops`: each is its own launch reading its operands
    (a gather: what it picks, `_op_bytes`) and writing its results. Compare it with `compose_region_cost`."""
    total = CostEstimate(0.0, 0.0, 0.0, "composed")
    for op in ops:
        op_flops = _op_flops(op)
        if op_flops is None:
            return UNKNOWN_COST
        if op_flops == 0.0 and (op.name.endswith(".yield") or op.name == "func.return"):
            continue
        nbytes = _op_bytes(op)
        if nbytes is None:
            return UNKNOWN_COST
        ns = machine.roofline_ns(op_flops, nbytes) + machine.launch_ns
        total = total + CostEstimate(float(op_flops), float(nbytes), ns, "composed")
    return total
