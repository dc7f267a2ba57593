"""The Python client: connect to (or start) a Pegasus system and talk to its supervisor.

    with Client.start(settings) as client:          # an embedded system, shut down on exit
        done = client.wait(client.submit("what is 2 + 3 * 4?")["task_id"], timeout=30)

``Client.connect(settings)`` attaches to a running system (``pegasus start``).  Not thread-safe: one
per thread.  Replies are matched to requests by id; notices that come meanwhile wait for ``follow``.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from thespian.actors import ActorAddress, ActorSystem, ActorSystemException

from actors import messages as m
from actors.client.errors import RequestError, SupervisorReplaced, refusal
from actors.client.admin import AdminClient
from actors.client.memory import MemoryClient
from actors.client.ops import OpsClient
from actors.client.notices import Notices
from actors.client.triggers import TriggersClient
from actors.runtime.lifecycle import System
from actors.runtime.system import SystemNotRunningError, SystemSpec, listen, send
from pegasus import bounds
from pegasus.config import Settings
from pegasus.errors import InvalidRequest, PegasusError
from pegasus.requests import R
from pegasus.store.task_ids import FULL_CHARS
from pegasus.task.names import CognitiveMachineName, CognitiveState, LifecycleState, MachineName

TERMINAL_LIFECYCLE = frozenset({LifecycleState.DONE, LifecycleState.FAILED, LifecycleState.CANCELED})
QUIET_CHECK_S = 2.0  # follow: after this long without a notice, check the supervisor is the same one
WATCH_S = 2.0  # a request: after this long without its reply, check the supervisor is the same one


class Client(MemoryClient, TriggersClient, AdminClient, OpsClient):
    """A connection to one system's supervisor, found through its guardian (see the module docstring)."""

    def __init__(self, asys: ActorSystem, spec: SystemSpec, settings: Settings, *, owns_system: bool,
                 timeout: float = 30.0) -> None:
        self.asys, self.spec, self.settings = asys, spec, settings
        self.owns_system = owns_system
        self.closed = False
        self.timeout = bounds.seconds(timeout, "timeout")
        self.guardian: ActorAddress = asys.createActor(m.GUARDIAN_CLASS, globalName=m.GUARDIAN_NAME)
        self._supervisor: ActorAddress | None = None
        self.generation = 0  # the supervisor's, as the guardian counts them: it changes when one is replaced
        self._incarnation: tuple[str, int] = ("", 0)  # (guardian, generation) of the supervisor asked
        self._ids = itertools.count(1)
        self._prefix = f"{os.getpid()}-{id(self):x}"
        self._notices = Notices()  # by task: each follow reads its own
        self._replies: dict[str, m.Reply] = {}  # answers that came while another was awaited

    # -- getting a client ------------------------------------------------------------------
    @classmethod
    def connect(cls, settings: Settings, timeout: float = 30.0) -> Client:
        """Attach to the running system; SystemNotRunningError if there is none."""
        system, timeout = System.of(settings), bounds.seconds(timeout, "timeout")
        return cls(system.attach(), system.spec, system.settings, owns_system=False, timeout=timeout)

    @classmethod
    def start(cls, settings: Settings, timeout: float = 30.0) -> Client:
        """Start a system in this process's care (shut down by ``close``); returns once its supervisor is up."""
        return cls._launch(System.of(settings), timeout, daemon=False)[0]

    @classmethod
    def start_daemon(cls, settings: Settings, timeout: float = 30.0) -> tuple[Client, int]:
        """Start a detached background system (up, supervisor configured); a client and the admin pid."""
        client, pid = cls._launch(System.of(settings), timeout, daemon=True)
        assert pid is not None
        return client, pid

    @classmethod
    def start_leader(cls, settings: Settings, *, daemon: bool = True,
                     timeout: float = 30.0) -> tuple[Client, int | None]:
        """Start a convention's leader (``[convention] lead = true``: its pools place workers on members as
        they join); in the background like ``pegasus start``, or with ``daemon=False`` in this process's care."""
        return cls._launch(System.leader(settings), timeout, daemon=daemon)

    @classmethod
    def _launch(cls, system: System, timeout: float, *, daemon: bool) -> tuple[Client, int | None]:
        timeout = bounds.seconds(timeout, "timeout")
        from pegasus.tools.plugins import preflight  # here: the tools are no cost of a command that only asks
        preflight(system.settings)
        if daemon:
            pid: int | None = system.start_daemon()  # up, supervisor configured
            client = cls(system.attach(), system.spec, system.settings, owns_system=False, timeout=timeout)
        else:
            pid, client = None, cls(system.start(), system.spec, system.settings, owns_system=True, timeout=timeout)
        try:
            if not daemon:
                client.locate()
            system.wait_for_http(system.settings.system.start_timeout_s)  # the gateway starts after the supervisor
        except BaseException:
            client.close()
            if daemon and system.is_running():
                system.stop()  # a start that failed leaves nothing running
            raise
        return client, pid

    @property
    def supervisor(self) -> ActorAddress:
        """The supervisor's address (asked of the guardian the first time, and after one was replaced)."""
        if self._supervisor is None:
            self.locate()
        assert self._supervisor is not None
        return self._supervisor

    def locate(self) -> dict[str, Any]:
        """Ask the guardian for the supervisor (it starts one if there is none; waits while one starts)."""
        request_id = f"{self._prefix}-{next(self._ids)}"
        if send(self.asys, self.guardian, m.Locate(request_id=request_id)) is not None:
            self._refresh_guardian()  # a restarted system has a new guardian
            self._send(self.guardian, m.Locate(request_id=request_id), "the guardian")
        reply = self._reply(request_id, "the guardian")
        self._supervisor, self.generation = reply["supervisor"], reply["generation"]
        self._incarnation = (reply["incarnation"], reply["generation"])
        return reply

    def close(self) -> None:
        """Shut the system down if this client started it; otherwise just detach."""
        if self.closed:
            return
        self.closed = True
        system = System(self.settings, self.spec)
        if self.owns_system:
            system.stop(self.asys)
        else:
            system.detach(self.asys)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations ----------------------------------------------------------------------------
    def submit(self, text: str, *, machine: CognitiveMachineName | None = None, priority: int = 5,
               metadata: dict[str, Any] | None = None, source: str = "python", follow: bool = False,
               key: str | None = None, tier: str | None = None) -> dict[str, Any]:
        """Submit a task; answers its view, with ``existing`` True when ``key`` was used before.

        With an idempotency ``key``, a retried submit (after a timeout, say) answers
        the task the key created instead of making another; the same key with other
        text, machine, priority, metadata or tier is refused (``IdempotencyConflict``).
        ``tier``: the model tier ("default" or a name of ``[llm.tiers]``) of every model
        stage of the task; an unknown one is refused (RequestError naming the tiers).
        """
        return self.ask(m.Submit(text=text, machine=machine, priority=priority, metadata=metadata or {},
                                  source=source, follow=follow, key=key, tier=tier))

    def submit_many(self, tasks: Iterable[str | dict[str, Any]], *,
                    machine: CognitiveMachineName | None = None, priority: int = 5,
                    source: str = "python", tier: str | None = None) -> list[dict[str, Any]]:
        """Submit several tasks in one request (at most ``messages.MAX_BATCH``): all or none.

        Each task is its text, or a dict of ``submit``'s arguments (text, machine,
        priority, metadata, source, follow, key, tier); the keyword arguments are the defaults.
        Answers task_id, machine, priority, lifecycle_state and existing of each, in order.
        """
        defaults = {"machine": machine, "priority": priority, "source": source, "tier": tier}
        items = []
        for index, task in enumerate(tasks):
            try:
                items.append(m.Submit(**{**defaults, **({"text": task} if isinstance(task, str) else task)}))
            except InvalidRequest as exc:
                raise InvalidRequest(f"task {index + 1}: {exc}", exc.field) from None
        return self.ask(m.SubmitMany(tasks=items))

    def get(self, task_id: str) -> dict[str, Any]:
        return self.ask(m.Get(task_id=task_id))

    def list(self, state: str | None = None, limit: int = 1000, offset: int = 0, *, text: str | None = None,
             metadata: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Tasks, newest first: ``limit`` of them after skipping ``offset``; ``state`` is a lifecycle or a
        cognitive state (``messages.LIST_STATES``; another is refused); ``text``: every word of it in the
        input or the result; ``metadata``: tasks whose metadata has these values (as text)."""
        return self.list_page(state, limit, offset, text=text, metadata=metadata)["tasks"]

    def list_page(self, state: str | None = None, limit: int = 1000, offset: int = 0,
                  before: int | None = None, *, text: str | None = None,
                  metadata: dict[str, str] | None = None) -> dict[str, Any]:
        """``list``'s page with ``total``, how many tasks there are in all (that match), offset and limit;
        ``before``: only tasks older than the one whose ``seq`` it is (a cursor that new tasks do not shift)."""
        return self.ask(m.ListTasks(state=state, limit=limit, offset=offset, before=before, text=text,
                                    metadata=dict(metadata or {})))

    def history(self, task_id: str) -> dict[str, Any]:
        return self.ask(m.History(task_id=task_id))

    def context(self, task_id: str) -> dict[str, Any]:
        """What the task knows as of its last checkpoint: plan, steps' results, reflections (long texts cut)."""
        return self.ask(m.TaskContextRequest(task_id=task_id))

    def suspend(self, task_id: str, reason: str = "suspended by request") -> dict[str, Any]:
        return self.ask(m.Suspend(task_id=task_id, reason=reason))

    def resume(self, task_id: str, message: str | None = None) -> dict[str, Any]:
        return self.ask(m.Resume(task_id=task_id, message=message))

    def message(self, task_id: str, text: str) -> dict[str, Any]:
        """Add ``text`` to the task's conversation (stored before the answer).  A running task takes it at
        its next transition (suspends, then re-thinks with it), a suspended one is resumed with it, one not
        started yet starts with it; a finished one refuses it.  Answers the task's view and ``message``
        (its number and how it reaches the task)."""
        return self.ask(m.SendMessage(task_id=task_id, text=text))

    def cancel(self, task_id: str, reason: str = "canceled by request") -> dict[str, Any]:
        return self.ask(m.Cancel(task_id=task_id, reason=reason))

    def approve(self, task_id: str) -> dict[str, Any]:
        return self.ask(m.Approve(task_id=task_id))

    def retry(self, task_id: str) -> dict[str, Any]:
        return self.ask(m.Retry(task_id=task_id))

    def tree(self, task_id: str) -> dict[str, Any]:
        """The task and its sub-tasks, nested (``children``), each with its lifecycle and machine states."""
        return self.ask(m.Tree(task_id=task_id))

    def stats(self) -> dict[str, Any]:
        """Tasks, queue, pools, usage, and the guardian's view of its children (restarts, crash loops)."""
        return self.ask(m.Stats())

    def store_status(self) -> dict[str, Any]:
        """The store's health: state (writable, full, unavailable, damaged, replaced), error, what to do."""
        return self.ask(m.StoreStatus())

    def queued(self, task_id: str) -> int:
        """How many transitions of the task came and wait for a ``follow`` to read them."""
        return self._notices.queued(task_id)

    def discard(self, task_id: str) -> None:
        """Forget the notices of a task no follow will read (late ones after its unsubscribe)."""
        self._notices.discard(task_id)

    def subscribe(self, task_id: str | None) -> dict[str, Any]:
        """Have the task's transitions (every task's: None) sent here; read them with ``follow(subscribe=False)``."""
        return self.ask(m.Subscribe(task_id=task_id))

    def wait(self, task_id: str, timeout: float = 60.0, until: frozenset[str] = TERMINAL_LIFECYCLE) -> dict[str, Any]:
        """Poll until the task's lifecycle state is in ``until`` (terminal by default).

        A system that is restarting its supervisor (or, in the background, itself) is waited for too.
        """
        deadline = time.monotonic() + bounds.seconds(timeout, "timeout", forever=True)
        pause = 0.01
        while True:
            task = self._while_restarting(lambda: self.get(task_id), deadline)
            if task is not None and task["lifecycle_state"] in until:
                return task
            if time.monotonic() >= deadline:
                state = task["lifecycle_state"] if task is not None else "unknown (no answer)"
                raise TimeoutError(f"task {task_id} is still {state} after {timeout:g}s")
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def follow(self, task_id: str, timeout: float = 60.0, *, subscribe: bool = True,
               until: frozenset[str] = TERMINAL_LIFECYCLE | {LifecycleState.BLOCKED},
               stop: Callable[[], bool] | None = None) -> Iterator[m.TransitionNotice | m.TextDelta]:
        """Yield the task's transitions live until its lifecycle reaches ``until``, and between them the
        text its model stages write as they write it (``TextDelta``, with ``[llm] stream``; never stored,
        so only the text written after the subscription comes).  ``stop``: asked at least once a second,
        ends the follow when true (its reader went away).

        If the supervisor is replaced meanwhile, the client subscribes to the new one (what happened
        in between is not repeated: ``history`` has it) and goes on.
        """
        if len(task_id) < FULL_CHARS:  # a prefix: notices carry the whole id
            task_id = self.get(task_id)["task_id"]
        if subscribe:
            self.ask(m.Subscribe(task_id=task_id))
        deadline = time.monotonic() + bounds.seconds(timeout, "timeout", forever=True)
        subscribed_to = self._incarnation
        mine = self._notices.follow(task_id)
        try:
            current = self.get(task_id)["lifecycle_state"]
            quiet_since = time.monotonic()
            while True:
                while mine:
                    notice = mine.popleft()
                    yield notice
                    quiet_since = time.monotonic()
                    if isinstance(notice, m.TransitionNotice) and notice.machine == MachineName.LIFECYCLE:
                        current = notice.to_state
                if stop is not None and stop():
                    return
                if current in until:
                    if current != LifecycleState.BLOCKED or LifecycleState.BLOCKED not in until:
                        return
                    task = self.get(task_id)  # blocked: suspended (the end here), or waiting for its sub-tasks
                    current = task["lifecycle_state"]
                    if current == LifecycleState.BLOCKED and (not task.get("waiting_for") or self._asks(task_id)):
                        return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"task {task_id} did not finish within {timeout:g}s")
                message = listen(self.asys, min(remaining, 1.0))
                if isinstance(message, (m.TransitionNotice, m.TextDelta)):
                    self._notices.keep(message)
                elif time.monotonic() - quiet_since >= QUIET_CHECK_S:
                    # Quiet: is the supervisor that streams to us still the one running?
                    quiet_since = time.monotonic()
                    task = self._while_restarting(lambda: self.get(task_id), deadline)
                    if task is not None:
                        current = task["lifecycle_state"]
                    if self._incarnation != subscribed_to:
                        self.ask(m.Subscribe(task_id=task_id))
                        subscribed_to = self._incarnation
        finally:
            self._notices.unfollow(task_id)
            try:
                self.ask(m.Unsubscribe(task_id=task_id))  # this follow's subscription, not the others'
            except (PegasusError, ActorSystemException):
                pass  # the system went away: nothing to unsubscribe from

    def unsubscribe(self) -> None:
        """End ``subscribe(None)``'s subscription to every task (a follow's go on)."""
        try:
            self.ask(m.Unsubscribe(task_id=None))
        except (PegasusError, ActorSystemException):
            pass  # the system went away: nothing to unsubscribe from

    def notices(self, seconds: float) -> tuple[m.TransitionNotice | m.TextDelta, ...]:
        """The notices of ``subscribe(None)`` that came (waiting up to ``seconds`` for one when none is here),
        less those of the tasks a ``follow`` reads."""
        if not self._notices.unfollowed_waiting():
            message = listen(self.asys, bounds.seconds(seconds, "seconds", inclusive=True))
            if isinstance(message, (m.TransitionNotice, m.TextDelta)):
                self._notices.keep(message)
            elif isinstance(message, m.Reply):
                self._replies[message.request_id] = message  # a late answer: kept for its request
        return self._notices.take_unfollowed()
    def _asks(self, task_id: str) -> bool:
        """Whether a sub-task under the task waits for a person (suspended): its parent waits on it."""
        nodes = [self.tree(task_id)]
        while nodes:
            node = nodes.pop()
            if node["lifecycle_state"] == LifecycleState.BLOCKED and node["state"] == CognitiveState.SUSPENDED:
                return True
            nodes += node.get("children") or []
        return False

    def _while_restarting(self, call: Callable[[], Any], deadline: float) -> Any:
        """``call()``, or None when the system does not answer now (a supervisor or the system restarting)."""
        try:
            return call()
        except (SystemNotRunningError, ActorSystemException):
            if time.monotonic() >= deadline:
                raise
            self._supervisor = None
            self._refresh_guardian()
            return None

    def _refresh_guardian(self) -> None:
        """After the admin itself was restarted, the guardian is a new actor: ask the admin for it again."""
        try:
            self.guardian = self.asys.createActor(m.GUARDIAN_CLASS, globalName=m.GUARDIAN_NAME)
        except ActorSystemException:
            pass  # the admin is not back yet

    # -- asking ---------------------------------------------------------------------------------------
    def ask(self, request: m.Request[R]) -> R:
        """The one way a request is asked: sent to the supervisor, its Reply's data returned as the request
        declares it (``Request[R]``); a refusal raises (RequestError, WebhookRefused, SystemNotRunningError)."""
        data = self._ask(request)
        if isinstance(request, m.Stats):  # with the guardian's view of its children: restarts, crash loops
            data = {**data, **self.locate().get("children", {})}
        return data

    def _ask(self, request: m.Request[Any]) -> Any:
        """``request`` sent as it is (no completion): its Reply's data."""
        request_id = f"{self._prefix}-{next(self._ids)}"
        request = request.model_copy(update={"request_id": request_id})
        failure = send(self.asys, self.supervisor, request, self.timeout)
        if failure == "DeadTarget":
            # That supervisor is gone and never got the request: ask where the new one is, send again.
            self._supervisor = None
            failure = send(self.asys, self.supervisor, request, self.timeout)
        if failure is not None:
            self._supervisor = None
            if failure == "BadPacket":
                raise RequestError("the supervisor refused the request's frame (see rejected_frames in stats)",
                                   "BadRequest")
            raise SystemNotRunningError(f"the request could not be sent to the supervisor ({failure})",
                                        self.spec.admin_port)
        try:
            return self._reply(request_id, "the supervisor", watch=True)
        except SystemNotRunningError:
            self._supervisor = None  # no answer: ask the guardian again next time
            raise

    def _send(self, address: ActorAddress, message: Any, whom: str) -> None:
        failure = send(self.asys, address, message, self.timeout)
        if failure is not None:
            raise SystemNotRunningError(f"could not reach {whom} ({failure})", self.spec.admin_port)

    def _reply(self, request_id: str, whom: str, watch: bool = False) -> Any:
        """The reply to ``request_id``.  ``watch``: every ``WATCH_S`` without it, check with the guardian that
        the supervisor asked is still the one running (a replaced one never answers)."""
        deadline = time.monotonic() + self.timeout
        next_check = time.monotonic() + WATCH_S
        while True:
            message = self._replies.pop(request_id, None)
            if message is None:
                now = time.monotonic()
                if now >= deadline:
                    raise SystemNotRunningError(f"no reply from {whom} within {self.timeout:g}s", self.spec.admin_port)
                if watch and now >= next_check:
                    next_check = now + WATCH_S
                    self._check_supervisor()
                message = listen(self.asys, min(deadline, next_check) - now if watch else deadline - now)
                if not isinstance(message, m.Reply):  # a Reply first: naming a notice's class imports it
                    if isinstance(message, (m.TransitionNotice, m.TextDelta)):
                        self._notices.keep(message)
                    continue
                if message.request_id != request_id and not (not message.ok and message.request_id == ""):
                    self._replies[message.request_id] = message  # another request's (a check's) answer
                    continue
            # A reply without an id is the supervisor saying it could not read a request
            # at all; this client has one request in flight: this one.
            if not message.ok:
                raise refusal(message, self.spec.admin_port)
            return message.data

    def _check_supervisor(self) -> None:
        """SupervisorReplaced when the guardian now names another supervisor than the one asked (a new
        generation, or a new guardian: the whole system was started again)."""
        asked = self._incarnation
        self.locate()
        if self._incarnation != asked:
            raise SupervisorReplaced("the supervisor was replaced before it answered", self.spec.admin_port)
