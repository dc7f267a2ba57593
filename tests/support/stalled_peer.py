"""Three tiny actors for tests/integration/test_peer_slots.py (importable by module path in every process of a
multiprocTCPBase system, as tests/support/echo_actor.py says).

``Peer`` answers "pid" with its process id and takes anything else silently (the test stops it).  ``Sender``,
asked ``("flood", peer, n, probe)``, sends ``peer`` n messages, then asks ``probe`` to tell the asker
"arrived": that last send is the one a stopped peer must not hold up.
"""

from __future__ import annotations

import os

from thespian.actors import Actor


class Peer(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if message == "pid":
            self.send(sender, os.getpid())


class Probe(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if isinstance(message, tuple) and message[0] == "tell":
            self.send(message[1], "arrived")


class Sender(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if isinstance(message, tuple) and message[0] == "flood":
            _, peer, n, probe = message
            for number in range(n):
                self.send(peer, number)
            self.send(probe, ("tell", sender))
