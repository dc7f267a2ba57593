"""The guardian: the top of a Pegasus system's actor tree (Thespian global name ``pegasus-guardian``).

It creates the supervisor from ``<state dir>/settings.json``, tells clients where it is
(``Locate``, which waits while one starts), and starts a new one when it dies; the supervisor's
children die with it, so there is never a second writer.  What it knows and decides is
``pegasus.guardian.GuardianCore``'s (a death's meaning: ``pegasus.supervision``, at the top slowed
down, never given up on); this carrier is a table from messages to its inputs and from its commands to
sends, actors created, timers and log lines.  It holds no task state and never raises into Thespian.
"""

from __future__ import annotations

import os
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from actors import messages as m
from actors.boundary import Boundary
from actors.gateway_keeper import GatewayKeeper
from actors.runtime import procs
from actors.runtime.settings import SettingsUnusable, read_settings
from actors.runtime.system import HOME_CAPABILITY
from actors.supervisor import Supervisor
from pegasus import guardian as core
from pegasus import logs

GUARDIAN_NAME = m.GUARDIAN_NAME


def last_crash(path: Path, pid: int | None, tail_bytes: int = 65536) -> str | None:
    """The exception that ended actor process ``pid`` outside its handlers, as Thespian logged it (the last
    line of the traceback after "transport run exception"), or None."""
    if pid is None:
        return None
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - tail_bytes))
            text = log.read().decode(errors="replace")
    except OSError:
        return None
    found = text.rfind(f" p{pid} ")
    while found >= 0 and "transport run exception" not in text[found:text.find("\n", found)]:
        found = text.rfind(f" p{pid} ", 0, found)
    if found < 0:
        return None
    lines = []
    for line in text[found:].splitlines()[1:]:
        if re.match(r"\d{4}-\d\d-\d\d ", line):
            break  # the next record
        if line.strip():
            lines.append(line.strip())
    return lines[-1][:500] if lines else None


class Guardian(Boundary):
    """See the module docstring."""

    error_event = "guardian_error"

    def __init__(self, capabilities: dict[str, Any] | None = None) -> None:
        # Thespian passes its admin's capabilities to a parameter of this name (see StageWorker).
        super().__init__()
        procs.die_with_parent()
        self.home = Path(str((capabilities or {}).get(HOME_CAPABILITY) or "."))
        self.core = core.GuardianCore()
        self.log = logs.get("guardian")

    def receiveMsg_Locate(self, request: m.Locate, sender: Any) -> None:
        self._step(core.Locate(sender, request.request_id, time.monotonic()))

    def receiveMsg_Reply(self, reply: m.Reply, sender: Any) -> None:
        self._step(core.Replied(sender, reply, time.monotonic()))

    def receiveMsg_ChildTrouble(self, trouble: m.ChildTrouble, sender: Any) -> None:
        self._step(core.Trouble(sender, trouble.error, time.monotonic()))

    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        crash = last_crash(self.home / "logs" / "thespian.log", self.core.pid_of(exited.childAddress))
        self._step(core.ChildExited(exited.childAddress, time.monotonic(), crash))

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        due = wakeup.payload
        if isinstance(due, m.RestartDue):
            self._step(core.Due(core.SUPERVISOR, due.generation, time.monotonic()))
        elif isinstance(due, m.KeeperDue):
            self._step(core.Due(core.KEEPER, 0, time.monotonic()))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self._step(core.Exit())

    def _step(self, event: core.Input) -> None:
        commands = self.core.step(event)
        while commands:
            command = commands.pop(0)
            commands[:0] = _CARRY[type(command)](self, command)

    def _answer(self, command: core.Answer) -> list[core.Command]:
        self.send(command.client, command.reply)
        return []

    def _read_settings(self, command: core.ReadSettings) -> list[core.Command]:
        try:
            settings = read_settings(self.home)
        except SettingsUnusable as exc:
            return self.core.step(core.SettingsRead(time.monotonic(), error=str(exc)))
        return self.core.step(core.SettingsRead(time.monotonic(), settings, http_enabled=settings.http.enabled))

    def _start_supervisor(self, command: core.StartSupervisor) -> list[core.Command]:
        try:
            logs.configure_from(command.settings)
            self.log = logs.get("guardian")
            address = self.createActor(Supervisor)
        except Exception as exc:  # noqa: BLE001 - told to the core: a failed start, not a guardian stuck configuring
            return self.core.step(core.StartFailed(f"{type(exc).__name__}: {exc}", time.monotonic()))
        then = self.core.step(core.Created(core.SUPERVISOR, address, time.monotonic()))
        self.send(address, m.Configure(request_id=command.request_id, settings=command.settings))
        return then

    def _start_keeper(self, command: core.StartKeeper) -> list[core.Command]:
        address = self.createActor(GatewayKeeper)
        self.send(address, m.StartGateway(str(self.home.resolve())))
        return self.core.step(core.Created(core.KEEPER, address, time.monotonic()))

    def _stop(self, command: core.Stop) -> list[core.Command]:
        self.send(command.address, ActorExitRequest())
        return []

    def _wake(self, command: core.WakeIn) -> list[core.Command]:
        due = m.RestartDue(command.generation) if command.child == core.SUPERVISOR else m.KeeperDue()
        self.wakeupAfter(timedelta(seconds=command.seconds), payload=due)
        return []

    def _log(self, command: core.Log) -> list[core.Command]:
        logs.emit(self.log, command.level, command.event, **command.fields)
        return []


_CARRY: dict[type, Any] = {
    core.Answer: Guardian._answer, core.ReadSettings: Guardian._read_settings,
    core.StartSupervisor: Guardian._start_supervisor, core.StartKeeper: Guardian._start_keeper,
    core.Stop: Guardian._stop, core.WakeIn: Guardian._wake, core.Log: Guardian._log,
}
