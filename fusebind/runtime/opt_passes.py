"""The runtime's passes for `fusebind-opt`, as data: `PASSES` (`fuse-jit`,
which compiles and adopts kernels, from `jit.py`), which the tools layer
(`fusebind.tools.passes`) registers."""

from fusebind.runtime.jit import FuseJitPass

PASSES = (FuseJitPass,)
