"""speed/deferred_acks.py: which transmit sockets Thespian's poll reports while their acknowledgement waits, on real
loopback sockets -- an acknowledgement alone wakes nothing; a message behind it, the peer's end or a transmit queued
behind it does -- and which transmits may wait at all."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from thespian.system.transport import TransmitIntent, TransmitOnly
from thespian.system.transport.asyncTransportBase import asyncTransportBase

from actors.wire.frames import ACK_FRAME_BYTES
from actors.wire.thespian_patches.speed import deferred_acks as d

WAIT_FOR_ACK = 4


class _Transport:
    """What deferred_acks reads of Thespian 4.0.1's TCP transport, with the loop's receiving run on this thread."""

    _async_txdone = asyncTransportBase._async_txdone

    def __init__(self) -> None:
        self._transmitIntents: dict[int, Any] = {}
        self._waitingTransmits: list[Any] = []
        self._aTB_queuedPendingTransmits: list[Any] = []
        self._aTB_numPendingTransmits = 0
        self.stepped: list[int] = []
        self.__dict__[d.RECEIVING] = threading.get_ident()

    def _canSendNow(self) -> bool:  # noqa: N802 - Thespian's name
        return self._aTB_numPendingTransmits < 20

    def _processIntents(self, fileno: int) -> bool:  # noqa: N802 - Thespian's name
        self.stepped.append(fileno)
        return True

    def sent(self, sock: socket.socket, peer: str = "peer", **callbacks: Any) -> Any:
        """A transmit to ``peer`` written whole on ``sock``, its acknowledgement awaited (as the transport files it)."""
        intent = TransmitIntent(peer, "message", **callbacks)
        intent.addCallback(self._async_txdone, self._async_txdone)  # asyncTransportBase._submitTransmit's
        intent.socket, intent.stage = sock, WAIT_FOR_ACK
        self._transmitIntents[sock.fileno()] = intent
        return intent


@pytest.fixture
def connection() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A loopback TCP connection: (ours, the peer's)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        ours = socket.create_connection(server.getsockname())
        peers, _ = server.accept()
        with ours, peers:
            ours.setblocking(False)
            yield ours, peers


def _reported(sock: socket.socket) -> bool:
    """Whether the loop's poll reports ``sock`` readable now."""
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    return bool(poll.poll(0))


def _until_buffered(sock: socket.socket, count: int) -> None:
    """Until ``count`` bytes wait in ``sock`` (loopback: at once; peeked, never read)."""
    while len(sock.recv(count, socket.MSG_PEEK)) < count:
        select.select([], [], [], 0.001)


def test_an_acknowledgement_alone_is_not_reported_a_message_behind_it_is(connection) -> None:
    ours, peers = connection
    transport = _Transport()
    intent = transport.sent(ours)
    assert d.defer(transport, intent)
    peers.sendall(b"a" * ACK_FRAME_BYTES)  # the acknowledgement
    ours.setblocking(True)
    _until_buffered(ours, ACK_FRAME_BYTES)
    assert not _reported(ours)  # Thespian's loop would wake for it here
    d.read_arrived(transport)  # the next pass that happens anyway steps it by Thespian's own step
    assert transport.stepped == [ours.fileno()]
    peers.sendall(b"m")  # anything behind it: the peer's answer on the same connection
    _until_buffered(ours, ACK_FRAME_BYTES + 1)
    assert _reported(ours)


def test_the_peers_end_is_reported_with_the_acknowledgement_unread(connection) -> None:
    ours, peers = connection
    transport = _Transport()
    assert d.defer(transport, transport.sent(ours))
    peers.close()  # a dead peer: its end (or reset) ignores the low-water mark
    select.select([ours], [], [], 10.0)
    assert _reported(ours)


def test_reading_the_acknowledgement_or_a_transmit_queued_behind_it_makes_it_urgent_again(connection) -> None:
    ours, peers = connection
    transport = _Transport()
    intent = transport.sent(ours)
    assert d.defer(transport, intent)
    peers.sendall(b"a" * ACK_FRAME_BYTES)
    ours.setblocking(True)
    _until_buffered(ours, ACK_FRAME_BYTES)
    queued = TransmitIntent("peer", "next")

    def connect(self: Any, queued: Any) -> bool:  # Thespian's _next_XMIT_1: the peer's connection is busy
        queued.awaitingTXSlot()
        return True

    assert d._connect(connect)(transport, queued) is True
    transport._waitingTransmits.append(queued)  # where Thespian files it
    assert _reported(ours) and ours.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
    assert d.defer(transport, intent) is False  # and it stays so: the transmit behind it waits for the ack
    transport._waitingTransmits = []
    assert d.defer(transport, intent)
    read: list[Any] = []
    d._ack(lambda self, step: read.append(ours.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)))(transport, intent)
    assert read == [1]  # Thespian reads it with the mark off: once idle, its connection wakes at any byte


