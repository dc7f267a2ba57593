"""The guardian's decisions: when a supervisor is brought up, who is told where it is, what a death means.

The guardian (``actors/guardian.py``) is the top of a system's tree; this core keeps what it knows: the
Locate requests waiting while a supervisor starts, the Configure in flight, why the last start failed
(a first start that failed is told to every Locate; after a death it is tried again, slowed down by
``pegasus.supervision``), the supervisor's last trouble, and the gateway keeper.  Addresses are opaque
values the carrier hands in.  ``step(input) -> [command]`` never raises, the clock in the inputs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pegasus.core_error import Log, error_log
from pegasus.levels import Level
from pegasus.requests.base import Reply
from pegasus.supervision import Alarm, ChildSpec, Exceeded, Exited, Restart, StartAgain, Started, Supervision
from pegasus.views import supervision_view

SUPERVISOR, KEEPER = "supervisor", "gateway_keeper"
SPECS = {name: ChildSpec(Restart.PERMANENT, intensity=5, period_s=60.0, when_exceeded=Exceeded.SLOW_DOWN,
                         first_s=0.0, then_s=1.0, max_s=30.0, stable_s=60.0) for name in (SUPERVISOR, KEEPER)}
TROUBLE_FRESH_S = 30.0  # an error the supervisor told this long before it died is not named as the cause
UNEXPECTED = "it exited unexpectedly (killed, or failed outside its handlers: see logs/thespian.log)"


# -- inputs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Locate:
    """``client`` asks where the supervisor is (answered once one is up, or its start failed)."""

    client: Any
    request_id: str
    now: float


@dataclass(frozen=True)
class SettingsRead:
    """The carrier read the settings after a ``ReadSettings``: ``settings``, or why they cannot be used."""

    now: float
    settings: Any = None
    error: str | None = None
    http_enabled: bool = False


@dataclass(frozen=True)
class Created:
    """The carrier created ``child`` (SUPERVISOR or KEEPER) at ``address``."""

    child: str
    address: Any
    now: float


@dataclass(frozen=True)
class StartFailed:
    """The carrier could not carry out a ``StartSupervisor`` (configuring logging or creating it raised)."""

    error: str
    now: float


@dataclass(frozen=True)
class Replied:
    """A Reply from ``sender``: the supervisor's answer to a Configure is ``ok`` (its ``pid``) or its ``error``."""

    sender: Any
    reply: Reply
    now: float


@dataclass(frozen=True)
class Trouble:
    """``sender`` (the supervisor, when it is) told it is failing on ``error``."""

    sender: Any
    error: str
    now: float


@dataclass(frozen=True)
class ChildExited:
    """The child at ``address`` died; ``crash``: what ended its process, as its log says (None: unknown)."""

    address: Any
    now: float
    crash: str | None = None


@dataclass(frozen=True)
class Due:
    """A timer armed by ``WakeIn`` fired: ``child`` is due again (a supervisor's for ``generation``)."""

    child: str
    generation: int
    now: float


@dataclass(frozen=True)
class Exit:
    """The guardian is asked to exit: its children go with it, nothing starts again."""


Input = Locate | SettingsRead | Created | StartFailed | Replied | Trouble | ChildExited | Due | Exit


# -- commands ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """Send ``reply`` to ``client``."""

    client: Any
    reply: Reply


@dataclass(frozen=True)
class ReadSettings:
    """Read the settings; step ``SettingsRead`` with them."""


@dataclass(frozen=True)
class StartSupervisor:
    """Configure logging from ``settings``, create a supervisor (step ``Created``), send it Configure."""

    request_id: str
    settings: Any


@dataclass(frozen=True)
class StartKeeper:
    """Create the gateway keeper (step ``Created``) and tell it to start the gateway."""


@dataclass(frozen=True)
class Stop:
    """Ask the actor at ``address`` to exit."""

    address: Any


@dataclass(frozen=True)
class WakeIn:
    """Arm a timer: step ``Due(child, generation)`` after ``seconds``."""

    seconds: float
    child: str
    generation: int


Command = Answer | ReadSettings | StartSupervisor | StartKeeper | Stop | WakeIn | Log


