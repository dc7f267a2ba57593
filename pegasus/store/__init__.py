"""Durability: the SQLite store, checkpoints and context deltas (no Thespian).

The names below are imported when first used (PEP 562): importing a light module of this package
(``task_ids``, as every client does) costs no SQLite store, codec or state machine (the CLI's time).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pegasus.store.checkpoint import Checkpointer, CorruptCheckpoint, kind_for, rebuild
    from pegasus.store.errors import DiskFull, StoreCorrupt, StoreDamaged, StoreReplaced, StoreUnavailable
    from pegasus.store.sqlite import Store, StaleStateError, StoreError

_MODULE_OF = {
    **dict.fromkeys(("Checkpointer", "CorruptCheckpoint", "kind_for", "rebuild"), "checkpoint"),
    **dict.fromkeys(("DiskFull", "StoreCorrupt", "StoreDamaged", "StoreReplaced", "StoreUnavailable"), "errors"),
    **dict.fromkeys(("Store", "StaleStateError", "StoreError"), "sqlite"),
}

__all__ = ["Checkpointer", "CorruptCheckpoint", "DiskFull", "StaleStateError", "Store", "StoreCorrupt", "StoreDamaged", "StoreError",
           "StoreReplaced", "StoreUnavailable", "kind_for", "rebuild"]


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"pegasus.store.{_MODULE_OF[name]}"), name)
    globals()[name] = value
    return value
