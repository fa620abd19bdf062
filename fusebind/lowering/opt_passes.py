"""Lowering's passes for `fusebind-opt` (defined in `passes.py`), as data:
`PASSES`, which the tools layer (`fusebind.tools.passes`) registers."""

from fusebind.lowering.passes import AnnotateCostPass, DecomposeFusedPass, LowerToLinalgPass, LowerToLlvmPass

PASSES = (AnnotateCostPass, DecomposeFusedPass, LowerToLinalgPass, LowerToLlvmPass)
