"""The `fuse` pass of `fusebind-opt`: `optimize_graph` as a module pass.

    fusebind-opt f.mlir -p 'fuse{gate=all max-ops=8 remarks=true}'

Options:
- `gate`: `table` (default) asks the global binding-table snapshot; `all`
  assumes every kernel is bound; `none` assumes none is.
- `max-ops`: the region size bound.
- `remarks`: print every decision as `remark: ...` on stderr.
- `backend`: the backend the gate asks about (`cpu`).
- `machine`: `default` (the documented constants: deterministic output) or
  `measured` (this machine, calibrated by the runtime and reached by name,
  `cost.MACHINE_PROVIDER`, like the table gate below).
- `launch-ns`, `gflops`: override that machine model (negative: keep its
  value), so lit tests can make fusion unprofitable.

The compiler never imports the runtime. `gate=table` needs the table, so
the pass reaches it the way the driver reaches plugin passes: by module
name at run time (`TABLE_GATE_PROVIDER`), a function of the runtime that
builds an `OptimizationContext` around the current snapshot and
`fused_kernel_available_in`. `fuse-jit` lives in the runtime
(`fusebind.runtime.jit`), because it compiles and adopts kernels.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusebind.dialect.errors import FusebindInternalError, FusebindValueError
from fusebind.compiler.context import DEFAULT_MAX_REGION_OPS, OptimizationContext
from fusebind.compiler.cost import MachineModel
from fusebind.compiler.optimize import OptimizeResult, optimize_graph
from fusebind.compiler.passes import register_pass

#: `module:function` building a table-gated context: `(backend, **options) -> OptimizationContext`.
TABLE_GATE_PROVIDER = "fusebind.runtime.jit:table_context"

GATES = ("table", "all", "none")


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


def table_context(backend: str, **options: Any) -> OptimizationContext:
    """An `OptimizationContext` gated by the global table, built by the runtime."""
    module_name, _, attr = TABLE_GATE_PROVIDER.partition(":")
    try:
        provider = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise FusebindInternalError(
            f"fuse{{gate=table}} needs the runtime's table gate {TABLE_GATE_PROVIDER} ({err}); "
            "use gate=all or gate=none to run without the runtime"
        ) from err
    return provider(backend, **options)


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


@register_pass
@dataclass(frozen=True)
class FusePass(ModulePass):
    """Capability-gated, cost-based fusion (see `fusebind.compiler.optimize`)."""

    name = "fuse"

    gate: str = "table"
    max_ops: int = DEFAULT_MAX_REGION_OPS
    remarks: bool = False
    backend: str = "cpu"
    launch_ns: float = -1.0
    gflops: float = -1.0
    machine: str = "default"

    def context(self) -> OptimizationContext:
        """The context this pass instance optimizes with."""
        machine = machine_with(self.launch_ns, self.gflops, MachineModel.named(self.machine))
        options: dict[str, Any] = {"max_region_ops": self.max_ops, "machine": machine}
        if self.gate == "all":
            return OptimizationContext.gate_all(backend=self.backend, **options)
        if self.gate == "none":
            return OptimizationContext.gate_none(backend=self.backend, **options)
        if self.gate == "table":
            return table_context(self.backend, **options)
        raise FusebindValueError(f"fuse: unknown gate {self.gate!r}; expected one of {', '.join(GATES)}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        result = optimize_graph(op, self.context())
        if self.remarks:
            print_remarks(result, sys.stderr)
        replace_module_body(op, result.module)
