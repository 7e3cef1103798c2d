"""Prometheus metrics for boundloop: instruments and exposition."""

from __future__ import annotations

from .instruments import BoundMetrics as BoundMetrics
from .instruments import LoopMetrics as LoopMetrics

__all__ = ["BoundMetrics", "LoopMetrics"]
