"""Handlers of the convolutional ops: Conv, ConvTranspose, the poolings, LRN (SEAM: filled by the
conv/pool helper; built on `fusebind.api.nn`)."""

from __future__ import annotations
