"""Admission: the supervisor's view of every task, as seed 002's lifecycle (pure).

``core`` holds Admission itself (``step(input) -> list[Command]``); ``inputs`` what it is told;
``commands`` what it asks its carrier to do; ``steps`` which call handles each input; ``records``
a task as it keeps one; ``ports`` what it writes through.  The names below load when first named: a
process that only unpickles a ``TransitionNotice`` (``pegasus run``, a client following a task) needs
``commands`` alone, not the core and the tools, memory and store it imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pegasus import lazy

if TYPE_CHECKING:
    from pegasus.admission import inputs
    from pegasus.admission.commands import (
        Command,
        MessageAccepted,
        MessageRun,
        Refused,
        RunEnded,
        RunGate,
        StartRun,
        StopRun,
        Submitted,
        SuspendRun,
        TransitionNotice,
        WakeAfter,
    )
    from pegasus.admission.core import EVICTED, MAX_RESTARTS, Admission
    from pegasus.admission.ports import NullStore, StorePort
    from pegasus.admission.records import TaskRecord

__all__ = ["EVICTED", "MAX_RESTARTS", "Admission", "Command", "MessageAccepted", "MessageRun", "NullStore", "Refused",
           "RunEnded", "RunGate", "StartRun", "StopRun", "StorePort", "Submitted", "SuspendRun", "TaskRecord",
           "TransitionNotice", "WakeAfter", "inputs"]

__getattr__, __dir__ = lazy.names(__name__, {
    "pegasus.admission.core": ("EVICTED", "MAX_RESTARTS", "Admission"),
    "pegasus.admission.commands": ("Command", "MessageAccepted", "MessageRun", "Refused", "RunEnded", "RunGate",
                                   "StartRun", "StopRun", "Submitted", "SuspendRun", "TransitionNotice", "WakeAfter"),
    "pegasus.admission.ports": ("NullStore", "StorePort"),
    "pegasus.admission.records": ("TaskRecord",),
}, submodules=("inputs",))
