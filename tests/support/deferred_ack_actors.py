"""Tiny actors for tests/integration/test_deferred_acks.py (importable by module path in every process of a
multiprocTCPBase system, as tests/support/echo_actor.py says).

``Caller``, asked ``("warm", peer)``, has ``peer`` answer it once (their connection open and idle then) and
answers "warm".  Asked ``("call", peer, path, how)``, it sends ``peer`` a question -- ``how``: "plain" (``self.send``),
"then" (``send_then``, a callback once written whole and again at its end) or "told" (a callback at its end only,
its acknowledgement let wait: ``unhurried``) -- and answers whether the question's acknowledgement waits
(``deferred_acks``).  From then on it writes to ``path``, one line each, what it hears without being asked: the
peer's answer ("answer"), each callback ("left", or the send's status).  "lines" answers what it has written.
``Answerer`` answers "pid", and answers a question only when told ``"answer now"``, over the connection the
question came by.
"""

from __future__ import annotations

import os
from pathlib import Path

from thespian.actors import Actor, ActorExitRequest, ChildActorExited
from thespian.system.transport import SendStatus, TransmitIntent

from actors.wire.leaving import send_then
from actors.wire.thespian_patches.speed import deferred_acks


class Answerer(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if isinstance(message, (ActorExitRequest, ChildActorExited)):
            return
        if message == "pid":
            self.send(sender, os.getpid())
        elif message == "question":
            self.caller = sender
        elif message == "answer now":
            self.send(self.caller, "answer")


class Caller(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if isinstance(message, (ActorExitRequest, ChildActorExited)):
            return
        if isinstance(message, tuple) and message[0] == "warm":
            self.asker = sender
            self.send(message[1], "pid")
        elif isinstance(message, int):
            self.send(self.asker, "warm")
        elif isinstance(message, tuple) and message[0] == "call":
            _, peer, path, how = message
            self.path = Path(path)
            transport = self._myRef.transport
            if how == "plain":
                self.send(peer, "question")
            elif how == "then":
                send_then(self, peer, "question", lambda: self._write("left"))
            else:
                intent = TransmitIntent(peer, "question", onSuccess=self._status, onError=self._status)
                self._myRef._send_intent(intent)
                deferred_acks.unhurried(transport, intent)
            waits = any(intent.targetAddr == peer
                        for intent in transport.__dict__.get(deferred_acks.DEFERRED, {}).values())
            self.send(sender, waits)
        elif message == "answer":
            self._write("answer")
        elif message == "lines":
            self.send(sender, self.path.read_text().splitlines() if self.path.exists() else [])

    def _status(self, status, intent) -> None:
        self._write("sent" if status == SendStatus.Sent else "failed")

    def _write(self, line: str) -> None:
        with self.path.open("a") as out:
            out.write(line + "\n")
