"""The guardian: the top of a Pegasus system's actor tree (Thespian global name ``pegasus-guardian``).

It creates the supervisor from ``<state dir>/settings.json``, tells clients where it is
(``Locate``, which waits while one starts), and starts a new one when it dies; the supervisor's
children die with it, so there is never a second writer.  What a death of the supervisor or the
gateway keeper means is declared in ``SPECS`` and decided by ``pegasus.supervision``: at the top,
a crash loop is not given up on but slowed down, and ``Locate`` shows it with the last error
(docs/architecture.md, "Supervision").  It holds no task state and never raises into Thespian.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from actors import messages as m
from actors.boundary import Boundary
from actors.runtime import procs
from actors.gateway_keeper import GatewayKeeper
from actors.supervisor import Supervisor
from actors.runtime.system import HOME_CAPABILITY, SETTINGS_FILE
from pegasus import logs
from pegasus.config import Settings
from pegasus.errors import PegasusError
from pegasus.views import supervision_view
from pegasus.supervision import Alarm, ChildSpec, Exceeded, Exited, Restart, StartAgain, Started, Supervision

GUARDIAN_NAME = m.GUARDIAN_NAME
SUPERVISOR, KEEPER = "supervisor", "gateway_keeper"
SPECS = {name: ChildSpec(Restart.PERMANENT, intensity=5, period_s=60.0, when_exceeded=Exceeded.SLOW_DOWN,
                         first_s=0.0, then_s=1.0, max_s=30.0, stable_s=60.0) for name in (SUPERVISOR, KEEPER)}
TROUBLE_FRESH_S = 30.0  # an error the supervisor told this long before it died is not named as the cause


class GuardianError(PegasusError):
    """The guardian cannot configure a supervisor (its settings are missing or invalid)."""


def settings_path(state_dir: Path) -> Path:
    return Path(state_dir) / SETTINGS_FILE


def read_settings(state_dir: Path) -> Settings:
    path = settings_path(state_dir)
    try:
        return Settings.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise GuardianError(f"no settings at {path}: start the system with pegasus start") from None
    except (OSError, ValidationError) as exc:
        raise GuardianError(f"the settings at {path} cannot be used: {exc}") from None


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
        self.supervisor: Any = None
        self.configuring: str | None = None  # the request id of the Configure in flight
        self.error: str | None = None  # why the last configuration failed
        self.waiting: list[tuple[Any, str]] = []  # Locate requests answered once the supervisor is up
        self.supervision = Supervision(SPECS)
        self.deaths = 0  # of supervisors: 0 while the first one starts
        self.trouble: tuple[float, str] | None = None  # (when, what) the supervisor last told it was failing on
        self.supervisor_pid: int | None = None
        self.generation = 0
        # Names this guardian among all: a system started again has a new one, counting from 1 again.
        self.incarnation = uuid.uuid4().hex
        self.exiting = False
        self.gateway: Any = None  # the HTTP gateway's keeper ([http] enabled)
        self.http_enabled = False
        self.log = logs.get("guardian")

    def receiveMsg_Locate(self, request: m.Locate, sender: Any) -> None:
        if self.supervisor is not None and self.configuring is None:
            self.send(sender, self._located(request.request_id))
            return
        self.waiting.append((sender, request.request_id))
        if self.supervisor is None and not self.exiting:
            if self.error is not None and self.deaths == 0:
                self._answer_waiting()  # the first start failed: say why (pegasus start reports it)
            else:
                self._bring_up()

    def _located(self, request_id: str) -> m.Reply:
        return m.Reply(request_id, True, data={"supervisor": self.supervisor, "generation": self.generation,
                                               "incarnation": self.incarnation, "restarts": self.deaths,
                                               "children": supervision_view(self.supervision.view(time.monotonic()))})

    def _bring_up(self) -> None:
        try:
            settings = read_settings(self.home)
        except GuardianError as exc:
            self._failed(str(exc))
            return
        logs.configure_from(settings)
        self.log = logs.get("guardian")
        self.http_enabled = settings.http.enabled
        self.generation += 1
        self.supervisor = self.createActor(Supervisor)
        self.configuring = f"guardian-{self.generation}"
        self.send(self.supervisor, m.Configure(request_id=self.configuring, settings=settings))

    def receiveMsg_Reply(self, reply: m.Reply, sender: Any) -> None:
        if reply.request_id != self.configuring or sender != self.supervisor:
            return
        self.configuring = None
        if reply.ok:
            self.error = None
            self.supervision.step(Started(SUPERVISOR, SUPERVISOR, time.monotonic()))
            self.supervisor_pid = (reply.data or {}).get("pid")
            self.log.info("supervisor_up", generation=self.generation, restored=(reply.data or {}).get("restored"))
            self._start_gateway()
            self._answer_waiting()
        else:
            self.send(self.supervisor, ActorExitRequest())
            self.supervisor = None
            self._failed(reply.error or "the supervisor could not be configured")

    def _failed(self, error: str) -> None:
        self.error = error
        self.log.error("supervisor_not_configured", error=error)
        if self.deaths:  # after a death: keep trying, with a pause (the store may be back later)
            self._carry_out(self.supervision.step(Exited(SUPERVISOR, time.monotonic(), f"its start failed: {error}")))
        self._answer_waiting()

    def _answer_waiting(self) -> None:
        waiting, self.waiting = self.waiting, []
        for client, request_id in waiting:
            if self.supervisor is not None and self.configuring is None:
                self.send(client, self._located(request_id))
            elif not self.deaths:  # the system's first supervisor: the start itself failed
                self.send(client, m.Reply(request_id, False, error=str(self.error), error_type="StartFailed"))
            else:
                self.send(client, m.Reply(request_id, False, error=f"the supervisor is not running: {self.error}",
                                          error_type="SystemNotRunning"))

    def _start_gateway(self) -> None:
        """The HTTP gateway's keeper, once the first supervisor is up (again if the keeper died)."""
        if self.http_enabled and self.gateway is None and not self.exiting:
            self.gateway = self.createActor(GatewayKeeper)
            self.send(self.gateway, m.StartGateway(str(self.home.resolve())))
            self.supervision.step(Started(KEEPER, KEEPER, time.monotonic()))

    def receiveMsg_ChildTrouble(self, trouble: m.ChildTrouble, sender: Any) -> None:
        if sender == self.supervisor:
            self.trouble = (time.monotonic(), trouble.error)

    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        """Every child's death, in one place: what it means is the supervision's (SPECS)."""
        now = time.monotonic()
        if exited.childAddress == self.gateway and self.gateway is not None:
            self.gateway = None
            if not self.exiting:
                self.log.warning("gateway_keeper_died")
                self._carry_out(self.supervision.step(Exited(KEEPER, now, "the gateway keeper exited")))
            return
        if exited.childAddress != self.supervisor:
            return
        self.supervisor, self.configuring = None, None
        if self.exiting:
            return
        self.deaths += 1
        told = self.trouble
        self.trouble = None
        crash = last_crash(self.home / "logs" / "thespian.log", self.supervisor_pid)
        reason = told[1] if told is not None and now - told[0] <= TROUBLE_FRESH_S else crash or \
            "it exited unexpectedly (killed, or failed outside its handlers: see logs/thespian.log)"
        self.log.warning("supervisor_died", generation=self.generation, deaths=self.deaths, reason=reason)
        self._carry_out(self.supervision.step(Exited(SUPERVISOR, now, reason)))

    def _carry_out(self, commands: list[Any]) -> None:
        for command in commands:
            if isinstance(command, Alarm):
                self.log.error(f"{command.child}_crash_loop", deaths=command.deaths, period_s=command.period_s,
                               reason=command.reason)
            elif isinstance(command, StartAgain) and command.child == SUPERVISOR:
                self.log.warning("supervisor_restart", restart_in_s=command.delay_s, deaths=command.deaths)
                self._schedule(command.delay_s)
            elif isinstance(command, StartAgain) and command.child == KEEPER:
                if command.delay_s <= 0:
                    self._start_gateway()
                else:
                    self.wakeupAfter(timedelta(seconds=command.delay_s), payload=m.KeeperDue())

    def _schedule(self, delay: float) -> None:
        if delay <= 0:
            self._bring_up()
        else:
            self.wakeupAfter(timedelta(seconds=delay), payload=m.RestartDue(self.generation))

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        due = wakeup.payload
        if isinstance(due, m.RestartDue) and due.generation == self.generation and self.supervisor is None \
                and not self.exiting:
            self._bring_up()
        elif isinstance(due, m.KeeperDue):
            self._start_gateway()

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self.exiting = True
        if self.supervisor is not None:
            self.send(self.supervisor, ActorExitRequest())
        if self.gateway is not None:
            self.send(self.gateway, ActorExitRequest())
