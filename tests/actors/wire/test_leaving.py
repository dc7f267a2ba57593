"""send_then: when a message has left the process, as Thespian 4.0.1's transport shows it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from thespian.system.transport import SendStatus

from actors.wire.leaving import send_then


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


def test_without_a_transport_the_message_is_sent_plainly_and_has_left() -> None:
    actor, left = Actor(written=None), []
    send_then(actor, "peer", "m", lambda: left.append(1))
    assert actor.sent == [("peer", "m")] and left == [1]

