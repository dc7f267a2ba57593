"""Durability: the SQLite store, checkpoints and context deltas (no Thespian)."""

from pegasus.store.checkpoint import Checkpointer, CorruptCheckpoint, kind_for, rebuild
from pegasus.store.sqlite import Store, StaleStateError, StoreError

__all__ = ["Checkpointer", "CorruptCheckpoint", "StaleStateError", "Store", "StoreError", "kind_for", "rebuild"]
