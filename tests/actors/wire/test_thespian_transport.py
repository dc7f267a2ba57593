"""Three speed patches of Thespian's TCP transport (actors/wire/thespian_patches/speed): the selector
of its loop, whole messages per pass, and its per-pass look at idle sockets.

poll_selector: ``PollSet`` answers as ``selectors.PollSelector`` does, over real sockets.
quick_idle_checks: the quick expiry check and the kept address hash answer what Thespian's own do.
whole_messages: Thespian's own steps, driven one readiness event at a time over a real
socket pair, the way its loop calls them; the unpatched steps are the baseline
each test states first.  (Every actor process inherits them all: test_system.py.)
"""

from __future__ import annotations

import pickle
import select
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from thespian.actors import ActorAddress
from thespian.system.transport import ReceiveEnvelope, SendStatus, TransmitIntent
from thespian.system.transport import TCPTransport as tcp
from thespian.system.timing import ExpirationTimer
from thespian.system.transport.IPBase import RoutedTCPv4ActorAddress, TCPv4ActorAddress
from thespian.system.transport.streamBuffer import ReceiveBuffer, ackMsg, toSendBuffer

from actors.wire.thespian_patches.security import frame_auth
from actors.wire.thespian_patches.speed import poll_selector, quick_idle_checks, whole_messages

PEER = ActorAddress(TCPv4ActorAddress("127.0.0.1", 40001, external=False))
ME = ActorAddress(TCPv4ActorAddress("127.0.0.1", 40002, external=False))


@pytest.fixture(autouse=True)
def bare_frames() -> Iterator[None]:
    """These tests speak Thespian's own frames: authenticated ones (frame_auth) are set aside,
    whatever an earlier test of this process installed."""
    with frame_auth.bare_thespian():
        yield


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


# -- poll_selector: PollSet ----------------------------------------------------------------
def _selected(selector: Any, reads: list[socket.socket], writes: list[socket.socket],
              timeout: float | None = 0) -> set[tuple[int, int]]:
    for sock in reads:
        selector.register(sock.fileno(), selectors.EVENT_READ)
    for sock in writes:
        selector.register(sock, selectors.EVENT_WRITE)  # a file object works as well
    ready = {(key.fd, events) for key, events in selector.select(timeout)}
    selector.close()
    return ready


def test_the_poll_set_reports_what_the_poll_selector_reports():
    quiet, quiet_peer = socket.socketpair()
    loaded, loaded_peer = socket.socketpair()
    hung, hung_peer = socket.socketpair()
    try:
        loaded_peer.sendall(b"data")
        hung_peer.close()  # a hang-up: readable (and writable, when asked)
        for reads, writes in (([quiet, loaded, hung], []), ([quiet], [loaded]), ([hung], [quiet]), ([], [])):
            ours = _selected(poll_selector.PollSet(), reads, writes)
            assert ours == _selected(selectors.PollSelector(), reads, writes)
        assert _selected(poll_selector.PollSet(), [quiet, loaded], [loaded_peer]) == {
            (loaded.fileno(), selectors.EVENT_READ), (loaded_peer.fileno(), selectors.EVENT_WRITE)}
    finally:
        for sock in (quiet, quiet_peer, loaded, loaded_peer, hung):
            sock.close()


def test_the_poll_set_waits_as_asked_and_refuses_what_the_poll_selector_refuses(pair):
    ours, theirs = pair
    started = time.monotonic()
    assert _selected(poll_selector.PollSet(), [ours], [], timeout=0.05) == set()
    assert time.monotonic() - started >= 0.045  # at least the timeout (rounded up to a millisecond)
    theirs.sendall(b"x")
    assert _selected(poll_selector.PollSet(), [ours], [], timeout=None) == {(ours.fileno(), selectors.EVENT_READ)}
    selector = poll_selector.PollSet()
    selector.register(ours.fileno(), selectors.EVENT_READ)
    with pytest.raises(KeyError):
        selector.register(ours.fileno(), selectors.EVENT_WRITE)
    with pytest.raises(ValueError):
        selector.register(-1, selectors.EVENT_READ)


