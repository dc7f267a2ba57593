"""The supervisor's side of memory, where the store is written (convention members never open it).

Rows for the memory requests (``answer_memory``); a task's ``memory.*`` step, answered as a tool
worker would (a few SQLite statements, so it does not hold the mailbox up; a search with embeddings
waits for its vector off the mailbox: ``actors.supervisor.vectors``); recall before a think / reason
stage (``AskRecall``, when the query needs a vector or the task actor cannot read the store; a store
that cannot answer sends none); and the post-task reflector, handed out here or by a task actor,
written here (``pegasus.admission.reflections`` decides, ``pegasus.store.reflections`` keeps rows).
"""

from __future__ import annotations

from typing import Any

from thespian.actors import ActorAddress

from actors import messages as m
from actors.supervisor.context import Context, Rows
from pegasus import logs
from pegasus.admission import TransitionNotice
from pegasus.admission import reflections as post_reflections
from pegasus.admission.reflections import Count, Dispatch, GiveUp, Keep, PostReflections, TakenBack
from pegasus.cognitive.stages import offline_processors, run_stage
from pegasus.core_error import Log
from pegasus.memory import MemoryStore
from pegasus.memory.answers import answer_memory
from pegasus.memory.errors import MemoryStoreError
from pegasus.memory.recall import recalled_items
from pegasus.tools.memory import register
from pegasus.store.quarantine import reason
from pegasus.store import Store, StoreUnavailable, reflections
from pegasus.store.checkpoint import full_context, rebuild
from pegasus.task import LifecycleState, MachineName, PoolName, StageName, TaskSnapshot
from pegasus.task.models import PostTaskReflection, deep_copy
from pegasus.tools.registry import ToolRegistry


def memory_of(ctx: Context) -> MemoryStore:
    """The memory over the supervisor's store (a view: cheap, and always the store open now)."""
    if ctx.store is None or ctx.settings is None:
        raise RuntimeError("the supervisor has no store yet")
    return MemoryStore(ctx.store, ctx.settings.memory)


def _store(ctx: Context) -> Store:
    assert ctx.store is not None  # memory is reached only once the supervisor is configured
    return ctx.store


# -- requests ------------------------------------------------------------------------------------
def answer(ctx: Context, request: m.Request) -> Any:
    return answer_memory(memory_of(ctx), request)


def forget(ctx: Context, request: m.MemoryForget) -> Any:
    forgotten = answer_memory(memory_of(ctx), request)
    ctx.log.info("memory_forgotten", ids=forgotten["forgotten"])
    return forgotten


REQUESTS: Rows = {m.MemoryList: answer, m.MemorySearch: answer, m.MemoryShow: answer, m.MemoryWrite: answer,
           m.MemoryExport: answer, m.MemoryImport: answer, m.MemoryForget: forget}


# -- a task's memory step ---------------------------------------------------------------------------
def memory_step(ctx: Context, request: m.StageRequest, sender: ActorAddress, query_vector: list[float] | None = None,
                note: str | None = None) -> None:
    """Run the step now; a ``memory.search`` fused with ``query_vector`` (``actors.supervisor.vectors`` asks it
    first), or saying ``note`` (why there is none)."""
    try:
        result = _step(ctx, request, query_vector, note)
    except Exception as exc:  # noqa: BLE001 - the boundary: an error becomes the step's answer
        ctx.log.exception("memory_step_failed", task_id=request.task_id)
        result = m.StageResult(request.task_id, request.token, request.stage, ok=False,
                               error=f"{type(exc).__name__}: {exc}", error_kind="exception")
    ctx.send(sender, result)


def _step(ctx: Context, request: m.StageRequest, query_vector: list[float] | None,
          note: str | None) -> m.StageResult:
    if request.stage != StageName.ACT or request.context is None:
        return m.StageResult(request.task_id, request.token, request.stage, ok=False, error_kind="exception",
                             error=f"the supervisor runs memory steps only, not {request.stage!r}")
    assert ctx.settings is not None
    context = request.context
    if request.idempotency_key and context.plan is not None:
        context = deep_copy(context)  # the step's key is the append key (ToolContext.idempotency_key)
        for step in context.plan.steps:
            if step.index == request.step_index:
                step.action_params["idempotency_key"] = request.idempotency_key
    registry = register(ToolRegistry(max_output_chars=ctx.settings.tools.max_output_chars), memory_of(ctx),
                        query_vector, note)
    outcome = run_stage(offline_processors(registry), StageName.ACT, context, machine=request.machine,
                        step_index=request.step_index)
    return m.StageResult(request.task_id, request.token, request.stage, ok=True,
                         event_type=str(outcome.event_type), payload=outcome.payload,
                         worker={"pool": "memory", "worker": "supervisor"})


