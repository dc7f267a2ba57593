"""Durability: the SQLite store, checkpoints and context deltas (no Thespian)."""

from pegasus.store.checkpoint import Checkpointer, CorruptCheckpoint, kind_for, rebuild
from pegasus.store.errors import DiskFull, StoreCorrupt, StoreDamaged, StoreReplaced, StoreUnavailable
from pegasus.store.sqlite import Store, StaleStateError, StoreError

__all__ = ["Checkpointer", "CorruptCheckpoint", "DiskFull", "StaleStateError", "Store", "StoreCorrupt", "StoreDamaged", "StoreError",
           "StoreReplaced", "StoreUnavailable", "kind_for", "rebuild"]
