"""send_then: when a message has left the process, as Thespian 4.0.1's transport shows it; what it and
take_arrived_acks read, only on the Thespian code they were written for; send_with_callback's internals pinned,
refusing the start where they differ."""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import pytest
from thespian.system.transport import SendStatus

import actors.wire.thespian_patches as patches
from actors.wire import leaving
from actors.wire.leaving import send_then, take_arrived_acks
from actors.wire.thespian_patches import PatchRefused
from actors.wire.thespian_patches.readers import ARRIVED_ACKS, SENT_CALLBACKS, WRITTEN_WHOLE


class Actor:
    """An actor whose transport writes ``written`` bytes of each message at once (None: no transport)."""

    def __init__(self, written: int | None) -> None:
        self.sent: list[tuple[Any, Any]] = []
        self.intents: list[Any] = []
        self.written = written
        if written is not None:
            self._myRef = SimpleNamespace(transport=object(), _send_intent=self._send_intent, actor_send_fail=None)

    def send(self, to: Any, message: Any) -> None:
        self.sent.append((to, message))

    def _send_intent(self, intent: Any) -> None:
        intent.serMsg = b"x" * 10
        intent.amtSent = self.written
        self.intents.append(intent)


def test_a_message_written_whole_has_left_at_once_one_still_inside_when_its_send_ends() -> None:
    left: list[str] = []
    whole = Actor(written=10)
    send_then(whole, "peer", "m", lambda: left.append("whole"))
    assert left == ["whole"]
    partly = Actor(written=4)  # or waiting behind an unacknowledged message to the same peer
    send_then(partly, "peer", "m", lambda: left.append("partly"))
    assert left == ["whole"]
    [intent] = partly.intents
    intent.tx_done(SendStatus.Sent)  # acknowledged (or failed for good: the same)
    assert left == ["whole", "partly"]


def test_where_thespian_differs_from_the_pinned_code_a_message_has_left_only_once_its_send_is_done(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """How much of a message is written is read by internals pinned (``written_whole``): where they differ,
    send_then does not read them and waits for Thespian's callback; the check warns, as for a speed patch."""
    target = next(t for t in WRITTEN_WHOLE.targets if t.name == "_next_XMIT_2")
    monkeypatch.setattr(target, "expected", "source 0")
    monkeypatch.setattr(patches, "_warned", set())
    leaving.whole_readable.cache_clear()
    try:
        left: list[str] = []
        whole = Actor(written=10)
        send_then(whole, "peer", "m", lambda: left.append("whole"))
        assert left == []
        whole.intents[0].tx_done(SendStatus.Sent)
        assert left == ["whole"]
    finally:
        leaving.whole_readable.cache_clear()
    checked = patches.verify()
    assert [p.name for p in checked.skipped()] == ["written_whole"] and not checked.refused()
    assert "speed patch written_whole: TCPTransport._next_XMIT_2 is not the code" in capsys.readouterr().err


def test_a_send_with_a_callback_on_code_other_than_the_pinned_refuses_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Thespian's callback a worker could not tell when its result has left: ``sent_callbacks`` is a
    robustness reader, and a changed target of it refuses the start, naming it."""
    target = next(t for t in SENT_CALLBACKS.targets if t.name == "tx_done")
    monkeypatch.setattr(target, "expected", "source 0")
    with pytest.raises(PatchRefused) as refused:
        patches.verify()
    assert str(refused.value) == (
        "Thespian robustness patch sent_callbacks cannot apply: TransmitIntent.tx_done is not the code the patch was "
        f"written for ({target.found()}, expected source 0); Pegasus needs Thespian 4.0.1's own code there "
        "(see docs/thespian-patches.md#sent-callbacks)")


def test_without_a_transport_the_message_is_sent_plainly_and_has_left() -> None:
    actor, left = Actor(written=None), []
    send_then(actor, "peer", "m", lambda: left.append(1))
    assert actor.sent == [("peer", "m")] and left == [1]



class _Transport:
    """Thespian 4.0.1's TCP transport as take_arrived_acks sees it: one intent waiting for its acknowledgement,
    which has arrived (its socket is readable)."""

    _XMITStepWaitForAck = 4

    def __init__(self, sock: socket.socket) -> None:
        self._transmitIntents = {sock.fileno(): SimpleNamespace(socket=sock, stage=4, targetAddr="peer")}
        self.stepped: list[int] = []

    def _exclusively_processing(self) -> bool:
        return True

    def _not_processing(self) -> None:
        pass

    def _processIntents(self, fileno: int) -> None:  # noqa: N802 - Thespian's name
        self.stepped.append(fileno)


def test_a_thespian_other_than_the_pinned_one_has_no_acknowledgement_read_and_the_check_says_so(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The internals take_arrived_acks steps are pinned (thespian_patches.readers): where they differ it reads
    nothing, and the patches' check reports it as a speed patch left out."""
    ours, peers = socket.socketpair()
    with ours, peers:
        peers.sendall(b"ack")
        actor = SimpleNamespace(_myRef=SimpleNamespace(transport=_Transport(ours)))
        leaving.acks_readable.cache_clear()
        assert take_arrived_acks(actor, "peer") == 1  # the pinned code: read
        target = next(t for t in ARRIVED_ACKS.targets if t.name == "_processIntents")
        monkeypatch.setattr(target, "expected", "source 0")
        leaving.acks_readable.cache_clear()
        try:
            assert take_arrived_acks(actor, "peer") == 0
            monkeypatch.undo()
            monkeypatch.setattr(leaving, "installed_version", lambda: "4.0.2")
            leaving.acks_readable.cache_clear()
            assert take_arrived_acks(actor, "peer") == 0  # another version: the same
            assert actor._myRef.transport.stepped == [ours.fileno()]  # only the first call stepped
            monkeypatch.undo()
            monkeypatch.setattr(target, "expected", "source 0")
            monkeypatch.setattr(patches, "_warned", set())
        finally:
            leaving.acks_readable.cache_clear()
    checked = patches.verify()
    assert [p.name for p in checked.skipped()] == ["arrived_acks"]
    assert capsys.readouterr().err == (
        "pegasus: warning: running without the Thespian speed patch arrived_acks: TCPTransport._processIntents is not "
        f"the code the patch was written for ({target.found()}, expected source 0) "
        "(see docs/thespian-patches.md#arrived-acknowledgements)\n")