def archive_task(ctx: Context, task_id: str, snapshot: TaskSnapshot | None = None, *, last: bool = False) -> None:
    """Archive a done task's full context (idempotent): ``snapshot`` when the caller has it, else rebuilt
    from the store's checkpoints; ``last``: it is the run's last snapshot, which holds the task's input and
    result as its row does (not read back)."""
    if last and snapshot is not None:
        context, full = snapshot.context, ctx.completed.get(task_id)
        dumped = full_context(full) if full is not None else None  # its bytes as the task actor packed them
        memory_of(ctx).archive(task_id, context.input_text, context.final_result,
                               dumped or context.model_dump(mode="json"))
        return
    store = _store(ctx)
    row = store.task_row(task_id)
    if row is None:
        return
    if snapshot is None:
        snapshot = rebuild(task_id, store.checkpoints(task_id))
    memory_of(ctx).archive(task_id, str(row["input"]), row.get("result"), snapshot.context.model_dump(mode="json"))


# -- recall ---------------------------------------------------------------------------------------
def recall(ctx: Context, ask: m.AskRecall, sender: ActorAddress, query_vector: list[float] | None = None,
           note: str | None = None) -> None:
    """Answer ``ask``: full text, fused with ``query_vector`` when there is one (``actors.supervisor.vectors``
    asks it first); ``note``: why there is none.  A task actor answers its runs' other recalls itself
    (``pegasus.memory.recall.LocalRecall``), and asks here only when it cannot read the store."""
    identity, error = "", note
    items: tuple[dict[str, Any], ...] = ()
    try:
        identity = _current_identity(ctx)
        items = recalled_items(memory_of(ctx), ask.query, ask.k, query_vector)
    except Exception as exc:  # noqa: BLE001 - recorded in the task's context, logged here
        error = f"{type(exc).__name__}: {exc}"
        ctx.log.warning("recall_failed", task_id=ask.task_id, error=error)
    ctx.send(sender, m.Recalled(ask.task_id, ask.token, identity, items, error))


def _current_identity(ctx: Context) -> str:
    """The identity text (pegasus.memory.recall.CurrentIdentity: read again only when identity.md changed)."""
    assert ctx.settings is not None
    return ctx.identity.text(ctx.settings)  # each StartTask with recall off asks: the state dir resolved once


def identity(ctx: Context) -> str:
    """The identity text ('' when it cannot be read: a run never fails for it)."""
    try:
        return _current_identity(ctx)
    except Exception as exc:  # noqa: BLE001 - an unreadable identity.md: logged, the task runs without
        ctx.log.warning("identity_unreadable", error=f"{type(exc).__name__}: {exc}")
        return ""


# -- the post-task reflector -----------------------------------------------------------------------
def _post(ctx: Context) -> PostReflections:
    if ctx.post is None:
        assert ctx.settings is not None
        ctx.post = PostReflections(limit=max(1, ctx.settings.pools.llm_workers))
    return ctx.post


def after_notice(ctx: Context, notice: TransitionNotice) -> None:
    """Every transition the supervisor carries out: a task just done is archived and reflected."""
    if notice.machine == MachineName.LIFECYCLE and notice.to_state == LifecycleState.DONE:
        try:
            _task_done(ctx, notice.task_id)
        except StoreUnavailable:
            raise  # the supervisor stops every run and restores: the reflection is pending then
        except Exception:  # noqa: BLE001 - the task is done whatever its reflection does
            ctx.log.exception("reflection_not_started", task_id=notice.task_id)


def _task_done(ctx: Context, task_id: str) -> None:
    settings, store = ctx.settings, _store(ctx)
    assert settings is not None
    last = ctx.stopped.get(task_id)  # the run that just ended: its snapshot is the last checkpoint's
    try:
        snapshot = last if last is not None else rebuild(task_id, store.checkpoints(task_id))
    except Exception as exc:  # noqa: BLE001 - quarantined: nothing to archive or reflect on, the task is done
        reflections.finished(store, task_id, reflections.FAILED, error=reason(exc))
        return
    try:
        archive_task(ctx, task_id, snapshot, last=last is not None)
    except MemoryStoreError as exc:  # the archive is a copy: the task is done all the same
        ctx.log.warning("archive_failed", task_id=task_id, error=str(exc))
    if not settings.memory.reflector:
        reflections.finished(store, task_id, reflections.SKIPPED, error="[memory] reflector is off")
        return
    holder = ctx.reflecting.get(task_id)
    if holder is not None:  # its task actor handed the reflection out: counted here, with done
        _carry_out(ctx, _post(ctx).step(post_reflections.HeldBy(task_id, holder, reflections.started(store, task_id))))
        return
    _carry_out(ctx, _post(ctx).step(post_reflections.Want(task_id)), snapshot)


