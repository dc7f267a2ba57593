"""Admission: the supervisor's view of every task, as seed 002's lifecycle (pure).

``core`` holds Admission itself; ``effects`` what it asks its carrier to do;
``records`` a task as it keeps one; ``ports`` what it writes through.
"""

from pegasus.admission.core import EVICTED, MAX_RESTARTS, Admission
from pegasus.admission.effects import (
    Effect, MessageRun, RunGate, StartRun, StopRun, SuspendRun, TransitionNotice, WakeAfter,
)
from pegasus.admission.ports import NullStore, StorePort
from pegasus.admission.records import TaskRecord

__all__ = ["EVICTED", "MAX_RESTARTS", "Admission", "Effect", "MessageRun", "NullStore", "RunGate", "StartRun", "StopRun",
           "StorePort", "SuspendRun", "TaskRecord", "TransitionNotice", "WakeAfter"]
