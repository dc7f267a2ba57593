"""The guardian: the top of a Pegasus system's actor tree (Thespian global name ``pegasus-guardian``).

It creates the supervisor from the settings in ``<state dir>/settings.json``
(written by whoever starts the system, holding its lock), tells clients where the supervisor is
(``Locate``), and when the supervisor dies -- a SIGKILL, a crash -- starts a new
one, which restores every task from the store exactly as a restart does: no
person involved.  The supervisor's own children (task actors, pools, workers)
die with it (``procs.die_with_parent``), so there is never a second writer.
While a supervisor starts, ``Locate`` waits for it; a configuration that fails
is answered as the error, and after a death it is retried with a doubling pause
(``pegasus.restarts``).  The guardian holds no task state and never raises
into Thespian.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from actors import messages as m
from actors.boundary import Boundary
from actors import procs
from actors.gateway_keeper import GatewayKeeper
from actors.supervisor import Supervisor
from actors.system import HOME_CAPABILITY, SETTINGS_FILE
from pegasus import logs
from pegasus.config import Settings
from pegasus.errors import PegasusError
from pegasus.restarts import Restarts

GUARDIAN_NAME = "pegasus-guardian"


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
        self.restarts = Restarts()
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
            if self.error is not None and self.restarts.count == 0:
                self._answer_waiting()  # the first start failed: say why (pegasus start reports it)
            else:
                self._bring_up()

    def _located(self, request_id: str) -> m.Reply:
        return m.Reply(request_id, True, data={"supervisor": self.supervisor, "generation": self.generation,
                                               "incarnation": self.incarnation, "restarts": self.restarts.count})

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
            self.restarts.started(time.monotonic())
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
        if self.restarts.count:  # after a death: keep trying, with a pause (the store may be back later)
            self._schedule(self.restarts.died(time.monotonic()))
        self._answer_waiting()

    def _answer_waiting(self) -> None:
        waiting, self.waiting = self.waiting, []
        for client, request_id in waiting:
            if self.supervisor is not None and self.configuring is None:
                self.send(client, self._located(request_id))
            elif not self.restarts.count:  # the system's first supervisor: the start itself failed
                self.send(client, m.Reply(request_id, False, error=str(self.error), error_type="StartFailed"))
            else:
                self.send(client, m.Reply(request_id, False, error=f"the supervisor is not running: {self.error}",
                                          error_type="SystemNotRunning"))

    def _start_gateway(self) -> None:
        """The HTTP gateway's keeper, once the first supervisor is up (again if the keeper died)."""
        if self.http_enabled and self.gateway is None and not self.exiting:
            self.gateway = self.createActor(GatewayKeeper)
            self.send(self.gateway, m.StartGateway(str(self.home.resolve())))

    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        if exited.childAddress == self.gateway and self.gateway is not None:
            self.gateway = None
            if not self.exiting:
                self.log.warning("gateway_keeper_died")
                self._start_gateway()
            return
        if exited.childAddress != self.supervisor:
            return
        self.supervisor, self.configuring = None, None
        if self.exiting:
            return
        delay = self.restarts.died(time.monotonic())
        self.log.warning("supervisor_died", generation=self.generation, restart_in_s=delay, deaths=self.restarts.count)
        self._schedule(delay)

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

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self.exiting = True
        if self.supervisor is not None:
            self.send(self.supervisor, ActorExitRequest())
        if self.gateway is not None:
            self.send(self.gateway, ActorExitRequest())