def test_only_a_transmit_nobody_waits_for_from_the_receiving_loop_with_nothing_queued_may_wait(connection) -> None:
    ours, _ = connection
    transport = _Transport()
    assert d.may_wait(transport, transport.sent(ours))
    told = transport.sent(ours, onSuccess=lambda result, intent: None)  # a sender's callback waits for it
    assert not d.may_wait(transport, told)
    assert d.unhurried(transport, told) is False  # no patch installed in this process: nothing changes
    told.__dict__[d.UNHURRIED] = True  # its sender says its callback has nothing left to wait for
    assert d.may_wait(transport, told)
    transport._waitingTransmits = [TransmitIntent("peer", "next")]
    assert not d.may_wait(transport, transport.sent(ours))
    assert d.may_wait(transport, transport.sent(ours, peer="another"))
    transport._waitingTransmits = []
    transport._aTB_queuedPendingTransmits = [TransmitIntent("x", "queued")]
    assert not d.may_wait(transport, transport.sent(ours))
    transport._aTB_queuedPendingTransmits, transport._aTB_numPendingTransmits = [], 20
    assert not d.may_wait(transport, transport.sent(ours))
    transport._aTB_numPendingTransmits = 0
    transport.__dict__[d.RECEIVING] = None  # a transmit-only run, or no run: a client's send
    assert not d.may_wait(transport, transport.sent(ours))
    other = threading.Thread(target=lambda: transport.__dict__.update({"seen": d.may_wait(transport, told)}))
    transport.__dict__[d.RECEIVING] = threading.get_ident()
    other.start()
    other.join()
    assert transport.__dict__["seen"] is False  # a send from another thread than the loop's


def test_a_transmit_only_run_or_a_full_pending_count_reads_every_acknowledgement_at_once(connection) -> None:
    ours, _ = connection
    transport = _Transport()
    transport.__dict__[d.RECEIVING] = None
    runs: list[Any] = []

    def run(self: Any, handler: Any) -> None:
        runs.append(self.__dict__[d.RECEIVING])
        self.__dict__["deferred"] = d.defer(self, self.sent(ours))

    d._run(run)(transport, lambda envelope: True)  # a receiving run: its sends' acknowledgements may wait
    assert runs == [threading.get_ident()] and transport.__dict__["deferred"]
    assert transport.__dict__[d.RECEIVING] is None  # restored after the run
    assert ours.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == d.LOW_WATER
    d._run(lambda self, handler: runs.append(self.__dict__[d.RECEIVING]))(transport, TransmitOnly)
    assert runs[-1] is None and ours.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
    transport.__dict__[d.RECEIVING] = threading.get_ident()
    assert d.defer(transport, transport.sent(ours))
    transport._aTB_numPendingTransmits = 20
    d._queue(lambda self, intent: True)(transport, TransmitIntent("x", "queued"))
    assert ours.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1


def test_a_deferred_transmit_that_went_another_way_is_forgotten_not_stepped(connection) -> None:
    ours, peers = connection
    transport = _Transport()
    intent = transport.sent(ours)
    assert d.defer(transport, intent)
    peers.sendall(b"a" * ACK_FRAME_BYTES)
    intent.stage = 6  # retried (its socket shut by Thespian)
    d.read_arrived(transport)
    assert transport.stepped == [] and transport.__dict__[d.DEFERRED] == {}


def test_a_message_behind_the_acknowledgement_is_read_in_the_pass_that_read_the_acknowledgement(connection) -> None:
    """Thespian's loop reads the acknowledgement, files the connection idle, and reads the answer behind it only
    at its next pass (the idle connection polls readable at once); the timeout step of the same pass reads it."""
    from thespian.system.transport import TCPTransport as tcp

    ours, peers = connection
    transport, peer = _Transport(), SimpleNamespace(addressDetails="peer")
    transport._openSockets, transport._incomingSockets, read = {}, {}, []
    transport._handlePossibleIncoming = lambda incoming, fileno, has_exclusive_flag: read.append(
        (type(incoming).__name__, incoming.socket, fileno))
    intent = transport.sent(ours, peer=peer)

    def acknowledged(self: Any, intent: Any) -> bool:  # Thespian's _next_XMIT_4 .. _finishIntent: Sent
        self._openSockets["peer"] = tcp.IdleSocket(intent.socket, intent.targetAddr)
        return False

    peers.sendall(b"a message behind the acknowledgement")
    ours.setblocking(True)
    _until_buffered(ours, 10)
    assert d._ack(acknowledged)(transport, intent) is False
    d._timeouts(lambda self: None)(transport)
    assert read == [("TCPIncomingPersistent", ours, ours.fileno())] and "peer" not in transport._openSockets
    d._timeouts(lambda self: None)(transport)  # once only
    assert len(read) == 1
    quiet = transport.sent(ours, peer=peer)  # a connection with nothing behind its acknowledgement stays idle
    ours.recv(100)
    d._ack(acknowledged)(transport, quiet)
    d._timeouts(lambda self: None)(transport)
    assert len(read) == 1 and "peer" in transport._openSockets