# -- whole_messages ------------------------------------------------------------------------
def _transport(patched: bool) -> tcp.TCPTransport:
    """A TCPTransport with just the state these steps use (no listening socket)."""
    transport = object.__new__(tcp.TCPTransport)
    transport.myAddress = ME
    transport._incomingEnvelopes, transport._finished_intents, transport._waitingTransmits = [], [], []
    transport._openSockets, transport._transmitIntents, transport._incomingSockets = {}, {}, {}
    steps = whole_messages.STEPS if patched else {
        t.name: t.original for t in whole_messages.PATCH.targets if t.name in whole_messages.STEPS}
    for name, step in steps.items():  # on the instance: the class stays as the process has it
        setattr(transport, name, step.__get__(transport))
    return transport


def _read(sock: socket.socket, size: int) -> bytes:
    sock.settimeout(5)
    data = b""
    while len(data) < size:
        data += sock.recv(size - len(data))
    return data


def _message(payload: object) -> bytes:
    return toSendBuffer((PEER, payload), pickle.dumps)


def test_thespian_alone_reads_a_message_in_two_loops(pair):
    ours, theirs = pair
    theirs.sendall(_message("hello"))
    plain = _transport(patched=False)
    unread = plain._handleReadableIncoming(tcp.TCPIncomingPersistent(PEER, ours))
    assert unread is not None and not plain._incomingEnvelopes  # its first 20 bytes only
    assert plain._handleReadableIncoming(unread) is None
    assert [e.message for e in plain._incomingEnvelopes] == ["hello"]


@pytest.mark.parametrize("size", [10, 5_000, 100_000])
def test_a_message_that_arrived_whole_is_read_in_one_step(pair, size):
    ours, theirs = pair
    payload = {"payload": "x" * size}
    theirs.sendall(_message(payload))
    transport = _transport(patched=True)
    assert transport._handleReadableIncoming(tcp.TCPIncomingPersistent(PEER, ours)) is None
    assert len(transport._incomingEnvelopes) == 1
    envelope = transport._incomingEnvelopes[0]
    assert isinstance(envelope, ReceiveEnvelope) and envelope.message == payload
    assert _read(theirs, len(ackMsg)) == ackMsg  # acknowledged, as Thespian does
    assert tcp.opsKey(PEER) in transport._openSockets  # the socket stays open for the next one


def test_a_message_larger_than_the_socket_buffer_is_read_as_it_arrives(pair):
    ours, theirs = pair
    payload = "y" * 3_000_000
    writer = threading.Thread(target=theirs.sendall, args=(_message(payload),))
    writer.start()
    transport = _transport(patched=True)
    inc, steps = tcp.TCPIncomingPersistent(PEER, ours), 0
    while inc is not None and steps < 10_000:
        select.select([ours], [], [], 5)  # as Thespian's loop waits for readability
        inc, steps = transport._handleReadableIncoming(inc), steps + 1
        assert inc is None or not inc.failCount
    writer.join()
    assert [e.message for e in transport._incomingEnvelopes] == [payload]


def test_half_a_message_waits_without_blocking_or_backing_off(pair):
    ours, theirs = pair
    data = _message("hello")
    theirs.sendall(data[:12])
    transport = _transport(patched=True)
    inc = transport._handleReadableIncoming(tcp.TCPIncomingPersistent(PEER, ours))
    assert inc is not None and not transport._incomingEnvelopes
    assert inc.failCount == 0 and not inc.backoffPause()  # still selected on the next loop
    theirs.sendall(data[12:])
    assert transport._handleReadableIncoming(inc) is None
    assert [e.message for e in transport._incomingEnvelopes] == ["hello"]


def test_a_closed_peer_still_closes_the_incoming_socket(pair):
    ours, theirs = pair
    theirs.sendall(_message("cut")[:8])
    theirs.close()
    transport = _transport(patched=True)
    assert transport._handleReadableIncoming(tcp.TCPIncomingPersistent(PEER, ours)) is None
    assert not transport._incomingEnvelopes


def _sending(ours: socket.socket) -> TransmitIntent:
    intent = TransmitIntent(PEER, "payload")
    intent.socket, intent.serMsg, intent.amtSent = ours, _message("payload"), 0
    intent.stage = tcp.TCPTransport._XMITStepSendData
    return intent


