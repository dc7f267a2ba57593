"""The supervisor's side of its tasks' runs: reports of task actors (with the answers to the post-task
reflections they handed out), workers' effectful steps, verification gates and the supervisor's own
post-task reflections answered by the pools, runs a task actor let go, starts and answers that could not be
sent."""

from __future__ import annotations

from thespian.actors import ActorAddress, PoisonMessage

from actors import messages as m
from actors.supervisor import memory, vectors
from actors.supervisor.commands import admit
from actors.supervisor.context import Context
from actors.supervisor.views import answer_suspends
from actors.wire.frames import refused_why
from pegasus.admission.inputs import GateAnswered, RunLost, Stopped, Transitioned
from pegasus.task import CognitiveState, LifecycleState, StageName


def task_reports(ctx: Context, batch: m.TaskReports, sender: ActorAddress) -> None:
    """A task actor's reports, of one or more tasks, each task's in order; their store writes share one commit."""
    if ctx.store is None or ctx.admission is None:
        return
    key = ctx.task_actors.report(sender, batch.cpu_s, batch.reports)  # the sender told once, not per report
    with ctx.store.group():
        try:
            _reports(ctx, batch, sender, key)
        finally:
            ctx.completed.clear()  # a run's end is never held back: its stop came in the same batch


def _reports(ctx: Context, batch: m.TaskReports, sender: ActorAddress, key: int | None) -> None:
    for report in batch.reports:
        if isinstance(report, m.Reflected):  # of a run over already: its own check
            memory.reflected(ctx, report, sender)
            continue
        if not ctx.task_actors.sent_by(report.task_id, key):
            continue  # not the actor of the task's run (one stopped when the store failed, say)
        if isinstance(report, m.TaskTransitioned):
            _transitioned(ctx, report)
        elif isinstance(report, m.TaskStopped):
            _stopped(ctx, report, sender)


def _transitioned(ctx: Context, report: m.TaskTransitioned) -> None:
    _, store, admission = ctx.configured
    record = admission.records.get(report.task_id)
    if record is None or record.run != report.run:
        return  # a run that was canceled or replaced
    record.actor_pid = report.pid
    store.cognitive_transition(report.task_id, report.run, record.machine, report.from_state, report.to_state,
                               report.event, report.stage, report.checkpoint, report.journal_finish)
    if report.to_state == CognitiveState.COMPLETED and report.checkpoint is not None and report.checkpoint[0] == "full":
        ctx.completed[report.task_id] = report.checkpoint[1]
    admit(ctx, Transitioned(report.task_id, report.run, report.from_state, report.to_state, report.event,
                            report.timestamp, report.stage))


def _stopped(ctx: Context, report: m.TaskStopped, sender: ActorAddress) -> None:
    if report.reflecting:  # its task actor is not retired before the answer is in
        ctx.task_actors.reflecting(sender, report.task_id)
        ctx.reflecting[report.task_id] = sender
    ctx.task_actors.release(report.task_id, report.run)  # before the next run is placed
    ctx.stopped[report.task_id] = report.snapshot  # a task done now is archived from it, not read back
    try:
        admit(ctx, Stopped(report.task_id, report.run, report.state, report.snapshot, report.exit_reason,
                           report.children))
    finally:
        ctx.stopped.pop(report.task_id, None)
        ctx.reflecting.pop(report.task_id, None)
    answer_suspends(ctx, report.task_id)


def text_delta(ctx: Context, delta: m.TextDelta, sender: ActorAddress) -> None:
    """Streamed text of a task's stage, from its task actor: to the task's subscribers, never stored."""
    if ctx.task_actors.address_of(delta.task_id, delta.run) == sender:
        ctx.notify(delta)


