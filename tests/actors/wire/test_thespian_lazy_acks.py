"""lazy_acks (actors/wire/thespian_patches/speed): an acknowledgement nothing waits for does not end
the loop's wait, yet every ended wait reports it; a message behind it, a close, a queued transmit or
a callback still wake the loop.  Real TCP sockets on 127.0.0.1 (SO_RCVLOWAT is TCP's)."""

from __future__ import annotations

import select
import selectors
import socket
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from thespian.actors import ActorAddress
from thespian.system.transport import TCPTransport as tcp
from thespian.system.transport import TransmitIntent
from thespian.system.transport.IPBase import TCPv4ActorAddress

from actors.wire.thespian_patches.speed import lazy_acks

PEER = ActorAddress(TCPv4ActorAddress("127.0.0.1", 40001, external=False))
ACK = b"a" * lazy_acks.ACK_BYTES  # its size is what counts here


@pytest.fixture
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        theirs = socket.create_connection(server.getsockname())
        ours, _ = server.accept()
    ours.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


@pytest.fixture
def running() -> Iterator[None]:
    """As inside a loop that receives (not transmit-only): what the patch's wrapper records."""
    lazy_acks._here.transport, lazy_acks._here.transmit_only = None, False
    yield
    lazy_acks._here.transport, lazy_acks._here.transmit_only = None, True


def _transport_awaiting_ack(ours: socket.socket) -> tuple[tcp.TCPTransport, TransmitIntent]:
    """A TCPTransport with one sent message waiting for its acknowledgement on ``ours``, with the
    callback every transmit gets from Thespian (its count of transmits in flight)."""
    transport = object.__new__(tcp.TCPTransport)
    transport._waitingTransmits, transport._aTB_queuedPendingTransmits = [], deque()
    intent = TransmitIntent(PEER, "sent")
    intent.addCallback(transport._async_txdone, transport._async_txdone)
    intent.stage, intent.socket = tcp.TCPTransport._XMITStepWaitForAck, ours
    transport._transmitIntents = {ours.fileno(): intent}
    lazy_acks._here.transport = transport
    return transport, intent


def _select(sock: socket.socket, timeout: float) -> list[tuple[int, int]]:
    selector = lazy_acks.LazyAckPollSet()
    selector.register(sock.fileno(), selectors.EVENT_READ)
    return [(key.fd, events) for key, events in selector.select(timeout)]


def _wakes(sock: socket.socket) -> bool:
    """Whether a poll of the socket for input (what ends the loop's wait) reports it now."""
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    return bool(poll.poll(0))


def _wait_until_readable(sock: socket.socket) -> None:
    """The bytes the peer sent are in ours (before the patch raises its low-water mark)."""
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    assert poll.poll(60_000)


def test_a_lone_acknowledgement_does_not_end_a_wait_and_the_wait_still_reports_it(tcp_pair, running):
    ours, theirs = tcp_pair
    transport, _ = _transport_awaiting_ack(ours)
    assert lazy_acks.lazy_acks(transport) == {ours.fileno(): ours}
    theirs.sendall(ACK)
    _wait_until_readable(ours)
    assert _select(ours, 0.01) == [(ours.fileno(), selectors.EVENT_READ)]  # reported, to be read as before
    assert not _wakes(ours)  # ... but a wait on it would not have ended for it (Thespian alone: it would)


@pytest.mark.parametrize("behind", ["a message", "a close"])
def test_a_message_behind_the_acknowledgement_or_a_close_ends_the_wait(tcp_pair, running, behind):
    ours, theirs = tcp_pair
    _transport_awaiting_ack(ours)
    theirs.sendall(ACK)
    _wait_until_readable(ours)
    _select(ours, 0)  # the socket is lazy from here
    assert not _wakes(ours)
    if behind == "a message":
        theirs.sendall(b"40>" + b"m" * 40)  # every message frame is longer than an acknowledgement
    else:
        theirs.close()
    poll = select.poll()
    poll.register(ours.fileno(), select.POLLIN)
    assert poll.poll(60_000)  # waits for the condition, not a guess


def test_an_acknowledgement_a_queued_transmit_waits_for_wakes_the_loop_again(tcp_pair, running):
    ours, theirs = tcp_pair
    transport, _ = _transport_awaiting_ack(ours)
    theirs.sendall(ACK)
    _wait_until_readable(ours)
    _select(ours, 0)
    assert not _wakes(ours)
    transport._waitingTransmits.append(TransmitIntent(PEER, "behind it"))  # the next send to that peer
    assert lazy_acks.lazy_acks(transport) == {}
    assert _select(ours, 0) == [(ours.fileno(), selectors.EVENT_READ)]
    assert _wakes(ours)  # its low-water mark is back to Thespian's


def test_an_acknowledgement_with_a_callback_or_in_a_draining_loop_is_not_lazy(tcp_pair, running):
    ours, _ = tcp_pair
    transport, intent = _transport_awaiting_ack(ours)
    delivered: list[Any] = []
    intent.addCallback(lambda result, it: delivered.append(it))  # a carrier waiting for the delivery
    assert lazy_acks.lazy_acks(transport) == {}

    transport, _ = _transport_awaiting_ack(ours)
    transport._aTB_queuedPendingTransmits.append(TransmitIntent(PEER, "over the in-flight limit"))
    assert lazy_acks.lazy_acks(transport) == {}
    transport._aTB_queuedPendingTransmits.clear()
    transport._aborting_run = True  # an actor's exit drains its transmits
    assert lazy_acks.lazy_acks(transport) == {}
    del transport._aborting_run
    lazy_acks._here.transmit_only = True  # Thespian's tell(): the loop runs only to transmit
    assert lazy_acks.lazy_acks(transport) == {}
