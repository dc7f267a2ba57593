"""Thespian's per-pass look at every transmit in flight is skipped while none of them can move.

Every pass, ``_processIntentTimeouts`` asks each transmit waiting for its acknowledgement or for its
peer's connection whether to retry, whether it has expired and how long it may still wait: timer
views and timedeltas for each, and both collections rebuilt.  While every transmit is plainly still
waiting -- no retry or pause timer, not expired, its peer's connection not idle, a waiting one
marked as awaiting its slot -- Thespian's own step changes nothing; it is then not run.
docs/thespian-patches.md#quiet-transmits.
"""

from __future__ import annotations

from typing import Any

from thespian.system import timing as _timing
from thespian.system import transport as _transport
from thespian.system.transport import TCPTransport as _tcp

from actors.wire.thespian_patches.base import Kind, Patch, Target

_T, _INTENT = _tcp.TCPTransport, _transport.TransmitIntent
_TIMEOUTS = Target(_T, "_processIntentTimeouts", "source c61b40adc4d5f5a7")
PATCH = Patch("quiet_transmits", Kind.SPEED, "quiet-transmits", (
    _TIMEOUTS,
    # what Thespian's step asks of each transmit, and so what "still" below must answer for it
    Target(_T, "_nextTransmitStepCheck", "source 58074f46110391a9"),
    Target(_T, "_socketFile", "source c39f0305824746d4"),
    Target(_tcp, "opsKey", "source 1ad106fc6f32233f"),
    Target(_INTENT, "timeToRetry", "source 7ff5751f62ebc0b4"),
    Target(_INTENT, "delay", "source 6f06cff4e25dbd98"),
    Target(_INTENT, "expired", "source b24ff774f0b8b2f4"),
    Target(_INTENT, "awaitingTXSlot", "source f02112bd6f517e1b"),
    Target(_INTENT, "__init__", "source 40cd9b467a3bd968"),  # _quitTime, set once
    Target(_timing, "ExpirationTimer", "source 85cd8571db720c8e"),  # _time_to_quit, compared as its view does
    Target(_timing, "ExpirationTimerView", "source 649d0f64a3b0cb5d"),
    Target(_timing, "currentTime", "builtin perf_counter"),
))
_own_timeouts = _TIMEOUTS.original
_ABSENT = object()


def _waits_on(intent: Any, open_sockets: Any, now: float) -> bool:
    """Whether Thespian's ``_nextTransmitStepCheck(intent, -1)`` would keep ``intent`` as it is: no retry or
    pause timer (their checks have side effects), not expired, no idle connection to its peer to take."""
    state = intent.__dict__
    if "_retryTime" in state or "_pauseUntil" in state or _expired(intent, now):
        return False
    return open_sockets is None or intent.targetAddr.addressDetails not in open_sockets


def _expired(intent: Any, now: float) -> bool:
    """``TransmitIntent.expired`` without a timer view: the same comparison."""
    due = intent._quitTime._time_to_quit
    return due is not None and now >= due


def all_still(transport: Any) -> bool:
    """Whether every transmit of ``transport`` waits, unchanged, through Thespian's timeout step: in flight
    on an open socket (filed under its number; paused, or with nothing to retry), or queued for its peer's
    connection (awaiting its slot: its delay is then at least 10 ms)."""
    open_sockets = getattr(transport, "_openSockets", None)
    now = _timing.currentTime()
    for fileno, intent in transport._transmitIntents.items():
        sock = intent.__dict__.get("socket")
        if sock is None or sock.fileno() != fileno or fileno == -1:
            return False
        if "_pauseUntil" in intent.__dict__ and not _expired(intent, now):
            continue  # Thespian's own shortcut: a paused transmit is kept as it is
        if not _waits_on(intent, open_sockets, now):
            return False
    for intent in transport._waitingTransmits:
        state = intent.__dict__
        if "socket" in state or not state.get("_awaitingTXSlot") or not _waits_on(intent, open_sockets, now):
            return False
    return True


def _timeouts(self: Any) -> None:
    """``TCPTransport._processIntentTimeouts``, not run while every transmit is still."""
    if (self._transmitIntents or self._waitingTransmits) and not all_still(self):
        _own_timeouts(self)


def install() -> None:
    """Skip the timeout step of transmits that cannot move."""
    _TIMEOUTS.replace(_timeouts, PATCH.name)
