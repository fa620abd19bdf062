"""Cost types and the Layer-1 cost model.

This module owns: `CostEstimate` (flops, bytes, ns, trust), the
`UNKNOWN_COST` sentinel and the one comparison the rest of fusebind may use
(`cheaper`), the `MachineModel` (bandwidth, flop rate, launch overhead), and
the Layer-1 composition of a cost from IR (`compose_region_cost`,
`compose_primitives_cost`).

It reads only IR, duck-typed: an op's `flops()` and the tensor types of its
operands and results. It never imports the runtime, never runs a kernel.

Trust order: measured > declared > composed. An unknown cost is a sentinel,
never zero: it is not equal to any estimate and it never wins `cheaper`.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any, Iterable, Literal

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
                raise TypeError(f"CostEstimate.{field} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"CostEstimate.{field} must be finite and >= 0, got {value!r}; "
                    "use UNKNOWN_COST when the cost cannot be priced"
                )
        if self.trust not in TRUST_ORDER:
            raise ValueError(
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


@dataclass(frozen=True)
class MachineModel:
    """What one kernel launch on this machine can do: streaming bandwidth
    (bytes/s), elementwise flop rate (flops/s) and a per-launch overhead."""

    bandwidth_bytes_per_s: float
    flops_per_s: float
    launch_ns: float

    def __post_init__(self) -> None:
        for field in ("bandwidth_bytes_per_s", "flops_per_s"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"MachineModel.{field} must be finite and > 0, got {value!r}")
        if not (math.isfinite(self.launch_ns) and self.launch_ns >= 0):
            raise ValueError(f"MachineModel.launch_ns must be finite and >= 0, got {self.launch_ns!r}")

    @staticmethod
    def default() -> "MachineModel":
        """Documented numbers for the reference machine (PERFORMANCE.md):
        ~20 GB/s single-thread STREAM triad; 50 GFLOP/s, a conservative
        single-thread AVX-512 elementwise rate; 500 ns per kernel launch from
        Python (measured call overhead of a prepared plan is 0.42-0.5 us)."""
        return MachineModel(bandwidth_bytes_per_s=20e9, flops_per_s=50e9, launch_ns=500.0)

    @staticmethod
    def measure() -> "MachineModel":
        """Measure this machine once per process (about 0.1 s): a STREAM-like
        triad with numpy for bandwidth, an in-cache numpy multiply for the flop
        rate. numpy's elementwise rate is a lower bound of what a fused LLVM
        loop reaches (measured ~4 GFLOP/s vs ~35 GB/s here), so the measured
        model leans memory-bound-optimistic, compute-bound-pessimistic. The
        launch overhead keeps the documented default."""
        return _measured_machine()

    def roofline_ns(self, flops: float, nbytes: float) -> float:
        """Time bound by the slower of compute and memory, without launch."""
        return max(flops / self.flops_per_s, nbytes / self.bandwidth_bytes_per_s) * 1e9


@functools.lru_cache(maxsize=1)
def _measured_machine() -> MachineModel:
    import numpy as np

    n = 1 << 22  # 16 MiB per float32 array: well outside L2
    b = np.ones(n, np.float32)
    c = np.ones(n, np.float32)
    a = np.empty(n, np.float32)
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        np.multiply(c, np.float32(3.0), out=a)
        np.add(a, b, out=a)
        best = min(best, time.perf_counter() - t0)
    # Two passes: 2 reads + 1 write, then 2 reads + 1 write.
    bandwidth = 6 * n * 4 / best

    m = 1 << 14  # in L1/L2: the flop rate, not the bandwidth
    x = np.ones(m, np.float32)
    y = np.empty(m, np.float32)
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(20):
            np.multiply(x, x, out=y)
        best = min(best, time.perf_counter() - t0)
    flops = 20 * m / best
    return MachineModel(bandwidth, flops, MachineModel.default().launch_ns)


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


def compose_region_cost(region: Any, machine: MachineModel) -> Cost:
    """Layer-1 cost of a `fused.region`: its body's flops, its boundary bytes
    (operands + results) and one launch, as a roofline. Any dynamic shape or
    an op that cannot count its flops gives UNKNOWN_COST."""
    flops = 0.0
    for op in region.body.block.ops:
        op_flops = _op_flops(op)
        if op_flops is None:
            return UNKNOWN_COST
        flops += op_flops
    nbytes = _boundary_bytes([*region.operands, *region.results])
    if nbytes is None:
        return UNKNOWN_COST
    ns = machine.roofline_ns(flops, nbytes) + machine.launch_ns
    return CostEstimate(float(flops), float(nbytes), ns, "composed")


def compose_primitives_cost(ops: Iterable[Any], machine: MachineModel) -> Cost:
    """The unfused cost of `ops`: each is its own launch reading its operands
    and writing its results. Compare it with `compose_region_cost`."""
    total = CostEstimate(0.0, 0.0, 0.0, "composed")
    for op in ops:
        op_flops = _op_flops(op)
        if op_flops is None:
            return UNKNOWN_COST
        if op_flops == 0.0 and (op.name.endswith(".yield") or op.name == "func.return"):
            continue
        nbytes = _boundary_bytes([*op.operands, *op.results])
        if nbytes is None:
            return UNKNOWN_COST
        ns = machine.roofline_ns(op_flops, nbytes) + machine.launch_ns
        total = total + CostEstimate(float(op_flops), float(nbytes), ns, "composed")
    return total
