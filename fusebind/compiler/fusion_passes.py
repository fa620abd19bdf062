"""The `fuse` pass of `fusebind-opt`: `optimize_graph` as a module pass.

    fusebind-opt f.mlir -p 'fuse{gate=all max-ops=8 remarks=true}'

Options:
- `gate`: `table` (default) asks the global binding-table snapshot; `all`
  assumes every kernel is bound; `none` assumes none is.
- `max-ops`: the region size bound.
- `remarks`: print every decision as `remark: ...` on stderr.
- `backend`: the backend the gate asks about (`cpu`).
- `machine`: `default` (the documented constants: deterministic output) or
  `measured` (this machine, calibrated by the runtime).
- `launch-ns`, `gflops`: override that machine model (negative: keep its
  value), so lit tests can make fusion unprofitable.

The compiler never imports the runtime, by statement or by name. What
`gate=table` and `machine=measured` need from it comes in as a
`FuseServices` value on the pass class (`FusePass.services`): the tools layer
(`fusebind.tools.passes`), which may import every room, registers a
`FusePass` subclass served by the runtime's table gate and calibration. This
class alone serves `gate=all`/`gate=none` with the default machine, and
refuses the rest with an error saying so. `fuse-jit` lives in the runtime
(`fusebind.runtime.jit`), because it compiles and adopts kernels.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, TextIO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusebind.dialect.errors import FusebindInternalError, FusebindValueError
from fusebind.compiler.context import DEFAULT_BACKEND, DEFAULT_MAX_REGION_OPS, OptimizationContext
from fusebind.compiler.cost import MACHINE_CHOICES, MachineModel
from fusebind.compiler.optimize import OptimizeResult, optimize_graph

GATES = ("table", "all", "none")

#: `(backend, **options) -> OptimizationContext` gated by the binding table.
TableContext = Callable[..., OptimizationContext]


@dataclass(frozen=True)
class FuseServices:
    """What the fusion passes cannot make from IR, given by whoever registers them.

    - `table_context(backend, **options)`: the context `gate=table` optimizes
      in (the runtime's `jit.table_context`: the current snapshot, gated by
      `fused_kernel_available_in`);
    - `measured_machine()`: this machine's model for `machine=measured` (the
      runtime's `calibrate.measured_machine`), asked only when named.
    None: not available here; a pass option that needs it is refused by name.
    """

    table_context: TableContext | None = None
    measured_machine: Callable[[], MachineModel] | None = None

    def machine(self, name: str) -> MachineModel:
        """The model a `machine=` option names: `default` or `measured`."""
        key = name.strip().lower() if isinstance(name, str) else name
        if key == "default":
            return MachineModel.default()
        if key == "measured":
            if self.measured_machine is None:
                raise FusebindInternalError(
                    "machine=measured needs this machine's measured model, which this pass was not given; "
                    "run it through fusebind-opt (fusebind.tools.opt) or use machine=default")
            return self.measured_machine()
        raise FusebindValueError(f"unknown machine model {name!r}; expected one of {', '.join(MACHINE_CHOICES)}")

    def table(self, backend: str, **options: Any) -> OptimizationContext:
        """The table-gated context (`gate=table`)."""
        if self.table_context is None:
            raise FusebindInternalError(
                "fuse{gate=table} needs the runtime's binding table, which this pass was not given; "
                "run it through fusebind-opt (fusebind.tools.opt), or use gate=all or gate=none")
        return self.table_context(backend, **options)


def machine_with(launch_ns: float, gflops: float, base: MachineModel | None = None) -> MachineModel:
    """`base` (default: the documented default) with the overrides that are >= 0."""
    base = base if base is not None else MachineModel.default()
    if gflops <= 0 and launch_ns < 0:
        return base
    return MachineModel(
        base.bandwidth_bytes_per_s,
        gflops * 1e9 if gflops > 0 else base.flops_per_s,
        launch_ns if launch_ns >= 0 else base.launch_ns,
        f"{base.source}, overridden",
    )


def replace_module_body(target: ModuleOp, source: ModuleOp) -> None:
    """Move `source`'s ops into `target`, dropping `target`'s own."""
    block = target.body.blocks[0]
    for op in list(block.ops):
        op.detach()
    for op in list(source.body.blocks[0].ops):
        op.detach()
        block.add_op(op)


def print_remarks(result: OptimizeResult, stream: TextIO) -> None:
    for line in result.remarks():
        stream.write(line + "\n")


@dataclass(frozen=True)
class FusionOptions:
    """The options `fuse` and `fuse-jit` share: region size, remarks, backend, and the machine model
    (`machine=default|measured`, with `launch_ns` / `gflops` overrides when >= 0)."""

    max_ops: int = DEFAULT_MAX_REGION_OPS
    remarks: bool = False
    backend: str = DEFAULT_BACKEND
    launch_ns: float = -1.0
    gflops: float = -1.0
    machine: str = "default"


@dataclass(frozen=True)
class FusePass(FusionOptions, ModulePass):
    """Capability-gated, cost-based fusion (see `fusebind.compiler.optimize`).

    Not registered here: `fusebind.tools.passes` registers the subclass whose
    `services` reach the runtime (see the module docstring)."""

    name = "fuse"
    #: where `gate=table` and `machine=measured` come from: a class attribute,
    #: not an option; the tools layer's subclass sets it.
    services: ClassVar[FuseServices] = FuseServices()

    gate: str = "table"

    def context(self) -> OptimizationContext:
        """The context this pass instance optimizes with."""
        machine = machine_with(self.launch_ns, self.gflops, self.services.machine(self.machine))
        options: dict[str, Any] = {"max_region_ops": self.max_ops, "machine": machine}
        if self.gate == "all":
            return OptimizationContext.gate_all(backend=self.backend, **options)
        if self.gate == "none":
            return OptimizationContext.gate_none(backend=self.backend, **options)
        if self.gate == "table":
            return self.services.table(self.backend, **options)
        raise FusebindValueError(f"fuse: unknown gate {self.gate!r}; expected one of {', '.join(GATES)}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        result = optimize_graph(op, self.context())
        if self.remarks:
            print_remarks(result, sys.stderr)
        replace_module_body(op, result.module)
