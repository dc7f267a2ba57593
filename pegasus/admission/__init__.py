"""Admission: the supervisor's view of every task, as seed 002's lifecycle (pure).

``core`` holds Admission itself (``step(input) -> list[Command]``); ``inputs`` what it is told;
``commands`` what it asks its carrier to do; ``steps`` which call handles each input; ``records``
a task as it keeps one; ``ports`` what it writes through.  The names below load when first named: a
process that only unpickles a ``TransitionNotice`` (``pegasus run``, a client following a task) needs
``commands`` alone, not the core and the tools, memory and store it imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pegasus.admission import inputs
    from pegasus.admission.commands import (
        Command, MessageAccepted, MessageRun, Refused, RunEnded, RunGate, StartRun, StopRun, Submitted, SuspendRun,
        TransitionNotice, WakeAfter,
    )
    from pegasus.admission.core import EVICTED, MAX_RESTARTS, Admission
    from pegasus.admission.ports import NullStore, StorePort
    from pegasus.admission.records import TaskRecord

__all__ = ["EVICTED", "MAX_RESTARTS", "Admission", "Command", "MessageAccepted", "MessageRun", "NullStore", "Refused",
           "RunEnded", "RunGate", "StartRun", "StopRun", "StorePort", "Submitted", "SuspendRun", "TaskRecord",
           "TransitionNotice", "WakeAfter", "inputs"]

_HOMES = {
    "core": ("EVICTED", "MAX_RESTARTS", "Admission"),
    "commands": ("Command", "MessageAccepted", "MessageRun", "Refused", "RunEnded", "RunGate", "StartRun", "StopRun",
                 "Submitted", "SuspendRun", "TransitionNotice", "WakeAfter"),
    "ports": ("NullStore", "StorePort"),
    "records": ("TaskRecord",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name == "inputs":
        return importlib.import_module(f"{__name__}.inputs")
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # found once
    return value
