"""due_expiry_scan (actors/wire/thespian_patches/speed): Thespian's queue of waiting transmits is
scanned for expired ones only when one is due, and answers what Thespian's own scan answers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from thespian.actors import ActorAddress
from thespian.system.transport import TransmitIntent
from thespian.system.transport.asyncTransportBase import asyncTransportBase
from thespian.system.transport.IPBase import TCPv4ActorAddress

from actors.wire.thespian_patches.speed import due_expiry_scan

PEER = ActorAddress(TCPv4ActorAddress("127.0.0.1", 40001, external=False))
SOON, LATER = timedelta(microseconds=1), timedelta(minutes=5)  # due by the next call (0 means the default); the default


class Queue(asyncTransportBase):
    """Thespian's transmit queue alone (nothing is sent from it here)."""


class Own(asyncTransportBase):
    """The same with Thespian's own scan and append, whatever is installed."""

    _complete_expired_intents = due_expiry_scan._own_scan
    _qtx = due_expiry_scan._own_queue


def intent(failed: list[Any], period: timedelta, name: str = "m") -> TransmitIntent:
    return TransmitIntent(PEER, name, None, lambda result, it: failed.append(it.message), period)


def test_a_queue_with_nothing_due_is_not_scanned_and_a_due_intent_still_fails(monkeypatch) -> None:
    due_expiry_scan.install()
    queue, failed = Queue(), []
    for n in range(100):
        queue._queue_tx(intent(failed, LATER, f"m{n}"))
    assert queue._complete_expired_intents() == (100, False)  # the first scan learns the earliest deadline
    asked = []
    monkeypatch.setattr(TransmitIntent, "expired", lambda self: asked.append(self) or False)
    for _ in range(50):
        assert queue._complete_expired_intents() == (100, False)
    assert asked == []  # Thespian's own scan asks every intent on every call: 5,000 here
    monkeypatch.undo()
    queue._queue_tx(intent(failed, SOON, "due"))
    assert queue._complete_expired_intents() == (100, True) and failed == ["due"]
    assert queue._complete_expired_intents() == (100, False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["later", "soon", "scan", "pop"]), max_size=40))
def test_the_scan_answers_what_thespians_answers(operations: list[str]) -> None:
    due_expiry_scan.install()
    ours, own, failed_ours, failed_own = Queue(), Own(), [], []
    for n, operation in enumerate(operations):
        if operation in ("later", "soon"):
            period = LATER if operation == "later" else SOON
            ours._queue_tx(intent(failed_ours, period, f"m{n}"))
            own._queue_tx(intent(failed_own, period, f"m{n}"))
        elif operation == "scan":
            assert ours._complete_expired_intents() == own._complete_expired_intents()
        else:
            for queue in (ours, own):
                if queue._aTB_queuedPendingTransmits:
                    queue._aTB_queuedPendingTransmits.popleft()  # what _runQueued takes to send
        assert failed_ours == failed_own
        assert [i.message for i in ours._aTB_queuedPendingTransmits] == [i.message for i in own._aTB_queuedPendingTransmits]
