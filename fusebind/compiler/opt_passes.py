"""Plugin module the `fusebind-opt` driver imports by name: registers the
compiler's passes: `fuse` (`fusion_passes.py`) and `strength-reduce` (`strength.py`)."""

from fusebind.compiler import fusion_passes as _fusion_passes  # noqa: F401  (import registers the passes)
from fusebind.compiler import strength as _strength  # noqa: F401
