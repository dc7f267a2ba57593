"""Two tiny actors for tests/integration/test_child_exits.py (importable by module path in every process of a
multiprocTCPBase system, as tests/support/echo_actor.py says).

``Parent``, asked "start", creates three ``Child`` actors (A, B, C) and answers their pids once each has
said it.  Asked "kill", it does in one handler what a stage pool does when two of its workers are ended
close together: SIGKILL A, a ChildActorExited for A to itself (as the pool's shutdown path, and
Thespian's SIGCHLD handling, send one), SIGKILL B; it waits for each to be dead (a zombie) and answers
"killed".  Asked "exits", it answers which children (0: A, 1: B, 2: C) it was told exited; "pid": its pid.
"""

from __future__ import annotations

import os
import time

from thespian.actors import Actor, ActorExitRequest, ChildActorExited

from actors.runtime import procs

WAIT_S = 60.0  # a bound for a loaded machine, never a guess at how long it takes


class Child(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if isinstance(message, tuple) and message[0] == "pid":
            self.send(sender, ("child", message[1], os.getpid()))


class Parent(Actor):
    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if isinstance(message, ActorExitRequest):
            return
        if isinstance(message, ChildActorExited):
            self.exits.append(message.childAddress)
        elif message == "start":
            self.asker, self.exits, self.pids = sender, [], {}
            self.children = [self.createActor(Child) for _ in range(3)]
            for index, child in enumerate(self.children):
                self.send(child, ("pid", index))
        elif isinstance(message, tuple) and message[0] == "child":
            self.pids[message[1]] = message[2]
            if len(self.pids) == len(self.children):
                self.send(self.asker, [self.pids[i] for i in range(len(self.children))])
        elif message == "kill":
            _kill(self.pids[0])
            self.send(self.myAddress, ChildActorExited(self.children[0]))
            _kill(self.pids[1])
            self.send(sender, "killed")
        elif message == "exits":
            self.send(sender, sorted({i for i, child in enumerate(self.children) if child in self.exits}))
        elif message == "pid":
            self.send(sender, os.getpid())


def _kill(pid: int) -> None:
    """SIGKILL our own child ``pid`` and wait until it is dead (not reaped: Thespian reaps it)."""
    assert procs.kill_own_child(pid)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if not procs.is_alive(pid):
            return
        time.sleep(0.005)
