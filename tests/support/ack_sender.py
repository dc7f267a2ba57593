"""Two tiny actors for tests/integration/test_arrived_acks.py (importable by module path in every process of a
multiprocTCPBase system, as tests/support/echo_actor.py says).

``Sender``, asked ``("warm", peer)``, sends ``peer`` a ping and answers "warm" once the peer's pong is back
(their connection is open and idle then).  Asked ``("go", take)``, it does in one handler what a stage worker
does at L = 50 ms: a message to the peer, the peer's acknowledgement left unread while the handler is busy,
then ``take_arrived_acks`` (``take``: None, not called; "peer": for the peer; "elsewhere": for another
address), then ``send_then``; it answers (acknowledgements read, whether the second message had left when
``send_then`` returned).
"""

from __future__ import annotations

import select
import time

from thespian.actors import Actor, ActorExitRequest

from actors.wire.leaving import send_then, take_arrived_acks

WAIT_S = 60.0  # a bound for a loaded machine, never a guess at how long it takes


class Peer(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if message == "ping":
            self.send(sender, "pong")


class Sender(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if isinstance(message, ActorExitRequest):
            return
        if message == "pong":
            self.send(self.asker, "warm")
        elif message[0] == "warm":
            self.asker, self.peer = sender, message[1]
            self.send(self.peer, "ping")
        elif message[0] == "go":
            self.send(self.peer, "first")
            self._until_acknowledged()
            take = message[1]
            taken = 0 if take is None else take_arrived_acks(self, self.peer if take == "peer" else self.asker)
            left: list[bool] = []
            send_then(self, self.peer, "second", lambda: left.append(True))
            self.send(sender, (taken, bool(left)))

    def _until_acknowledged(self) -> None:
        """Wait, busy in this handler, until the peer's acknowledgement of "first" is in the socket, unread."""
        transport = self._myRef.transport
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            socks = [intent.socket for intent in transport._transmitIntents.values()
                     if intent.targetAddr == self.peer and getattr(intent, "socket", None) is not None]
            if socks and select.select(socks, [], [], 0.05)[0]:
                return
            if not socks:
                time.sleep(0.01)  # the first message not yet written: the peer's connection is being made
