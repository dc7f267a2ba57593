"""The supervisor on Thespian: a thin carrier, one per system (global name ``pegasus-supervisor``).

Each message finds its row in one table (``ROWS`` for requests, ``REPORTS`` for what its children
send, ``TIMERS`` for its own wakeups), a plain function of the supervisor's ``Context``; the pure
cores decide, and their commands are carried out by tables too.  Nothing a client sends can raise
into Thespian (which would re-deliver it): a bad request gets an error Reply.  What a message's
handling sends leaves once its writes are committed (``pegasus.store.drain``).  A new operation is
a message, a row and its tests (docs/architecture.md, "The supervisor: a carrier of tables").
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from thespian.actors import (
    Actor, ActorAddress, ActorExitRequest, ActorSystemMessage, ChildActorExited, PoisonMessage, WakeupMessage,
)

from actors import messages as m
from actors import telemetry
from actors.mcp_host import MCP_HOST, McpHostActor
from actors.runtime import procs
from actors.wire.frames import UnreadableMessage
from actors.wire.read_ahead import read_ahead
from actors.supervisor import children, lookups, memory, ops, runs, schedules, stats, store, tasks, vectors, webhooks
from actors.supervisor.commands import admit
from actors.supervisor.context import Context, Rows, specs
from actors.supervisor.outbox import coalesced, urgent
from actors.supervisor.replies import Row, answer, lookup
from actors.supervisor.task_actors import TaskActors
from actors.task_actor import TaskActor, effect_registry
from pegasus import logs
from pegasus.admission.inputs import Wake
from pegasus.errors import PegasusError
from pegasus.store import Store, StoreError, StoreUnavailable
from pegasus.store.drain import DrainBatch, Hold, Linger, Settle
from pegasus.store.health import ProbeDue
from pegasus.supervision import Supervision
from pegasus.task import PoolName


def configure(ctx: Context, request: m.Configure, sender: ActorAddress) -> Any:
    settings = request.settings
    if ctx.settings is not None:
        if settings != ctx.settings:
            raise PegasusError("the supervisor is already configured with other settings")
        return {"configured": True}
    opened = Store.in_state_dir(settings.state_dir())  # first: a damaged store refuses the start (file, check)
    # Before any worker starts: an unloadable plugin fails Configure (the ToolError names it).
    # Task actors forked from here inherit the registry built.
    effect_registry(settings)
    ctx.settings = settings
    logs.configure_from(settings)
    ctx.log = logs.get("supervisor")
    ctx.parent = sender
    pools = settings.pools
    ctx.supervision = Supervision(specs(pools.restart_pause_max_s))  # before any child starts
    ctx.task_actors.configure(settings.runtime)  # first: the pools' home host is one of its task actors
    for name, size, timeout, prefetch in ((PoolName.LLM, pools.llm_workers, pools.llm_timeout_s, pools.llm_prefetch),
                                          (PoolName.TOOL, pools.tool_workers, pools.tool_timeout_s, pools.tool_prefetch)):
        children.start_pool(ctx, name, m.PoolConfig(name, size, pools.queue_limit, timeout, settings, prefetch))
    ctx.store = opened
    try:
        store.restore(ctx)
    except StoreUnavailable as exc:  # e.g. a full disk: configured all the same, and it resumes by itself
        store.store_failed(ctx, exc)
    schedules.changed(ctx)  # slots missed while the system was down: fired or skipped now
    ops.retention_timer(ctx)
    assert ctx.admission is not None
    ctx.log.info("configured", llm_workers=pools.llm_workers, tool_workers=pools.tool_workers,
                 max_active_tasks=settings.runtime.max_active_tasks, restored=len(ctx.admission.records),
                 store=str(opened.path))
    return {"configured": True, "restored": len(ctx.admission.records), "store": store.store_status(ctx),
            "pid": os.getpid()}


def _requests(*tables: Rows) -> dict[type, Row]:
    return {kind: lookup(row) for table in tables for kind, row in table.items()}


# Requests: message -> row.  The (ctx, request) rows, then those that need the sender.
ROWS: Rows = {
    **_requests(lookups.REQUESTS, memory.REQUESTS, store.REQUESTS, tasks.REQUESTS, schedules.REQUESTS,
                webhooks.REQUESTS, ops.REQUESTS),
    **tasks.FROM_SENDER, **webhooks.FROM_SENDER, m.Stats: stats.stats, m.Configure: configure,
}

# What children and workers send: message -> row (ctx, message, sender).
REPORTS: Rows = {
    m.TaskReports: runs.task_reports, m.TextDelta: runs.text_delta, m.StepStarting: runs.step_starting,
    m.StageResult: runs.stage_result, m.TaskAbandoned: runs.task_abandoned, m.StageRequest: vectors.memory_step,
    m.AskRecall: vectors.recall, m.PoolReady: children.pool_ready, m.PoolStats: stats.pool_stats,
    m.McpListing: stats.mcp_listing,
    ChildActorExited: children.child_exited, PoisonMessage: runs.unsent,
}


def _retry_due(ctx: Context, due: m.RetryDue) -> None:
    if ctx.admission is not None:
        admit(ctx, Wake(due.task_id))


# What shares one commit with the next of its kind read in the same pass (pegasus.store.drain).
BATCHED = frozenset({m.TaskReports})

# The supervisor's own timers: wakeup payload -> row (ctx, payload).
TIMERS: Rows = {
    m.RetryDue: _retry_due, m.StoreProbe: lambda ctx, probe: store.step(ctx, ProbeDue()),
    m.TaskActorsDue: lambda ctx, due: ctx.task_actors.tick(), m.ScheduleDue: schedules.woken,
    m.PoolDue: children.pool_due, m.PoolsCheck: children.check_pools, m.StatsDue: stats.stats_due,
    m.RecallVectorDue: vectors.recall_vector_due, m.VectorsDue: vectors.vectors_due, m.RetentionDue: ops.retention_due,
    m.CommitDue: lambda ctx, due: None,  # its group was settled before it was handled (pegasus.store.drain)
}


class Supervisor(Actor):
    """One per system; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()  # the guardian starts the next one: never two writers of the store
        self.batch = DrainBatch()
        self.held: list[tuple[ActorAddress, Any]] | None = None  # sends waiting for their message's commit
        task_actors = TaskActors(lambda: children.task_actor_started(self.ctx, self._fork(TaskActor)), self._send,
                                 lambda seconds: self._wake(seconds, m.TaskActorsDue()))  # limits set by Configure
        self.ctx = Context(send=self._send, wake=self._wake, create=self._fork,
                           exit=lambda: self.send(self.myAddress, ActorExitRequest()),
                           task_actors=task_actors, log=logs.get("supervisor"),
                           find_mcp_host=lambda: self.createActor(McpHostActor, globalName=MCP_HOST))

    def receiveMessage(self, message: Any, sender: ActorAddress) -> None:
        ctx = self.ctx
        if ctx.exiting:
            # Told to exit: the store is closed.  Reports and exits of children that end
            # with us change nothing (a restart restores from the store); a request is told.
            if isinstance(message, m.Request):
                self.send(sender, m.Reply(str(message.request_id or ""), False, error="the system is stopping",
                                          error_type="SystemStopping"))
            return
        batched = type(message) in BATCHED
        lingered = type(message) is WakeupMessage and type(message.payload) is m.CommitDue
        self._batch(ctx, self.batch.before(batched, ctx.store is not None and ctx.admission is not None, lingered))
        self.held = [] if self.held is None else self.held  # what it sends waits for its writes' commit
        try:
            self._handle(ctx, message, sender)
        except StoreUnavailable as exc:
            self._batch(ctx, self.batch.failed())
            store.store_failed(ctx, exc)
        except Exception as exc:  # noqa: BLE001 - requests answer their own errors: this is the rest
            ctx.log.exception("supervisor_error", message_type=type(message).__name__)
            children.tell_trouble(ctx, f"{type(exc).__name__}: {exc} (handling {type(message).__name__})")
        linger_s = ctx.settings.store.commit_linger_ms / 1000.0 if ctx.settings is not None else 0.0
        if type(message) is m.TaskReports and message.waited:  # its task actor lingered already
            linger_s = 0.0
        self._batch(ctx, self.batch.after(self._next_batched(), urgent(self.held or []), linger_s))
        if not self.batch.open:
            self._flush()

    def _batch(self, ctx: Context, commands: list[Hold | Settle | Linger]) -> None:
        """pegasus.store.drain's commands: the store's group opened, or committed and the held sends sent, or
        left open until the timer (any message before it settles the group)."""
        for command in commands:
            if isinstance(command, Linger):
                self._wake(command.seconds, m.CommitDue())
                continue
            if isinstance(command, Hold):
                try:
                    assert ctx.store is not None
                    ctx.store.hold()
                except StoreError:  # not held: the report's own writes meet the trouble, handled as ever
                    self.batch.failed()
                continue
            failure: StoreError | None = None
            ctx.task_actors.reports["commits"] += command.commit  # stats' "reports": their commits
            try:
                if ctx.store is not None:
                    ctx.store.release(command.commit)
            except StoreError as exc:  # rolled back whole
                failure = exc
            self._flush()  # rolled back: sent all the same, as a report's sends were before (drain.py)
            if isinstance(failure, StoreUnavailable):
                store.store_failed(ctx, failure)
            elif failure is not None:
                ctx.log.error("store_batch_failed", error=str(failure))

    def _next_batched(self) -> bool:
        """Whether the next message this actor's transport has read already is a report (Thespian's queue)."""
        queued = read_ahead(self)
        return bool(queued) and type(queued[0]) in BATCHED

    def _flush(self) -> None:
        held, self.held = self.held or [], None
        for address, message in coalesced(held):  # a task actor's StartTasks in one message
            self.send(address, message)

    def _send(self, address: ActorAddress, message: Any) -> None:
        """Every send of the supervisor: held until the writes of the message it handles (of its batch of
        reports, pegasus.store.drain) are committed, then sent in order."""
        if self.held is not None:
            self.held.append((address, message))
        else:
            self.send(address, message)

    def _handle(self, ctx: Context, message: Any, sender: ActorAddress) -> None:  # not _receive: Thespian's
        kind = type(message)
        if kind in ROWS:
            answer(ctx, ROWS[kind], message, sender)
        elif kind in REPORTS:
            REPORTS[kind](ctx, message, sender)
        elif kind is WakeupMessage:
            timer = TIMERS.get(type(message.payload))
            if timer is not None:
                timer(ctx, message.payload)
        elif kind is ActorExitRequest:
            self._exit(ctx)
        elif kind is UnreadableMessage:  # an authentic request this process cannot unpickle
            self.send(sender, m.Reply("", False, error=f"the supervisor could not read the request: {message.error}",
                                      error_type="BadRequest"))
        elif not isinstance(message, ActorSystemMessage):
            request_id = str(getattr(message, "request_id", "") or "")
            self.send(sender, m.Reply(request_id, False, error=f"unknown request type {kind.__name__}",
                                      error_type="UnknownRequest"))

    def _exit(self, ctx: Context) -> None:
        ctx.exiting = True
        # Tell every child to exit: a child created just before shutdown may not be told otherwise.
        for address in ctx.task_actors.addresses():
            self.send(address, ActorExitRequest())
        for place in ctx.pools.places():
            if place not in ctx.task_actors.addresses():  # (a home host was told above)
                self.send(place, ActorExitRequest())
        if ctx.store is not None:
            ctx.store.close()
            ctx.store = None
        telemetry.flush()  # the runs' spans still held

    def _wake(self, seconds: float, payload: object) -> None:
        self.wakeupAfter(timedelta(seconds=seconds), payload=payload)

    def _fork(self, actor_class: type) -> ActorAddress:
        """createActor.  The fork itself freezes this process's objects out of the garbage collector, in
        both processes (actors/runtime/sharing.py): a collection here or in the child would write every
        object's header and copy its page.  They stay frozen: unfreezing here after a fork gave the
        collector back everything this process inherited too, and its next full collection copied it."""
        return self.createActor(actor_class)