def test_a_sent_message_waits_for_its_acknowledgement_at_once(pair):
    ours, theirs = pair
    plain = _sending(ours)
    assert _transport(patched=False)._next_XMIT_2(plain) is True
    assert plain.stage == tcp.TCPTransport._XMITStepShutdownWrite  # Thespian alone: one more loop first

    intent = _sending(ours)
    assert _transport(patched=True)._next_XMIT_2(intent) is True
    assert intent.stage == tcp.TCPTransport._XMITStepWaitForAck and isinstance(intent.ackbuf, ReceiveBuffer)
    assert _read(theirs, 2 * len(_message("payload"))) == _message("payload") * 2


def _waiting_for_ack(ours: socket.socket) -> TransmitIntent:
    intent = _sending(ours)
    intent.stage, intent.ackbuf = tcp.TCPTransport._XMITStepWaitForAck, ReceiveBuffer(pickle.loads)
    return intent


def test_an_acknowledgement_is_read_in_one_step(pair):
    ours, theirs = pair
    theirs.sendall(ackMsg)
    plain, transport = _transport(patched=False), _transport(patched=True)
    first = _waiting_for_ack(ours)
    assert plain._next_XMIT_4(first) is True and not plain._finished_intents  # 20 of its 21 bytes
    assert plain._next_XMIT_4(first) is False
    assert plain._finished_intents == [(first, SendStatus.Sent)]

    theirs.sendall(ackMsg)
    intent = _waiting_for_ack(ours)
    assert transport._next_XMIT_4(intent) is False
    assert transport._finished_intents == [(intent, SendStatus.Sent)]


def test_a_message_in_place_of_the_acknowledgement_is_received_and_the_ack_still_awaited(pair):
    # Both ends sent at once on one socket: Thespian takes the other side's message as an
    # incoming one and goes on waiting for its own acknowledgement.
    ours, theirs = pair
    theirs.sendall(_message("crossing") + ackMsg)
    transport = _transport(patched=True)
    intent = _waiting_for_ack(ours)
    assert transport._next_XMIT_4(intent) is False
    assert [e.message for e in transport._incomingEnvelopes] == ["crossing"]
    assert transport._finished_intents == [(intent, SendStatus.Sent)]
    assert _read(theirs, len(ackMsg)) == ackMsg


def test_no_acknowledgement_yet_leaves_the_intent_waiting(pair):
    ours, _ = pair
    transport = _transport(patched=True)
    intent = _waiting_for_ack(ours)
    intent.ackbuf.addMore(ackMsg[:20])
    assert transport._next_XMIT_4(intent) is True  # nothing to read: Thespian's own backoff, as before
    assert intent.stage == tcp.TCPTransport._XMITStepWaitForAck and not transport._finished_intents


# -- quick_idle_checks ---------------------------------------------------------------------
def test_the_quick_expiry_check_answers_as_thespians(pair):
    ours, _ = pair
    idle = tcp.IdleSocket(ours, PEER)
    for validity, expired in ((ExpirationTimer(timedelta(minutes=20)), False),
                              (ExpirationTimer(timedelta(0)), True), (ExpirationTimer(None), False)):
        idle.validity = validity
        assert quick_idle_checks._idle_expired(idle) is expired
        assert idle.validity.view().expired() is expired  # what Thespian's IdleSocket.expired returns


def test_a_kept_address_hash_is_thespians_and_is_never_pickled():
    quick_idle_checks.install()
    for address in (TCPv4ActorAddress("127.0.0.1", 40003, external=False),
                    RoutedTCPv4ActorAddress("127.0.0.1", 40004, None, None, external=False)):
        assert hash(address) == hash((address.socketArgs, address.connectArgs))  # Thespian's formula
        assert hash(address) == hash(address) and "_pegasus_hash" in vars(address)
        copy = pickle.loads(pickle.dumps(address))
        assert "_pegasus_hash" not in vars(copy) and copy == address and hash(copy) == hash(address)
        assert {address: "found"}[copy] == "found"
    renamed = TCPv4ActorAddress("127.0.0.1", 40003, external=False)
    str(renamed)  # caches Thespian's own _str_form, which its __getstate__ drops: both are dropped
    hash(renamed)
    assert set(vars(pickle.loads(pickle.dumps(renamed)))) == {"af", "socktype", "proto", "sockname", "bindname"}
