"""quiet_transmits (actors/wire/thespian_patches/speed): Thespian's per-pass timeout step over the transmits in
flight is not run while every one of them is still, and it then changes nothing: Thespian's own step, run on
the same state, steps, finishes and moves no transmit."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thespian.actors import ActorAddress
from thespian.system.timing import ExpirationTimer
from thespian.system.transport import TransmitIntent
from thespian.system.transport import TCPTransport as tcp
from thespian.system.transport.IPBase import TCPv4ActorAddress

from actors.wire.thespian_patches.speed import quiet_transmits

PEERS = [ActorAddress(TCPv4ActorAddress("127.0.0.1", 40001 + n, external=False)) for n in range(3)]
LATER, GONE = timedelta(minutes=5), timedelta(microseconds=-1)


@pytest.fixture(scope="module")
def sockets() -> Iterator[list[socket.socket]]:
    pairs = [socket.socketpair() for _ in range(4)]
    yield [ours for ours, _ in pairs]
    for pair in pairs:
        for sock in pair:
            sock.close()


def _transport(steps: list[Any]) -> tcp.TCPTransport:
    """A TCPTransport with the state the timeout step reads; a transmit step is recorded, not run."""
    transport = object.__new__(tcp.TCPTransport)
    transport._transmitIntents, transport._waitingTransmits, transport._openSockets = {}, [], {}
    transport._finished_intents = []
    transport._nextTransmitStep = lambda intent: steps.append(intent) or True
    return transport


def _in_flight(transport: tcp.TCPTransport, sock: socket.socket, peer: Any, period: timedelta = LATER) -> TransmitIntent:
    intent = TransmitIntent(peer, "m", maxPeriod=period)
    intent.socket, intent.stage = sock, tcp.TCPTransport._XMITStepWaitForAck
    transport._transmitIntents[sock.fileno()] = intent
    return intent


def _queued(transport: tcp.TCPTransport, peer: Any, period: timedelta = LATER) -> TransmitIntent:
    intent = TransmitIntent(peer, "m", maxPeriod=period)
    intent.stage = tcp.TCPTransport._XMITStepSendConnect
    intent.awaitingTXSlot()
    transport._waitingTransmits.append(intent)
    return intent


def test_transmits_that_only_wait_are_not_looked_at_in_a_pass(sockets, monkeypatch) -> None:
    quiet_transmits.install()
    steps: list[Any] = []
    transport = _transport(steps)
    _in_flight(transport, sockets[0], PEERS[0])
    waiting = [_queued(transport, PEERS[0]) for _ in range(20)]
    asked: list[Any] = []
    monkeypatch.setattr(TransmitIntent, "delay", lambda self, *a: asked.append(self) or timedelta(seconds=1))
    monkeypatch.setattr(TransmitIntent, "timeToRetry", lambda self, *a: asked.append(self) or False)
    before = dict(transport._transmitIntents)
    transport._processIntentTimeouts()
    assert asked == [] and steps == []  # Thespian's own step asks each of the 21, every pass
    assert transport._transmitIntents == before and transport._waitingTransmits == waiting


def test_a_transmit_that_can_move_still_gets_thespians_step(sockets) -> None:
    quiet_transmits.install()
    steps: list[Any] = []
    transport = _transport(steps)
    _in_flight(transport, sockets[0], PEERS[0])
    queued = _queued(transport, PEERS[1])
    transport._openSockets[PEERS[1].addressDetails] = object()  # its peer's connection is idle: take it
    transport._processIntentTimeouts()
    assert steps == [queued]


# One transmit: in flight or queued, to which peer, and what of its state Thespian's step looks at (mostly
# still, so that many examples reach the comparison).
def _mostly(still: Any, *other: Any) -> Any:
    return st.sampled_from([still] * 6 + list(other))


TRANSMIT = st.fixed_dictionaries({
    "queued": st.booleans(), "peer": st.integers(0, 2), "expired": _mostly(False, True),
    "retry": _mostly(None, 0, 60), "pause": _mostly(None, 0, 60), "slot": _mostly(True, False),
    "closed": _mostly(False, True)})


@settings(max_examples=300, deadline=None)
@given(transmits=st.lists(TRANSMIT, min_size=1, max_size=4), idle=st.sets(st.integers(0, 2), max_size=1))
def test_when_every_transmit_is_still_thespians_own_step_changes_nothing(sockets, transmits, idle) -> None:
    steps: list[Any] = []
    transport = _transport(steps)
    closed = socket.socket()
    closed.close()
    free = iter(sockets)
    for spec in transmits:
        period = GONE if spec["expired"] else LATER
        if spec["queued"]:
            intent = _queued(transport, PEERS[spec["peer"]], period)
            if not spec["slot"]:
                del intent._awaitingTXSlot
        else:
            sock = closed if spec["closed"] else next(free, None)
            if sock is None or (sock is closed and -1 in transport._transmitIntents):
                continue
            intent = _in_flight(transport, sock, PEERS[spec["peer"]], period)
        if spec["retry"] is not None:
            intent._retryTime = ExpirationTimer(timedelta(seconds=spec["retry"]))
        if spec["pause"] is not None:
            intent._pauseUntil = ExpirationTimer(timedelta(seconds=spec["pause"]))
    for peer in idle:
        transport._openSockets[PEERS[peer].addressDetails] = object()
    if not quiet_transmits.all_still(transport):
        return  # Thespian's own step runs, as before
    intents, waiting = dict(transport._transmitIntents), list(transport._waitingTransmits)
    states = [dict(i.__dict__) for i in (*intents.values(), *waiting)]
    quiet_transmits._own_timeouts(transport)
    assert steps == [] and transport._finished_intents == []
    assert transport._transmitIntents == intents and list(transport._transmitIntents) == list(intents)
    assert transport._waitingTransmits == waiting
    assert [i.__dict__ for i in (*intents.values(), *waiting)] == states
