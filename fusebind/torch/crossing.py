"""Tensors across the torch <-> numpy border, without copies.

Owns: `NP_OF_TORCH` (the torch dtypes fusebind carries and their numpy dtypes), `to_numpy` and
`to_torch`.

A CPU tensor and a numpy array can share one buffer (`Tensor.numpy()`, `torch.from_numpy`), so
crossing costs nothing, strided views included. bfloat16 is the one dtype neither side's bridge
carries (numpy has no bfloat16; fusebind uses ml_dtypes'): it crosses as an int16 view of the
same bits (`Tensor.view(torch.int16)`, then `ndarray.view(ml_dtypes.bfloat16)`), again no copy.
Only an array numpy lays out with negative strides (torch has none) is copied on the way back.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import torch

#: the dtypes the backend maps; any other (complex, float8, unsigned > 8 bits) stays in eager torch
NP_OF_TORCH: dict[torch.dtype, np.dtype] = {
    torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64),
    torch.float16: np.dtype(np.float16), torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
    torch.int8: np.dtype(np.int8), torch.int16: np.dtype(np.int16), torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64), torch.uint8: np.dtype(np.uint8), torch.bool: np.dtype(np.bool_),
}
_BF16 = np.dtype(ml_dtypes.bfloat16)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """The tensor's buffer as a numpy array (a view: same memory, same strides)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(_BF16)
    return t.numpy()


def to_torch(a: Any) -> torch.Tensor:
    """The array's buffer as a tensor (a view), bfloat16 through its int16 bits."""
    a = np.asarray(a)
    if any(s < 0 for s in a.strides) or not a.flags.writeable:
        a = np.array(a)  # torch has no negative strides (and warns on read-only memory): the one copy
    if a.dtype == _BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)
