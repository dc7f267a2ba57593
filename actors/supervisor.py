"""The supervisor: one per system (Thespian global name ``pegasus-supervisor``).

It answers every client request, keeps the tasks' lifecycle through
``pegasus.admission.Admission`` (pure), and turns Admission's effects into
messages: give a run a task actor, stop one, run a verification gate on the
tool pool, stream transitions to subscribers.  A task actor holds many runs,
passivated between their messages; which one a new run goes to, how many there
are (between ``[runtime] task_actors_min`` and ``task_actors_max``, grown under
load) and when one retires is ``pegasus.run.hosts``'s (``actors.task_actors``
carries it).  A malformed, unknown or
oversized request gets an error Reply; nothing a client sends can raise into
Thespian (which would re-deliver it and answer with PoisonMessage).
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import os
import time
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, ActorSystemMessage, ActorTypeDispatcher, WakeupMessage

from actors import messages as m
from actors.runtime import procs
from actors.request_handler import DEFERRED, request_handler
from actors.supervisor_messages import TaskMessages
from actors.supervisor_memory import MemoryRequests
from actors.supervisor_reflect import RecallAndReflect
from actors.supervisor_inspect import Inspection
from actors.supervisor_ops import OpsRequests
from actors.supervisor_runs import RunsAndStore
from actors.supervisor_children import STATS_WAIT_S, Children
from actors.supervisor_tokens import TokenRequests
from actors.supervisor_schedules import Schedules
from actors.supervisor_tree import TreeRequests
from actors.supervisor_vectors import Vectors
from actors.supervisor_webhooks import Webhooks
from actors.wire.frames import UnreadableMessage, rejected_count
from actors.task_actor import TaskActor, effect_registry
from actors.task_actors import TaskActors
from pegasus import logs
from pegasus.admission import Admission, Effect, MessageRun, RunGate, StartRun, StopRun, SuspendRun, TransitionNotice, WakeAfter
from pegasus.config import Settings
from pegasus.errors import PegasusError
from pegasus.views import members_view, store_facts, usage_view
from pegasus.idempotency import IdempotencyConflict, check_batch
from pegasus.store import Store, StoreError, StoreUnavailable
from pegasus.store import reflections
from pegasus.store.health import StoreHealth
from pegasus.submission import check_batch_size, check_task, numbered
from pegasus.task import CognitiveState, LifecycleState, PoolName, StageName, TaskNotFoundError
from pegasus.views import history_view, stored_view

class Supervisor(Children, RunsAndStore, MemoryRequests, RecallAndReflect, Vectors, Schedules, Webhooks, TokenRequests,
                 TreeRequests, Inspection, TaskMessages, OpsRequests, ActorTypeDispatcher):
    """One per system; see the module docstring."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        # Requests answer their own errors (request_handler); this catches the rest
        # (reports from task actors and pools) so nothing raises into Thespian.
        if self.exiting:
            # Told to exit: the store is closed.  Reports and exits of children that end
            # with us change nothing (a restart restores from the store); a request is told.
            if isinstance(message, m.Request):
                self.send(sender, m.Reply(str(message.request_id or ""), False, error="the system is stopping",
                                          error_type="SystemStopping"))
            return
        try:
            super().receiveMessage(message, sender)
        except StoreUnavailable as exc:
            self._store_failed(exc)
        except Exception as exc:  # noqa: BLE001
            self.log.exception("supervisor_error", message_type=type(message).__name__)
            self._tell_trouble(f"{type(exc).__name__}: {exc} (handling {type(message).__name__})")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()  # the guardian starts the next one: never two writers of the store
        self.admission: Admission | None = None
        self.store: Store | None = None
        self.store_health = StoreHealth()
        self.settings: Settings | None = None
        self.pools: dict[str, Any] = {}
        self._init_children()
        self.task_actors = TaskActors(lambda: self.task_actor_started(self._fork(TaskActor)), self.send,  # limits set by Configure
                                      lambda seconds: self.wakeupAfter(timedelta(seconds=seconds),
                                                                       payload=m.TaskActorsDue()))
        self.subscribers: list[tuple[Any, str | None]] = []
        self.pending_suspend: dict[str, list[tuple[Any, str]]] = {}
        self.pending_stats: dict[int, tuple[Any, str, dict[str, Any]]] = {}
        self.ask_ids = itertools.count(1)
        self.exiting = False  # told to exit: nothing is handled any more
        self.log = logs.get("supervisor")

    # -- configuration ------------------------------------------------------------------------
    @request_handler
    def receiveMsg_Configure(self, request: m.Configure, sender: Any) -> Any:
        settings = request.settings
        if self.settings is not None:
            if settings != self.settings:
                raise PegasusError("the supervisor is already configured with other settings")
            return {"configured": True}
        store = Store.in_state_dir(settings.state_dir())  # first: a damaged store refuses the start (file, check)
        # Before any worker starts: an unloadable plugin fails Configure (the ToolError names it).
        # Task actors forked from here inherit the registry built.
        effect_registry(settings)
        self.settings = settings
        logs.configure_from(settings)
        self.log = logs.get("supervisor")
        self.parent = sender
        pools = settings.pools
        for name, size, timeout, prefetch in ((PoolName.LLM, pools.llm_workers, pools.llm_timeout_s, pools.llm_prefetch),
                                              (PoolName.TOOL, pools.tool_workers, pools.tool_timeout_s, 0)):
            self._start_pool(name, m.PoolConfig(name, size, pools.queue_limit, timeout, settings, prefetch))
        self.task_actors.configure(settings.runtime)
        self.store = store
        try:
            self._restore()
        except StoreUnavailable as exc:  # e.g. a full disk: configured all the same, and it resumes by itself
            self._store_failed(exc)
        self._tick_schedules()  # slots missed while the system was down: fired or skipped now
        self._retention_timer()
        assert self.admission is not None
        self.log.info("configured", llm_workers=settings.pools.llm_workers, tool_workers=settings.pools.tool_workers,
                      max_active_tasks=settings.runtime.max_active_tasks, restored=len(self.admission.records),
                      store=str(store.path))
        return {"configured": True, "restored": len(self.admission.records), "store": self._store_status(),
                "pid": os.getpid()}

    def _restore(self) -> None:
        """Admission as the store has it, as at a start: the unfinished tasks restored, their runs
        started once the writes that restoring makes are committed."""
        assert self.settings is not None and self.store is not None
        admission = Admission(self.settings, store=self.store)
        with self.store.group():
            effects = admission.restore()
        self.admission = admission
        self._carry_out_health(self.store_health.recovered(time.monotonic()))
        self._carry_out(effects)
        self._reflections_restored()

    # -- client requests -------------------------------------------------------------------------
    @request_handler
    def receiveMsg_Submit(self, request: m.Submit, sender: Any) -> Any:
        assert self.admission is not None and self.store is not None
        machine, _ = self._checked(request)
        with self.store.group():  # created, approved, queued, maybe running: one commit, before the reply
            record, existing = self._create(request, machine, sender)
        return {**self._view(record.task_id), "existing": existing}

    @request_handler
    def receiveMsg_SubmitMany(self, request: m.SubmitMany, sender: Any) -> Any:
        """Every task checked before the first is created: all are created, in order, or none."""
        assert self.admission is not None and self.store is not None and self.settings is not None
        checked, size = [], 0
        for index, item in enumerate(request.tasks):
            try:
                valid = m.revalidate(item)  # a nested model is not validated again with its request
                assert isinstance(valid, m.Submit)
                machine, item_size = self._checked(valid)
            except ValueError as exc:
                raise ValueError(numbered(index, exc)) from None
            checked.append((valid, machine))
            size += item_size
        check_batch_size(size, self.settings.runtime)
        claims = [self.admission.claim(item.key, item.text, machine, item.priority, dict(item.metadata))
                  for item, machine in checked]
        check_batch(claims)
        for index, claim in enumerate(claims):  # a key used before with other content: none is created
            try:
                self.admission.task_for(claim)
            except IdempotencyConflict as exc:
                raise IdempotencyConflict(numbered(index, exc), exc.key, exc.task_id) from None
        self.admission.check_room(len(checked))
        with self.store.group():
            created = [self._create(item, machine, sender) for item, machine in checked]
        return [{"task_id": r.task_id, "machine": r.machine, "priority": r.priority, "lifecycle_state": r.state,
                 "existing": existing} for r, existing in created]

    def _checked(self, request: m.Submit) -> tuple[str, int]:
        assert self.settings is not None
        return check_task(request.text, request.metadata, request.machine, self.settings.runtime)

    def _create(self, request: m.Submit, machine: str, sender: Any) -> tuple[Any, bool]:
        """The task (created, or the one its key created before) and whether it existed."""
        assert self.admission is not None
        record, effects = self.admission.submit(request.text, machine, request.priority, dict(request.metadata),
                                                request.source, request.key)
        if request.follow:
            self.subscribers.append((sender, record.task_id))
        self.log.info("submitted" if effects else "submitted_again", task_id=record.task_id, machine=machine,
                      priority=request.priority)
        self._carry_out(effects)
        return record, not effects

    @request_handler
    def receiveMsg_Get(self, request: m.Get, sender: Any) -> Any:
        assert self.admission is not None
        return self._view(request.task_id)

    @request_handler
    def receiveMsg_ListTasks(self, request: m.ListTasks, sender: Any) -> Any:
        assert self.store is not None
        found = (request.text, request.metadata)  # pegasus.store.search
        tasks = self.store.list_tasks(request.state, request.limit, request.offset, request.before, *found)
        return {"tasks": self._listed_with_tree(tasks),
                "total": self.store.count_tasks(request.state, *found), "offset": request.offset, "limit": request.limit}

    @request_handler
    def receiveMsg_History(self, request: m.History, sender: Any) -> Any:
        assert self.store is not None
        if self.store.task_row(request.task_id, lenient=True) is None:
            raise TaskNotFoundError(request.task_id)
        return {**history_view(request.task_id, self.store.transitions(request.task_id, lenient=True),
                               self.store.audit(request.task_id)),
                "post_reflection": reflections.reflection_of(self.store, request.task_id)}

    @request_handler
    def receiveMsg_Suspend(self, request: m.Suspend, sender: Any) -> Any:
        assert self.admission is not None
        self._carry_out(self.admission.suspend(request.task_id, request.reason))
        self.pending_suspend.setdefault(request.task_id, []).append((sender, request.request_id))
        return DEFERRED

    @request_handler
    def receiveMsg_Resume(self, request: m.Resume, sender: Any) -> Any:
        assert self.admission is not None and self.settings is not None
        if request.message is not None and len(request.message.encode()) > self.settings.runtime.max_input_bytes:
            raise ValueError(f"resume message is over {self.settings.runtime.max_input_bytes} bytes")
        self._carry_out(self.admission.resume(request.task_id, request.message))
        return self._view(request.task_id)

    @request_handler
    def receiveMsg_Cancel(self, request: m.Cancel, sender: Any) -> Any:
        assert self.admission is not None
        self._carry_out(self.admission.cancel(request.task_id, request.reason))
        self._answer_suspends(request.task_id)
        return self._view(request.task_id)

    @request_handler
    def receiveMsg_Approve(self, request: m.Approve, sender: Any) -> Any:
        assert self.admission is not None
        self._carry_out(self.admission.approve(request.task_id))
        return self._view(request.task_id)

    @request_handler
    def receiveMsg_Retry(self, request: m.Retry, sender: Any) -> Any:
        assert self.admission is not None
        self._carry_out(self.admission.retry(request.task_id))
        return self._view(request.task_id)

    @request_handler
    def receiveMsg_Subscribe(self, request: m.Subscribe, sender: Any) -> Any:
        assert self.admission is not None
        if request.task_id is not None:
            self.admission.get(request.task_id)  # unknown task: a clear error
        self.subscribers.append((sender, request.task_id))
        return {"subscribed": request.task_id or "*"}

    @request_handler
    def receiveMsg_Unsubscribe(self, request: m.Unsubscribe, sender: Any) -> Any:
        # Only the subscription asked for: the same client may follow other tasks meanwhile.
        if (sender, request.task_id) not in self.subscribers:
            return {"removed": 0}
        self.subscribers.remove((sender, request.task_id))
        return {"removed": 1}

    @request_handler
    def receiveMsg_Stats(self, request: m.Stats, sender: Any) -> Any:
        ask_id = next(self.ask_ids)
        self.pending_stats[ask_id] = (sender, request.request_id, {})
        for pool in self.pools.values():
            self.send(pool, m.PoolStatsRequest(ask_id))
        self.wakeupAfter(timedelta(seconds=STATS_WAIT_S), payload=m.StatsDue(ask_id))  # a stopped pool must not hold it
        return DEFERRED

    def receiveMsg_PoolStats(self, stats: m.PoolStats, sender: Any) -> None:
        pending = self.pending_stats.get(stats.ask_id)
        if pending is None or self.admission is None:
            return
        # Every figure the pool sent (the message's fields but its ask id and name): one list of them, PoolStats'.
        pending[2][stats.name] = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)
                                  if f.name not in ("ask_id", "name")}
        if len(pending[2]) == len(self.pools):
            self._answer_stats(stats.ask_id)

    def _answer_stats(self, ask_id: int) -> None:
        """The stats request answered with the pools that answered (the others shown unresponsive)."""
        client, request_id, parts = self.pending_stats.pop(ask_id)
        if self.admission is None:
            self.send(client, m.Reply(request_id, False, error="the supervisor is not configured",
                                      error_type="SystemNotRunning"))
            return
        self.send(client, m.Reply(request_id, True, data={
            "queue_length": self.admission.queue_length(), "active": len(self.admission.running),
            "max_active_tasks": self.admission.settings.runtime.max_active_tasks,
            "tasks": self._task_counts(), "pools": self.pools_view(parts), "subscribers": len(self.subscribers),
            "task_actors": self.task_actors.view(), "store": self._store_status(),
            "rejected_frames": rejected_count(self.admission.settings.state_dir()),
            "supervisor_pid": os.getpid(), "usage": self._usage(), "quarantined": self.quarantined_view(),
            "members": members_view(parts), "embeddings": self._embeddings_view(), "facts": store_facts(self.store)}))

    def _usage(self) -> dict[str, Any] | None:
        """Every task's model usage and cost so far; None when the store cannot be read."""
        try:
            return usage_view(self.store.usage_totals()) if self.store is not None else None
        except StoreError:
            return None

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        if self.admission is not None and isinstance(wakeup.payload, m.RetryDue):
            self._carry_out(self.admission.wake(wakeup.payload.task_id))
        elif isinstance(wakeup.payload, m.StoreProbe):
            self._probe_store()
        elif isinstance(wakeup.payload, m.TaskActorsDue):
            self.task_actors.tick()
        elif isinstance(wakeup.payload, m.ScheduleDue):
            self._schedule_due(wakeup.payload)
        elif isinstance(wakeup.payload, m.PoolDue):
            self._pool_due(wakeup.payload)
        elif isinstance(wakeup.payload, m.PoolsCheck):
            self._check_pools()
        elif isinstance(wakeup.payload, m.StatsDue):
            self._stats_due(wakeup.payload)
        elif isinstance(wakeup.payload, m.RecallVectorDue):
            self._recall_vector_due(wakeup.payload)
        elif isinstance(wakeup.payload, m.VectorsDue):
            self._vectors_due()
        elif isinstance(wakeup.payload, m.RetentionDue):
            self._retention_due()

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self.exiting = True
        # Tell every child to exit: a child created just before shutdown may not be told otherwise.
        for address in self.task_actors.addresses():
            self.send(address, ActorExitRequest())
        for pool in self.pools.values():
            self.send(pool, ActorExitRequest())
        if self.store is not None:
            self.store.close()
            self.store = None

    def _view(self, task_id: str) -> dict[str, Any]:
        """What ``get`` answers: the live record, or (done, canceled, from before a restart) the store."""
        assert self.admission is not None and self.store is not None
        record = self.admission.records.get(task_id)
        view = record.view() if record is not None else self._stored_view(task_id)
        # Effectful steps that started and whose outcome is unknown (see pegasus.store.journal).
        view["effects_unknown"] = self.store.effects_unknown(task_id, run_over=view["lifecycle_state"] != LifecycleState.RUNNING)
        view.update(self._tree_view(task_id))  # parent, depth, children, waiting_for
        view["messages_quarantined"] = self.store.quarantined_messages(task_id)  # set aside, with their errors
        return view

    def _stored_view(self, task_id: str) -> dict[str, Any]:
        """A task from before this system started (done, failed or canceled): straight from the store."""
        assert self.store is not None
        row = self.store.task_row(task_id, lenient=True)  # a quarantined task's bad column: shown as None
        if row is None:
            raise TaskNotFoundError(task_id)
        return {**stored_view(task_id, row, self.store.transitions(task_id, lenient=True)),
                "messages": self.store.conversation(task_id),
                "post_reflection": reflections.reflection_of(self.store, task_id)}

    def receiveMsg_UnreadableMessage(self, message: UnreadableMessage, sender: Any) -> None:
        """An authentic request this process cannot unpickle (a class it lacks, a value nested too deep)."""
        self.send(sender, m.Reply("", False, error=f"the supervisor could not read the request: {message.error}",
                                  error_type="BadRequest"))

    def receiveUnrecognizedMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, ActorSystemMessage):
            return
        request_id = str(getattr(message, "request_id", "") or "")
        self.send(sender, m.Reply(request_id, False, error=f"unknown request type {type(message).__name__}",
                                  error_type="UnknownRequest"))

    # -- effects ------------------------------------------------------------------------------------
    def _carry_out(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, TransitionNotice):
                self._notify(effect)
                self._after_notice(effect)
            elif isinstance(effect, StartRun):
                assert self.settings is not None  # effects come only from a configured admission
                host = self.task_actors.take(effect.task_id, effect.run)
                self.send(host, m.StartTask(effect.snapshot, effect.run, self.pools[PoolName.LLM],
                                            self.pools[PoolName.TOOL], self.settings, effect.resume_event,
                                            effect.resume_payload, effect.generation, effect.journal, effect.task_id,
                                            inbox=effect.inbox,
                                            identity="" if self.settings.memory.recall_k else self._identity()))
            elif isinstance(effect, StopRun):
                run = self.task_actors.policy.host_of(effect.task_id)
                host = self.task_actors.release(effect.task_id)
                if host is not None and run is not None:  # its run may be mid-stage: what comes back is dropped
                    self.send(host, m.DropTask(effect.task_id, run[1]))
                for pool in self.pools.values():  # free the workers still busy with its stages
                    self.send(pool, m.CancelTask(effect.task_id))
                self._answered_by_pool(effect.task_id, StageName.GATE)
            elif isinstance(effect, SuspendRun):
                host = self.task_actors.address_of(effect.task_id)
                if host is not None:
                    self.send(host, m.SuspendTask(effect.task_id, effect.reason))
            elif isinstance(effect, MessageRun):
                host = self.task_actors.address_of(effect.task_id)
                if host is not None:  # else being placed: its StartRun carries them
                    self.send(host, m.MessageTask(effect.task_id, effect.run, effect.inbox))
            elif isinstance(effect, RunGate):
                self._to_pool(PoolName.TOOL, m.StageRequest(effect.task_id, effect.token, StageName.GATE,
                                                            gate=effect.gate, timeout_s=effect.gate.timeout_s))
            elif isinstance(effect, WakeAfter):
                self.wakeupAfter(timedelta(seconds=effect.seconds), payload=m.RetryDue(effect.task_id))

    def _fork(self, actor_class: type) -> Any:
        """createActor with the supervisor's objects frozen out of the garbage collector.

        A task actor is forked from this (large) process; a collection in the
        child would touch every inherited object's header and copy its page.
        Frozen, they stay shared (THESPIAN.md: halves a child's private memory).
        """
        gc.freeze()
        try:
            return self.createActor(actor_class)
        finally:
            gc.unfreeze()

    def _notify(self, notice: TransitionNotice | m.TextDelta) -> None:
        for address, task_id in self.subscribers:
            if task_id is None or task_id == notice.task_id:
                self.send(address, notice)

    def _answer_suspends(self, task_id: str) -> None:
        waiting = self.pending_suspend.get(task_id)
        if not waiting or self.admission is None:
            return
        record = self.admission.records.get(task_id)
        if record is not None and record.state == LifecycleState.RUNNING:
            return  # still going: the suspension has not landed yet
        del self.pending_suspend[task_id]
        for client, request_id in waiting:
            if record is not None and record.state == LifecycleState.BLOCKED and record.snapshot.state == CognitiveState.SUSPENDED:
                self.send(client, m.Reply(request_id, True, data=record.view()))
            else:
                state = record.state if record is not None else self._view(task_id)["lifecycle_state"]
                self.send(client, m.Reply(request_id, False, error_type="InvalidStateTransition",
                                          error=f"task {task_id} ended ({state}) before it was suspended"))
