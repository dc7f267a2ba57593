"""Durability: the SQLite store, checkpoints and context deltas (no Thespian).

The names below are imported when first used (PEP 562): importing a light module of this package
(``task_ids``, as every client does) costs no SQLite store, codec or state machine (the CLI's time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pegasus import lazy

if TYPE_CHECKING:
    from pegasus.store.checkpoint import Checkpointer, CorruptCheckpoint, kind_for, rebuild
    from pegasus.store.errors import DiskFull, StoreCorrupt, StoreDamaged, StoreReplaced, StoreUnavailable
    from pegasus.store.sqlite import Store, StaleStateError, StoreError

__getattr__, __dir__ = lazy.names(__name__, {
    "pegasus.store.checkpoint": ("Checkpointer", "CorruptCheckpoint", "kind_for", "rebuild"),
    "pegasus.store.errors": ("DiskFull", "StoreCorrupt", "StoreDamaged", "StoreReplaced", "StoreUnavailable"),
    "pegasus.store.sqlite": ("Store", "StaleStateError", "StoreError"),
})

__all__ = ["Checkpointer", "CorruptCheckpoint", "DiskFull", "StaleStateError", "Store", "StoreCorrupt", "StoreDamaged", "StoreError",
           "StoreReplaced", "StoreUnavailable", "kind_for", "rebuild"]