def reflections_restored(ctx: Context) -> None:
    """After a (re)start: the done tasks whose reflection never committed go again."""
    if ctx.store is None or ctx.settings is None or not ctx.settings.memory.reflector:
        return
    for task_id, _ in reflections.pending(ctx.store):
        _carry_out(ctx, _post(ctx).step(post_reflections.Want(task_id)))


def _carry_out(ctx: Context, commands: list[post_reflections.ReflectionCommand],
               known: TaskSnapshot | None = None) -> None:
    """The reflections' commands: hand-outs counted in the store, then sent to the llm pool; answers kept or failed."""
    post = _post(ctx)
    while commands:
        command = commands.pop(0)
        if isinstance(command, Log):
            logs.emit(ctx.log, command.level, command.event, **command.fields)
        elif isinstance(command, Count):
            counted = reflections.started(_store(ctx), command.task_id)
            commands[:0] = post.step(post_reflections.HandedOut(command.task_id, counted))
        elif isinstance(command, Dispatch):
            task_id = command.task_id
            try:
                snapshot = known if known is not None and known.task_id == task_id else \
                    rebuild(task_id, _store(ctx).checkpoints(task_id))
            except Exception as exc:  # noqa: BLE001 - quarantined: this reflection fails, the others go
                _reflection_failed(ctx, task_id, reason(exc))
                commands[:0] = post.step(post_reflections.Dropped(task_id))
                continue
            ctx.to_pool(PoolName.LLM, m.StageRequest(task_id, command.token, StageName.POST_REFLECT,
                                                     snapshot.machine, snapshot.context))
        elif isinstance(command, GiveUp):
            _reflection_failed(ctx, command.task_id, command.error)
        elif isinstance(command, Keep):
            _keep(ctx, command.task_id, command.reflection)
        elif isinstance(command, TakenBack):
            ctx.log.warning("reflections_taken_back", task_ids=list(command.task_ids))


def on_post_reflection(ctx: Context, result: m.StageResult) -> None:
    """The answer to a reflection the supervisor handed out."""
    _carry_out(ctx, _post(ctx).step(post_reflections.Answered(result.task_id, result.token, result.ok, result.payload,
                                                              result.error, result.error_kind)))


def reflected(ctx: Context, report: m.Reflected, sender: ActorAddress) -> None:
    """The answer to a reflection a task actor handed out, in its reports: written in their commit."""
    ctx.task_actors.reflected(sender, report.task_id)
    _carry_out(ctx, _post(ctx).step(post_reflections.AnsweredBy(report.task_id, sender, report.ok, report.payload,
                                                                report.error, report.error_kind)))


def task_actor_gone(ctx: Context, address: ActorAddress) -> None:
    """A task actor exited: the reflections it held are handed out from here (each counted again)."""
    if ctx.post is None or not ctx.post.held:
        return
    _carry_out(ctx, ctx.post.step(post_reflections.HolderLost(address)))


def _keep(ctx: Context, task_id: str, reflection: PostTaskReflection) -> None:
    """The reflection, its facts and its episode, and the done-marker: one transaction."""
    store = _store(ctx)
    data = reflection.model_dump(mode="json")
    try:
        written = reflections.finished(store, task_id, reflections.COMPLETE, reflection=data,
                                       write=lambda: _remember(ctx, task_id, reflection))
    except MemoryStoreError as exc:  # a cap, a bad path: nothing of it written, the failure recorded
        _reflection_failed(ctx, task_id, f"the reflection's memories were refused: {exc}", data)
        return
    ctx.log.debug("reflection_complete", task_id=task_id, memories=written)  # the audit row says it (history)


def _remember(ctx: Context, task_id: str, reflection: PostTaskReflection) -> list[str]:
    memory = memory_of(ctx)
    ids = [memory.write_fact(fact.path, fact.content, task_id=task_id).id for fact in reflection.facts]
    if reflection.episode is not None:
        episode = reflection.episode
        ids.append(memory.add_episode(task_id, episode.title, episode.summary, episode.details,
                                      episode.lesson).id)
    return ids


def _reflection_failed(ctx: Context, task_id: str, error: str, data: dict[str, Any] | None = None) -> None:
    ctx.log.warning("reflection_failed", task_id=task_id, error=error)
    reflections.finished(_store(ctx), task_id, reflections.FAILED, reflection=data, error=error)
