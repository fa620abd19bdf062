"""fusebind as a torch.compile backend: `torch.compile(model, backend="fusebind")` (docs/TORCH.md).

Needs the `torch` extra. Modules: backend.py (the dynamo backend, inference only), partition.py
(the aten graph cut into fusebind regions and eager torch), rules.py with aten_elementwise.py and
aten_structured.py (each aten op's meaning on traced values), crossing.py (tensors <-> arrays
without copies, bf16 as int16 bits), errors.py.
"""

from fusebind.torch.backend import fusebind_backend
from fusebind.torch.errors import FusebindTorchError, FusebindTorchWarning
from fusebind.torch.partition import GraphReport

__all__ = ["FusebindTorchError", "FusebindTorchWarning", "GraphReport", "fusebind_backend"]