def step_starting(ctx: Context, step: m.StepStarting, sender: ActorAddress) -> None:
    """A worker is about to run an effectful step: commit its ``started`` row, then answer go.

    Refused when the task's run is over (canceled, suspended, replaced after a
    crash) or the key already has a row (it started before: never run twice).
    The commit comes before the answer, so a step never runs unjournalled.
    """
    if ctx.store is None or ctx.admission is None:
        return
    record = ctx.admission.records.get(step.task_id)
    if record is None or record.run != step.run or record.state != LifecycleState.RUNNING:
        ctx.send(sender, m.StepGo(step.key, step.job, False, reason="the task's run is over"))
        return
    try:
        existing = ctx.store.journal_start(step.key, step.task_id, step.run, step.step_index, step.tool, "effectful")
    except Exception as exc:  # noqa: BLE001 - not journalled, so not run: the task sees a failed step
        ctx.log.error("journal_write_failed", task_id=step.task_id, key=step.key, error=str(exc))
        ctx.send(sender, m.StepGo(step.key, step.job, False, reason=f"the journal could not be written: {exc}"))
        return
    if existing is not None:
        ctx.send(sender, m.StepGo(step.key, step.job, False, reason=f"already {existing['status']}",
                                  existing=existing))
    else:
        ctx.send(sender, m.StepGo(step.key, step.job, True))


def stage_result(ctx: Context, result: m.StageResult, sender: ActorAddress) -> None:
    if ctx.admission is None:
        return
    ctx.answered_by_pool(result.task_id, result.stage, result.token)  # nothing to send again to a new pool
    if result.stage == StageName.POST_REFLECT:
        memory.on_post_reflection(ctx, result)
        return
    if result.stage in (StageName.EMBED_QUERY, StageName.EMBED_ROWS):
        (vectors.query_vector if result.stage == StageName.EMBED_QUERY else vectors.row_vectors)(ctx, result)
        return
    if result.stage != StageName.GATE:
        return
    detail = {**result.payload, "error": result.error, "worker": result.worker}
    admit(ctx, GateAnswered(result.task_id, result.token, result.ok, detail))


def task_abandoned(ctx: Context, abandoned: m.TaskAbandoned, sender: ActorAddress) -> None:
    """A task actor let a run go (see the message): restarted from its checkpoint, as after a crash."""
    if ctx.admission is None or ctx.task_actors.address_of(abandoned.task_id, abandoned.run) != sender:
        return
    ctx.task_actors.release(abandoned.task_id, abandoned.run)
    ctx.log.warning("task_run_abandoned", task_id=abandoned.task_id, run=abandoned.run, reason=abandoned.reason)
    admit(ctx, RunLost(abandoned.task_id, abandoned.run, f"the task actor let the run go: {abandoned.reason}",
                      "abandoned"))
    answer_suspends(ctx, abandoned.task_id)


def unsent(ctx: Context, poison: PoisonMessage, sender: ActorAddress) -> None:
    """A message Thespian refused to send, being larger than a frame (``[system] max_frame_bytes``): a batch of
    starts goes again one by one; a start too large alone is its run lost (restarted, then failed, saying why); an
    answer too large is an error answer saying so."""
    message, reason = poison.poisonMessage, refused_why(poison)
    if reason is None:
        return
    if isinstance(message, m.Reply):  # an answer too large: the asker is told so, not left to its timeout
        ctx.send(sender, m.Reply(message.request_id, False, error=f"the answer could not be sent: {reason}",
                                 error_type="AnswerTooLarge"))
        return
    if isinstance(message, m.StartTasks):
        for start in message.starts:  # each alone (a StartTask would be coalesced again), if still its actor's
            if ctx.task_actors.address_of(start.task_id, start.run) == sender:
                ctx.send(sender, m.StartTasks((start,)))
        return
    if not isinstance(message, m.StartTask) or ctx.admission is None \
            or ctx.task_actors.address_of(message.task_id, message.run) != sender:
        return
    task_id = message.task_id
    ctx.task_actors.release(task_id, message.run)
    ctx.log.error("task_start_unsent", task_id=task_id, run=message.run, reason=reason)
    admit(ctx, RunLost(task_id, message.run, f"its start could not be sent: {reason}", "abandoned"))
    answer_suspends(ctx, task_id)
