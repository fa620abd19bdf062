"""The errors and the warning of the torch.compile backend (fusebind's hierarchy, dialect/errors.py)."""

from __future__ import annotations

from fusebind.api.errors import FusebindError


class FusebindTorchError(FusebindError, RuntimeError):
    """A region's traced value disagreed with torch's fake tensor (dtype or shape): a rule's bug, never
    silently answered."""


class FusebindTorchWarning(UserWarning):
    """The backend ran something in eager torch instead of fusebind: a training graph, or a region that
    did not compile. The message names why."""
