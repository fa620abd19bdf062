"""Every built-in pass of `fusebind-opt`, assembled by the one room that may import them all.

The compiler and lowering list their passes as data
(`<room>.opt_passes.PASSES`); none of them imports a room above it or names
one in a string. `fuse-jit` (optimize, compile the work order into the
current session's table, optimize again) is defined here: it is an xDSL pass
over the runtime's JIT loop, and the runtime holds no passes. `install_builtin_passes(registry)` gives those lists to a
`PassRegistry` as providers (a room is imported on the registry's first
use, as before), and `fuse` is registered here, served with what only the
runtime has (`fusion_passes.FuseServices`):
- `gate=table`: `fusebind.runtime.jit.table_context`, a context over the
  current global snapshot gated by `fused_kernel_available_in`;
- `machine=measured`: `fusebind.runtime.calibrate.measured_machine`, this
  machine's model (measured once per process, cached on disk).
Both import the runtime when first asked, so `fuse{gate=all}` runs without it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusebind.compiler import fusion_passes
from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.cost import MachineModel
from fusebind.compiler.fusion_passes import machine_with, print_remarks, replace_module_body
from fusebind.compiler.passes import DEFAULT_REGISTRY, PassRegistry

__all__ = ["BUILTIN_PROVIDERS", "FuseJitPass", "FusePass", "SERVICES", "install_builtin_passes", "measured_machine",
           "table_context"]


def table_context(backend: str, **options: Any) -> OptimizationContext:
    """`fuse{gate=table}`'s context: the runtime's, over the current table snapshot."""
    from fusebind.runtime.jit import table_context as runtime_table_context

    return runtime_table_context(backend, **options)


def measured_machine() -> MachineModel:
    """`machine=measured`: the runtime's calibration of this machine."""
    from fusebind.runtime.calibrate import measured_machine as runtime_measured_machine

    return runtime_measured_machine()


#: What the compiler's `fuse` cannot reach itself, passed in.
SERVICES = fusion_passes.FuseServices(table_context=table_context, measured_machine=measured_machine)


@dataclass(frozen=True)
class FusePass(fusion_passes.FusePass):
    """Capability-gated, cost-based fusion (see `fusebind.compiler.optimize`),
    served with the runtime's table gate and measured machine (`SERVICES`)."""

    services = SERVICES


@dataclass(frozen=True)
class FuseJitPass(fusion_passes.FusionOptions, ModulePass):
    """`fuse` against the current session's table, after compiling and adopting its work order."""

    name = "fuse-jit"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        base = SERVICES.machine(self.machine)
        from fusebind.runtime.jit import optimize_with_jit

        result, report = optimize_with_jit(op, self.backend, max_region_ops=self.max_ops,
                                           machine=machine_with(self.launch_ns, self.gflops, base))
        if self.remarks:
            for line in report.remarks():
                sys.stderr.write(line + "\n")
            print_remarks(result, sys.stderr)
        replace_module_body(op, result.module)


def _compiler_passes() -> Sequence[type[ModulePass]]:
    from fusebind.compiler import opt_passes

    return (*opt_passes.PASSES, FusePass)


def _lowering_passes() -> Sequence[type[ModulePass]]:
    from fusebind.lowering import opt_passes

    return opt_passes.PASSES


def _runtime_passes() -> Sequence[type[ModulePass]]:
    return (FuseJitPass,)


#: (label for warnings, provider), in registration order.
BUILTIN_PROVIDERS = (
    ("fusebind.compiler.opt_passes", _compiler_passes),
    ("fusebind.lowering.opt_passes", _lowering_passes),
    ("fusebind.tools.passes (fuse-jit)", _runtime_passes),
)


def install_builtin_passes(registry: PassRegistry = DEFAULT_REGISTRY) -> PassRegistry:
    """Give `registry` the built-in passes of every room (registered on its
    first use; installing twice is harmless). Returns `registry`."""
    for label, provider in BUILTIN_PROVIDERS:
        registry.provide(label, provider)
    return registry
