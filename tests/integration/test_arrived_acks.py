"""actors/wire/leaving.py take_arrived_acks: an acknowledgement that came while a handler was busy (a worker's
stage at L = 50 ms, issue 33) is read before the next send to that peer, so the next message leaves at once
instead of a pass of the loop later (and its answer-left wait, a wake-up later still)."""

from __future__ import annotations

from tests.support.ack_sender import Peer, Sender

ASK = 90  # seconds: the sender's wait is bounded at 60 s


def test_an_acknowledgement_read_before_the_send_lets_the_next_message_leave_at_once(tcp_system) -> None:
    spec, asys = tcp_system
    outcomes = {}
    for take in (None, "elsewhere", "peer"):  # a peer each: a queued message keeps its connection busy a while
        sender, peer = asys.createActor(Sender), asys.createActor(Peer)
        assert asys.ask(sender, ("warm", peer), ASK) == "warm"
        outcomes[take] = asys.ask(sender, ("go", take), ASK)
    assert outcomes[None] == (0, False)  # Thespian alone: queued behind the unread acknowledgement
    assert outcomes["elsewhere"] == (0, False)  # only the acknowledgements of messages to the address named
    assert outcomes["peer"] == (1, True)
