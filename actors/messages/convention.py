"""The conversation with convention members: placing workers on other machines."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlacementDeadline:
    """Wakeup payload of a pool: the worker placed in slot ``index`` (``serial``) must be ready by now."""

    index: int
    serial: int
