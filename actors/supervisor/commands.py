"""Admission's commands carried out: one row per command, each a send (``COMMANDS``).

``admit`` steps Admission and hands back its commands; a ``Refused`` one is raised again here, in
the carrier, so a request is answered with its error and a report's store failure reaches the
store's health.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from actors import messages as m
from actors import telemetry
from actors.supervisor import memory
from actors.supervisor.context import Context
from pegasus.admission import (
    Command, MessageAccepted, MessageRun, Refused, RunEnded, RunGate, StartRun, StopRun, Submitted, SuspendRun,
    TransitionNotice, WakeAfter,
)
from pegasus.admission.inputs import Input
from pegasus.task import PoolName, StageName


def admit(ctx: Context, event: Input) -> list[Command]:
    """Admission's commands for ``event``, carried out; raises the error of one refused."""
    commands = stepped(ctx, event)
    carry_out(ctx, commands)
    return commands


def stepped(ctx: Context, event: Input) -> list[Command]:
    """Admission's commands for ``event``, not carried out yet; raises the error of one refused."""
    assert ctx.admission is not None
    commands = ctx.admission.step(event)
    for command in commands:
        if isinstance(command, Refused):
            raise command.error
    return commands


def carry_out(ctx: Context, commands: list[Command]) -> None:
    for command in commands:
        COMMANDS[type(command)](ctx, command)


def _notice(ctx: Context, notice: TransitionNotice) -> None:
    ctx.notify(notice)
    memory.after_notice(ctx, notice)


def _start(ctx: Context, start: StartRun) -> None:
    settings = ctx.settings
    assert settings is not None  # commands come only from a configured admission
    host = ctx.task_actors.take(start.task_id, start.run)
    ctx.pools_in_use()
    ctx.run_started[(start.task_id, start.run)] = time.time_ns()
    ctx.send(host, m.StartTask(start.snapshot, start.run, ctx.pools.address[PoolName.LLM],
                               ctx.pools.address[PoolName.TOOL], start.resume_event, start.resume_payload,
                               start.generation, start.journal, start.task_id, inbox=start.inbox,
                               identity="" if settings.memory.recall_k else memory.identity(ctx),
                               awaited=ctx.store is not None and ctx.store.is_sub_task(start.task_id)))


def _stop(ctx: Context, stop: StopRun) -> None:
    run = ctx.task_actors.policy.host_of(stop.task_id)
    host = ctx.task_actors.release(stop.task_id)
    if host is not None and run is not None:  # its run may be mid-stage: what comes back is dropped
        ctx.send(host, m.DropTask(stop.task_id, run[1]))
    for pool in ctx.pools.places():  # free the workers still busy with its stages
        ctx.send(pool, m.CancelTask(stop.task_id))
    ctx.answered_by_pool(stop.task_id, StageName.GATE)


def _ended(ctx: Context, ended: RunEnded) -> None:
    """The run's span (actors/telemetry.py), from its placing to now."""
    now = time.time_ns()
    started = ctx.run_started.pop((ended.task_id, ended.run), now)
    telemetry.run_span(ctx.settings, ended.task_id, ended.run, ended.machine, ended.metadata, started, now,
                       {"pegasus.outcome": ended.outcome, "pegasus.exit_reason": ended.exit_reason or ""},
                       ended.failed)


def _suspend(ctx: Context, suspend: SuspendRun) -> None:
    host = ctx.task_actors.address_of(suspend.task_id)
    if host is not None:
        ctx.send(host, m.SuspendTask(suspend.task_id, suspend.reason))


def _message(ctx: Context, message: MessageRun) -> None:
    host = ctx.task_actors.address_of(message.task_id)
    if host is not None:  # else being placed: its StartRun carries them
        ctx.send(host, m.MessageTask(message.task_id, message.run, message.inbox))


def _gate(ctx: Context, gate: RunGate) -> None:
    ctx.to_pool(PoolName.TOOL, m.StageRequest(gate.task_id, gate.token, StageName.GATE, gate=gate.gate,
                                              timeout_s=gate.gate.timeout_s))


def _wake(ctx: Context, wake: WakeAfter) -> None:
    ctx.wake(wake.seconds, m.RetryDue(wake.task_id))


def _answer(ctx: Context, command: Any) -> None:
    """Submitted, MessageAccepted: the request's row reads them from what ``admit`` returned."""


COMMANDS: dict[type, Callable[[Context, Any], None]] = {
    TransitionNotice: _notice, StartRun: _start, StopRun: _stop, RunEnded: _ended, SuspendRun: _suspend, MessageRun: _message,
    RunGate: _gate, WakeAfter: _wake, Submitted: _answer, MessageAccepted: _answer,
}
