"""The Python client: connect to (or start) a Pegasus system and talk to its supervisor.

    with Client.start(settings) as client:          # an embedded system, shut down on exit
        task = client.submit("what is 2 + 3 * 4?")
        done = client.wait(task["task_id"], timeout=30)

``Client.connect(settings)`` attaches to a running system (``pegasus start``).
A client is not thread-safe: use one per thread.  Replies are matched to
requests by request id; transition notices that arrive meanwhile are kept for
``follow``.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from thespian.actors import ActorSystem

from actors import messages as m
from actors.supervisor import Supervisor
from actors.system import SystemNotRunningError, SystemSpec, attach, detach, shutdown, start_daemon, start_system
from pegasus.config import Settings
from pegasus.errors import PegasusError
from pegasus.tools.plugins import preflight

TERMINAL_LIFECYCLE = frozenset({"done", "failed", "canceled"})


class RequestError(PegasusError):
    """The supervisor refused a request; ``error_type`` names the kind of error."""

    def __init__(self, message: str, error_type: str | None) -> None:
        self.error_type = error_type or "Error"
        super().__init__(message)


def spec_for(settings: Settings) -> SystemSpec:
    """The SystemSpec of the system these settings describe."""
    system = settings.system
    return SystemSpec(admin_port=system.admin_port, state_dir=settings.state_dir(), bind=system.bind,
                      base=system.base, allow_non_loopback=system.allow_non_loopback)


def resolved(settings: Settings) -> Settings:
    """Settings with the state directory made absolute, as every actor process needs it."""
    return settings.with_overrides({"state": {"home": str(settings.state_dir())}})


class Client:
    def __init__(self, asys: ActorSystem, spec: SystemSpec, settings: Settings, *, owns_system: bool,
                 timeout: float = 30.0) -> None:
        self.asys, self.spec, self.settings = asys, spec, settings
        self.owns_system = owns_system
        self.closed = False
        self.timeout = timeout
        self.supervisor = asys.createActor(Supervisor, globalName=m.SUPERVISOR_NAME)
        self._ids = itertools.count(1)
        self._prefix = f"{os.getpid()}-{id(self):x}"
        self._notices: deque[m.TransitionNotice] = deque()

    # -- getting a client ------------------------------------------------------------------
    @classmethod
    def connect(cls, settings: Settings, timeout: float = 30.0) -> Client:
        """Attach to the running system; SystemNotRunningError if there is none."""
        settings = resolved(settings)
        spec = spec_for(settings)
        return cls(attach(spec), spec, settings, owns_system=False, timeout=timeout)

    @classmethod
    def start(cls, settings: Settings, timeout: float = 30.0) -> Client:
        """Start a system in this process's care (shut down by ``close``) and configure it."""
        settings = resolved(settings)
        preflight(settings.model_dump())
        spec = spec_for(settings)
        asys = start_system(spec)
        client = cls(asys, spec, settings, owns_system=True, timeout=timeout)
        try:
            client.configure()
        except BaseException:
            client.close()
            raise
        return client

    @classmethod
    def start_daemon(cls, settings: Settings, timeout: float = 30.0) -> tuple[Client, int]:
        """Start a detached background system, configure it, return a client and the admin pid."""
        settings = resolved(settings)
        preflight(settings.model_dump())
        spec = spec_for(settings)
        pid = start_daemon(spec, timeout=settings.system.start_timeout_s)
        client = cls(attach(spec), spec, settings, owns_system=False, timeout=timeout)
        try:
            client.configure()
        except BaseException:
            client.close()
            shutdown(spec)
            raise
        return client, pid

    def configure(self) -> dict[str, Any]:
        return self._ask(m.Configure(settings=self.settings.model_dump()))

    def close(self) -> None:
        """Shut the system down if this client started it; otherwise just detach."""
        if self.closed:
            return
        self.closed = True
        if self.owns_system:
            shutdown(self.spec, self.asys)
        else:
            detach(self.asys)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations ----------------------------------------------------------------------------
    def submit(self, text: str, *, machine: Literal["classic", "reason_act"] | None = None, priority: int = 5,
               metadata: dict[str, Any] | None = None, source: str = "python", follow: bool = False) -> dict[str, Any]:
        return self._ask(m.Submit(text=text, machine=machine, priority=priority, metadata=metadata or {},
                                  source=source, follow=follow))

    def submit_many(self, tasks: Iterable[str | dict[str, Any]], *,
                    machine: Literal["classic", "reason_act"] | None = None, priority: int = 5,
                    source: str = "python") -> list[dict[str, Any]]:
        """Submit several tasks in one request (at most ``messages.MAX_BATCH``): all or none.

        Each task is its text, or a dict of ``submit``'s arguments (text, machine,
        priority, metadata, source, follow); the keyword arguments are the defaults.
        Answers task_id, machine, priority and lifecycle_state of each, in order.
        """
        defaults = {"machine": machine, "priority": priority, "source": source}
        items = [m.Submit(**{**defaults, **({"text": task} if isinstance(task, str) else task)}) for task in tasks]
        return self._ask(m.SubmitMany(tasks=items))

    def get(self, task_id: str) -> dict[str, Any]:
        return self._ask(m.Get(task_id=task_id))

    def list(self, state: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        return self._ask(m.ListTasks(state=state, limit=limit))

    def history(self, task_id: str) -> dict[str, Any]:
        return self._ask(m.History(task_id=task_id))

    def suspend(self, task_id: str, reason: str = "suspended by request") -> dict[str, Any]:
        return self._ask(m.Suspend(task_id=task_id, reason=reason))

    def resume(self, task_id: str, message: str | None = None) -> dict[str, Any]:
        return self._ask(m.Resume(task_id=task_id, message=message))

    def cancel(self, task_id: str, reason: str = "canceled by request") -> dict[str, Any]:
        return self._ask(m.Cancel(task_id=task_id, reason=reason))

    def approve(self, task_id: str) -> dict[str, Any]:
        return self._ask(m.Approve(task_id=task_id))

    def retry(self, task_id: str) -> dict[str, Any]:
        return self._ask(m.Retry(task_id=task_id))

    def stats(self) -> dict[str, Any]:
        return self._ask(m.Stats())

    def wait(self, task_id: str, timeout: float = 60.0, until: frozenset[str] = TERMINAL_LIFECYCLE) -> dict[str, Any]:
        """Poll until the task's lifecycle state is in ``until`` (terminal by default)."""
        deadline = time.monotonic() + timeout
        pause = 0.01
        while True:
            task = self.get(task_id)
            if task["lifecycle_state"] in until:
                return task
            if time.monotonic() >= deadline:
                raise TimeoutError(f"task {task_id} is still {task['lifecycle_state']} after {timeout:g}s")
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def follow(self, task_id: str, timeout: float = 60.0, *, subscribe: bool = True,
               until: frozenset[str] = TERMINAL_LIFECYCLE | {"blocked"}) -> Iterator[m.TransitionNotice]:
        """Yield the task's transitions live until its lifecycle reaches ``until``."""
        if subscribe:
            self._ask(m.Subscribe(task_id=task_id))
        deadline = time.monotonic() + timeout
        try:
            current = self.get(task_id)["lifecycle_state"]
            while True:
                while self._notices:
                    notice = self._notices.popleft()
                    if notice.task_id != task_id:
                        continue
                    yield notice
                    if notice.machine == "lifecycle":
                        current = notice.to_state
                if current in until:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"task {task_id} did not finish within {timeout:g}s")
                message = self.asys.listen(min(remaining, 1.0))
                if isinstance(message, m.TransitionNotice):
                    self._notices.append(message)
        finally:
            self._ask(m.Unsubscribe())

    # -- plumbing ------------------------------------------------------------------------------------
    def _ask(self, request: m.Request) -> Any:
        request_id = f"{self._prefix}-{next(self._ids)}"
        request = request.model_copy(update={"request_id": request_id})
        self.asys.tell(self.supervisor, request)
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SystemNotRunningError(
                    f"no reply from the supervisor within {self.timeout:g}s", self.spec.admin_port)
            message = self.asys.listen(remaining)
            if isinstance(message, m.TransitionNotice):
                self._notices.append(message)
            elif isinstance(message, m.Reply) and message.request_id == request_id:
                if not message.ok:
                    raise RequestError(message.error or "request failed", message.error_type)
                return message.data
