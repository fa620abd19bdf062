"""Handlers of the sequence ops (SEAM: filled by the sequences helper)."""

from __future__ import annotations
