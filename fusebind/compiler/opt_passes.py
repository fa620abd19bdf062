"""The compiler's passes for `fusebind-opt`, as data: `PASSES`, which the tools
layer (`fusebind.tools.passes`) registers. `fuse` is not among them: it needs
the runtime's table gate and measured machine, so the tools layer registers
the `FusePass` subclass it serves with those (`fusion_passes.FuseServices`)."""

from fusebind.compiler.gather_sinking import SinkGathersPass
from fusebind.compiler.passes import StripFusedPass, VerifyPass
from fusebind.compiler.strength import StrengthReducePass
from fusebind.compiler.tree_reduce import TreeReducePass

PASSES = (VerifyPass, StripFusedPass, StrengthReducePass, SinkGathersPass, TreeReducePass)