class GuardianCore:
    """See the module docstring.  ``incarnation`` names this guardian among all (a new system: a new one)."""

    def __init__(self, incarnation: str | None = None) -> None:
        self.incarnation = incarnation or uuid.uuid4().hex
        self.supervision = Supervision(SPECS)
        self.supervisor: Any = None
        self.gateway: Any = None  # the HTTP gateway's keeper ([http] enabled)
        self.configuring: str | None = None  # the request id of the Configure in flight
        self.error: str | None = None  # why the last start failed
        self.waiting: list[tuple[Any, str]] = []  # Locate requests answered once the supervisor is up
        self.deaths = 0  # of supervisors: 0 while the first one starts
        self.trouble: tuple[float, str] | None = None  # (when, what) the supervisor last told it was failing on
        self.supervisor_pid: int | None = None
        self.generation = 0
        self.pausing = False  # a supervisor's restart waits for its WakeIn (a crash loop's pause): Locate waits too
        self.http_enabled = False
        self.exiting = False

    def step(self, event: Input) -> list[Command]:
        try:
            return self._step(event)
        except Exception as exc:  # noqa: BLE001 - the top of the tree must never be taken down; nothing is decided
            return [error_log("guardian_core", event, exc)]

    def _step(self, event: Input) -> list[Command]:
        if isinstance(event, Locate):
            return self._locate(event)
        if isinstance(event, SettingsRead):
            return self._settings_read(event)
        if isinstance(event, Created):
            return self._created(event)
        if isinstance(event, StartFailed):
            return self._start_failed(event)
        if isinstance(event, Replied):
            return self._replied(event)
        if isinstance(event, Trouble):
            if event.sender == self.supervisor and self.supervisor is not None:
                self.trouble = (event.now, event.error)
            return []
        if isinstance(event, ChildExited):
            return self._exited(event)
        if isinstance(event, Due):
            return self._due(event)
        if isinstance(event, Exit):
            self.exiting = True
            return [Stop(address) for address in (self.supervisor, self.gateway) if address is not None]
        return []

    def pid_of(self, address: Any) -> int | None:
        """The supervisor's pid when ``address`` is the supervisor (where the carrier looks for its crash)."""
        return self.supervisor_pid if address is not None and address == self.supervisor else None

    def located(self, now: float) -> dict[str, Any]:
        """Where the supervisor is, which one, and how its children are (a Locate's answer)."""
        return {"supervisor": self.supervisor, "generation": self.generation, "incarnation": self.incarnation,
                "restarts": self.deaths, "children": supervision_view(self.supervision.view(now))}

    def _up(self) -> bool:
        return self.supervisor is not None and self.configuring is None

    def _locate(self, event: Locate) -> list[Command]:
        if self._up():
            return [Answer(event.client, Reply(event.request_id, True, data=self.located(event.now)))]
        self.waiting.append((event.client, event.request_id))
        if self.supervisor is not None or self.exiting or self.pausing:
            return []  # answered once one is up (a Locate does not cut a crash loop's pause short)
        if self.error is not None and self.deaths == 0:
            return self._answer_waiting(event.now)  # the first start failed: say why (pegasus start reports it)
        return [ReadSettings()]

    def _settings_read(self, event: SettingsRead) -> list[Command]:
        if self.supervisor is not None or self.configuring is not None or self.exiting:
            return []
        if event.error is not None:
            return self._failed(event.error, event.now)
        self.http_enabled = event.http_enabled
        self.generation += 1
        self.configuring = f"guardian-{self.generation}"
        return [StartSupervisor(self.configuring, event.settings)]

    def _created(self, event: Created) -> list[Command]:
        if event.child == SUPERVISOR:
            self.supervisor = event.address
        elif event.child == KEEPER:
            self.gateway = event.address
            self.supervision.step(Started(KEEPER, KEEPER, event.now))
        return []

    def _start_failed(self, event: StartFailed) -> list[Command]:
        if self.configuring is None or self.supervisor is not None:
            return []
        self.configuring = None
        return self._failed(f"the supervisor could not be started: {event.error}", event.now)

    def _replied(self, event: Replied) -> list[Command]:
        reply = event.reply
        if reply.request_id != self.configuring or event.sender != self.supervisor:
            return []
        self.configuring = None
        if not reply.ok:
            stop: list[Command] = [Stop(self.supervisor)]
            self.supervisor = None
            return stop + self._failed(reply.error or "the supervisor could not be configured", event.now)
        data = reply.data or {}
        self.error = None
        self.supervision.step(Started(SUPERVISOR, SUPERVISOR, event.now))
        self.supervisor_pid = data.get("pid")
        return [Log(Level.INFO, "supervisor_up", {"generation": self.generation, "restored": data.get("restored")}),
                *self._start_keeper(), *self._answer_waiting(event.now)]

    def _failed(self, error: str, now: float) -> list[Command]:
        self.error = error
        commands: list[Command] = [Log(Level.ERROR, "supervisor_not_configured", {"error": error})]
        if self.deaths:  # after a death: keep trying, with a pause (the store may be back later)
            commands += self._carry(self.supervision.step(Exited(SUPERVISOR, now, f"its start failed: {error}")))
        return commands + self._answer_waiting(now)

    def _answer_waiting(self, now: float) -> list[Command]:
        waiting, self.waiting = self.waiting, []
        answers: list[Command] = []
        for client, request_id in waiting:
            if self._up():
                reply = Reply(request_id, True, data=self.located(now))
            elif not self.deaths:  # the system's first supervisor: the start itself failed
                reply = Reply(request_id, False, error=str(self.error), error_type="StartFailed")
            else:
                reply = Reply(request_id, False, error=f"the supervisor is not running: {self.error}",
                              error_type="SystemNotRunning")
            answers.append(Answer(client, reply))
        return answers

    def _start_keeper(self) -> list[Command]:
        """The HTTP gateway's keeper, once the first supervisor is up (again if the keeper died)."""
        return [StartKeeper()] if self.http_enabled and self.gateway is None and not self.exiting else []

    def _exited(self, event: ChildExited) -> list[Command]:
        if self.gateway is not None and event.address == self.gateway:
            self.gateway = None
            if self.exiting:
                return []
            return [Log(Level.WARNING, "gateway_keeper_died"),
                    *self._carry(self.supervision.step(Exited(KEEPER, event.now, "the gateway keeper exited")))]
        if self.supervisor is None or event.address != self.supervisor:
            return []
        self.supervisor, self.configuring = None, None
        if self.exiting:
            return []
        self.deaths += 1
        told, self.trouble = self.trouble, None
        fresh = told is not None and event.now - told[0] <= TROUBLE_FRESH_S
        reason = told[1] if fresh and told is not None else event.crash or UNEXPECTED
        log = Log(Level.WARNING, "supervisor_died", {"generation": self.generation, "deaths": self.deaths,
                                                     "reason": reason})
        return [log, *self._carry(self.supervision.step(Exited(SUPERVISOR, event.now, reason)))]

    def _carry(self, decided: list[Any]) -> list[Command]:
        commands: list[Command] = []
        for command in decided:
            if isinstance(command, Alarm):
                commands.append(Log(Level.ERROR, f"{command.child}_crash_loop", {
                    "deaths": command.deaths, "period_s": command.period_s, "reason": command.reason}))
            elif isinstance(command, StartAgain) and command.child == SUPERVISOR:
                commands.append(Log(Level.WARNING, "supervisor_restart",
                                    {"restart_in_s": command.delay_s, "deaths": command.deaths}))
                if command.delay_s <= 0:
                    commands.append(ReadSettings())
                else:
                    self.pausing = True
                    commands.append(WakeIn(command.delay_s, SUPERVISOR, self.generation))
            elif isinstance(command, StartAgain) and command.child == KEEPER:
                commands += self._start_keeper() if command.delay_s <= 0 else \
                    [WakeIn(command.delay_s, KEEPER, self.generation)]
        return commands

    def _due(self, event: Due) -> list[Command]:
        if event.child == SUPERVISOR:
            if event.generation == self.generation and self.supervisor is None and not self.exiting:
                self.pausing = False
                return [ReadSettings()]
            return []
        return self._start_keeper() if event.child == KEEPER else []
