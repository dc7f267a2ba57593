"""The supervisor's task actors: the hosts of its runs, placed and sized by ``pegasus.run.hosts``.

``TaskActors`` steps the policy (``TaskHosts.step``, the clock passed in), carries out its commands
(create a task actor, tell one to exit, arm the timer) and maps its host keys to addresses; the
supervisor sends the runs' messages.  A sender is told from its
address once: Thespian's ``ActorAddress.__eq__`` costs several calls a comparison, and every report asks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from thespian.actors import ActorAddress, ActorExitRequest

from pegasus import logs
from pegasus.config import RuntimeSettings
from pegasus.run import hosts as h


class TaskActors:
    """The supervisor's task actors; see the module docstring.

    ``create`` makes a task actor and answers its address, ``send`` sends a message,
    ``wake`` arms the supervisor's timer for ``tick`` (seconds).
    """

    def __init__(self, create: Callable[[], ActorAddress], send: Callable[[ActorAddress, object], None],
                 wake: Callable[[float], None]) -> None:
        self.create, self.send, self.wake = create, send, wake
        self.policy = h.TaskHosts()
        self.log = logs.get("supervisor")
        self.address: dict[int, ActorAddress] = {}
        self._known: dict[object, int] = {}  # a sender's address details -> its key (emptied when ``address`` changes)
        self.died = 0  # task actors that exited unasked (their runs resumed elsewhere): /metrics' restarts
        # TaskReports received, and the commits of their groups (pegasus.store.drain): stats' "reports"
        self.reports = {"messages": 0, "reports": 0, "most_tasks": 0, "commits": 0}

    def configure(self, runtime: RuntimeSettings) -> None:
        self.policy = h.TaskHosts(runtime.task_actors_min, runtime.task_actors_max, runtime.task_actor_runs,
                                runtime.task_actors_idle_s)

    def take(self, task_id: str, run: int) -> ActorAddress:
        """The address of the task actor the new run goes to (created now when the policy says so)."""
        return self._carry_out(self.policy.step(h.Place(task_id, run, time.monotonic())))

    def home(self) -> ActorAddress:
        """The home host's address, created now when there is none: the pools' cores run there."""
        return self._carry_out(self.policy.step(h.Home(time.monotonic())))

    def address_of(self, task_id: str, run: int | None = None) -> ActorAddress:
        """The task actor of the task's running run (of ``run`` when given), or None."""
        held = self.policy.host_of(task_id)
        if held is None or (run is not None and held[1] != run):
            return None
        return self.address.get(held[0])

    def sent_by(self, task_id: str, key: int | None) -> bool:
        """Whether the task's running run is on the task actor ``key`` (``key_of`` its message's sender)."""
        held = self.policy.host_of(task_id)
        return key is not None and held is not None and held[0] == key

    def release(self, task_id: str, run: int | None = None) -> ActorAddress:
        """The run stopped: the address of its task actor (None when it held no such run)."""
        return self._carry_out(self.policy.step(h.Release(task_id, run, time.monotonic())))

    def report(self, address: ActorAddress, cpu_s: float, reports: tuple[object, ...] = ()) -> int | None:
        """A TaskReports from ``address``: its CPU so far (its load), and the reports counted; its key."""
        counted = self.reports
        counted["messages"] += 1
        counted["reports"] += len(reports)
        counted["most_tasks"] = max(counted["most_tasks"], len({getattr(r, "task_id", None) for r in reports}))
        key = self.key_of(address)
        if key is not None:
            self._carry_out(self.policy.step(h.Report(key, cpu_s, time.monotonic())))
        return key

    def reflecting(self, address: ActorAddress, task_id: str) -> None:
        """The task actor at ``address`` handed the task's reflection out: it is not retired before the answer."""
        key = self.key_of(address)
        if key is not None:
            self._carry_out(self.policy.step(h.Hold(key, task_id)))

    def reflected(self, address: ActorAddress, task_id: str) -> None:
        """Its answer came (in the actor's reports)."""
        key = self.key_of(address)
        if key is not None:
            self._carry_out(self.policy.step(h.Unhold(key, task_id, time.monotonic())))

    def exited(self, address: ActorAddress) -> list[tuple[str, int]] | None:
        """A task actor exited: the runs it held (None: not one of ours any more, e.g. one retired)."""
        key = self.key_of(address)
        if key is None:
            return None
        del self.address[key]
        self._known.clear()
        self.died += 1
        lost = logs.emitted(self.log, self.policy.step(h.Lost(key)))
        return list(lost[0].runs) if lost and isinstance(lost[0], h.HostLost) else None

    def tick(self) -> None:
        self._carry_out(self.policy.step(h.Tick(time.monotonic())))

    def running(self) -> list[str]:
        return list(self.policy.placed)

    def addresses(self) -> list[ActorAddress]:
        return list(self.address.values())

    def view(self) -> dict[str, int]:
        return {**self.policy.view(), "died": self.died}

    def key_of(self, address: ActorAddress) -> int | None:
        """The key of our task actor at ``address`` (None: not one of ours).  Found by Thespian's comparison once,
        then by the address's details: a later sender equal to them by hash and ``==`` is that same actor."""
        details = getattr(address, "addressDetails", None)
        try:
            return self._known[details]
        except (KeyError, TypeError):  # not met yet, or details that cannot be a key: compared as Thespian does
            pass
        key = next((key for key, known in self.address.items() if known == address), None)
        if key is not None:
            with contextlib.suppress(TypeError):
                self._known[details] = key
        return key

    def _carry_out(self, commands: list[h.HostCommand]) -> Any:
        """Carry the commands out; the address a ``Placed`` or ``Freed`` names (None without one)."""
        named = None
        for command in logs.emitted(self.log, commands):
            if isinstance(command, (h.Placed, h.Freed)):
                named = self.address.get(command.key)
            elif isinstance(command, h.StartHost):
                self.address[command.key] = self.create()
                self._known.clear()
            elif isinstance(command, h.RetireHost):
                self._known.clear()
                self.send(self.address.pop(command.key), ActorExitRequest())
            elif isinstance(command, h.WakeIn):
                self.wake(command.seconds)
        return named
