"""Thespian scans its queue of waiting transmits for expired ones only when one can have expired.

Thespian 4.0.1 partitions the whole queue of waiting transmits by ``expired()`` on every send and
completed transmit.  An intent's deadline is fixed when it is made, so the queue keeps the earliest
deadline it holds: before it nothing has expired and the scan's answer is known.  Speed, not
robustness: without it Thespian answers the same, only slower.
Figures and the upstream proposal: docs/thespian-patches.md#due-expiry-scan.
"""

from __future__ import annotations

import math
from typing import Any

from thespian.system import timing as _timing
from thespian.system.transport import TransmitIntent as _Intent
from thespian.system.transport import asyncTransportBase as _async

from actors.wire.thespian_patches.base import Kind, Patch, Target

_BASE = _async.asyncTransportBase
_SCAN = Target(_BASE, "_complete_expired_intents", "source 0c508de127a79a4f")
_QUEUE = Target(_BASE, "_qtx", "source e7a4529d48bffb79")
PATCH = Patch("due_expiry_scan", Kind.SPEED, "due-expiry-scan", (
    _SCAN, _QUEUE,
    Target(_BASE, "__init__", "source ea452e5ee01aecb0"),  # the queue and its lock
    Target(_Intent, "__init__", "source 40cd9b467a3bd968"),  # _quitTime, set once
    Target(_Intent, "expired", "source b24ff774f0b8b2f4"),  # what the scan asks of each intent
    Target(_timing, "ExpirationTimer", "source 85cd8571db720c8e"),  # _time_to_quit, set once
    Target(_timing, "currentTime", "builtin perf_counter"),
))
_DUE = "_pegasus_due"  # the earliest deadline in the queue (-inf: not known yet, scan)
_own_scan, _own_queue = _SCAN.original, _QUEUE.original


def _deadline(intent: Any) -> float:
    due = intent._quitTime._time_to_quit
    return math.inf if due is None else due


def _queue(self: Any, intent: Any) -> bool:
    """Thespian's ``_qtx``, the queue's earliest deadline lowered first (to the new intent's)."""
    with self._aTB_lock:
        self.__dict__[_DUE] = min(self.__dict__.get(_DUE, -math.inf), _deadline(intent))
    return _own_queue(self, intent)


def _scan(self: Any) -> tuple[int, bool]:
    """Thespian's ``_complete_expired_intents``, skipped while no queued intent can have expired."""
    with self._aTB_lock:
        if _timing.currentTime() < self.__dict__.get(_DUE, -math.inf):
            return len(self._aTB_queuedPendingTransmits), False
    answer = _own_scan(self)
    with self._aTB_lock:
        self.__dict__[_DUE] = min((_deadline(i) for i in self._aTB_queuedPendingTransmits), default=math.inf)
    return answer


def install() -> None:
    """Expiry scans only when a queued transmit is due."""
    _SCAN.replace(_scan, PATCH.name)
    _QUEUE.replace(_queue, PATCH.name)
