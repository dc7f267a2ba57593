"""The supervisor's schedules: requests (add, list, pause, resume, trigger, remove) and the timer's looks.

When to look is ``pegasus.schedule_timer``'s (pure, the clock passed in); a look reads the schedules
from the store, asks ``pegasus.triggers.schedules.step`` what is due, submits a task per fire -- keyed by its
slot (``slot_key``, idempotency scope ``schedule``), so a slot fired before a crash answers its task
again instead of firing twice -- and saves each schedule's new cursor in the same commit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any


from actors import messages as m
from actors.supervisor.commands import admit, carry_out, stepped
from actors.supervisor.context import Context, Rows
from actors.supervisor.store import store_failed
from actors.supervisor.views import task_view
from pegasus import schedule_timer as timer
from pegasus.admission import Submitted
from pegasus.admission import inputs as i
from pegasus.errors import PegasusError
from pegasus.idempotency import SCHEDULE
from pegasus.triggers.schedules import (
    Fire, Overlap, ScheduleError, ScheduleSpec, ScheduleState, ScheduleNotFound, make_spec, next_slot, resume, slot_key,
    slot_time, step, trigger,
)
from pegasus.store import StoreError, StoreUnavailable
from pegasus.store import triggers
from pegasus.store.triggers import ScheduleRow
from pegasus.submission import check_task
from pegasus.task.events import EventType, new_id
from pegasus.task.names import LifecycleState

SOURCE = EventType.SCHEDULE_FIRED.value  # a fired task's source
FINISHED = frozenset({LifecycleState.DONE, LifecycleState.FAILED, LifecycleState.CANCELED})


# -- requests -------------------------------------------------------------------------------------
def schedule_add(ctx: Context, request: m.ScheduleAdd) -> Any:
    """Checked whole (bounds, a next slot within the horizon, the task it fires) before the one write."""
    settings, store, _ = ctx.configured
    now = time.time()
    spec = make_spec(request.name, request.text, cron=request.cron, every=request.every, tz=request.tz,
                     machine=request.machine, priority=request.priority, overlap=request.overlap,
                     catchup=request.catchup, now=now)
    check_task(spec.text, {}, spec.machine, settings.runtime)  # too long a text fails now, not at 3 a.m.
    schedule_id, state = new_id(), ScheduleState(cursor=now)
    _view(ScheduleRow(schedule_id, spec.name, spec, state, ""), now)  # answerable before anything is written
    triggers.add_schedule(store, schedule_id, spec, state)
    ctx.log.info("schedule_added", name=spec.name, cron=spec.cron, every_s=spec.every_s, tz=spec.tz)
    changed(ctx)
    return _view(_schedule(ctx, spec.name), now)


def schedule_list(ctx: Context, request: m.ScheduleList) -> Any:
    now = time.time()
    return [_view(row, now) for row in _rows(ctx)]


def schedule_pause(ctx: Context, request: m.SchedulePause) -> Any:
    row, now = _usable(ctx, request.name), time.time()
    triggers.save_schedule(ctx.configured[1], row.name, replace(row.state, paused=True, buffered=None))
    return _controlled(ctx, "schedule_pause", row.name, now)


def schedule_resume(ctx: Context, request: m.ScheduleResume) -> Any:
    row, now = _usable(ctx, request.name), time.time()
    triggers.save_schedule(ctx.configured[1], row.name, resume(row.state, now))
    changed(ctx)
    return _controlled(ctx, "schedule_resume", row.name, now)


def schedule_trigger(ctx: Context, request: m.ScheduleTrigger) -> Any:
    """A task now, whatever the overlap policy (cancel_other still cancels)."""
    row, now = _usable(ctx, request.name), time.time()
    spec, state, store = row.spec, row.state, ctx.configured[1]
    with store.group():
        fire = trigger(spec, state, now, _running(ctx, state))
        state = _fire(ctx, row.schedule_id, spec, replace(state, fired=state.fired + 1), fire, manual=True)
        triggers.save_schedule(store, spec.name, state)
    task = task_view(ctx, state.last_task) if state.last_task else None
    return {**_controlled(ctx, "schedule_trigger", row.name, now), **({"task": task} if task is not None else {})}


def schedule_remove(ctx: Context, request: m.ScheduleRemove) -> Any:
    row = _schedule(ctx, request.name)  # a quarantined one too
    triggers.remove_schedule(ctx.configured[1], row.name)
    ctx.log.info("schedule_removed", name=row.name)
    _rows(ctx)  # a quarantined one removed leaves stats
    return {"name": row.name, "removed": True}


def _usable(ctx: Context, name: str) -> _Usable:
    row = _schedule(ctx, name)
    if row.quarantined is not None or row.spec is None or row.state is None:
        raise ScheduleError(f"schedule {row.name!r} is quarantined ({row.quarantined}): remove it and add it again")
    return _Usable(row.schedule_id, row.name, row.spec, row.state)


def _controlled(ctx: Context, event: str, name: str, now: float) -> dict[str, Any]:
    ctx.log.info(event, name=name)
    return _view(_schedule(ctx, name), now)


@dataclass(frozen=True)
class _Usable:
    """A schedule that is not quarantined: its spec and state read."""

    schedule_id: str
    name: str
    spec: ScheduleSpec
    state: ScheduleState


REQUESTS: Rows = {m.ScheduleAdd: schedule_add, m.ScheduleList: schedule_list, m.SchedulePause: schedule_pause,
                  m.ScheduleResume: schedule_resume, m.ScheduleTrigger: schedule_trigger,
                  m.ScheduleRemove: schedule_remove}


# -- the timer ------------------------------------------------------------------------------------
def changed(ctx: Context) -> None:
    """Look now (a start, a schedule added or resumed): due slots fired, the timer armed for the next."""
    if ctx.store is not None and ctx.admission is not None:
        _timer(ctx, timer.Changed(time.time(), ctx.store_health.writable))


def woken(ctx: Context, due: m.ScheduleDue) -> None:
    if ctx.store is not None and ctx.admission is not None:
        _timer(ctx, timer.Woken(due.at, time.time(), ctx.store_health.writable))


def _timer(ctx: Context, event: timer.TimerInput) -> None:
    for command in ctx.timer.step(event):
        if isinstance(command, timer.Arm):
            ctx.wake(command.delay_s, m.ScheduleDue(command.at))
        else:
            _timer(ctx, _look(ctx, command.now))


def _look(ctx: Context, now: float) -> timer.Looked | timer.LookFailed:
    try:
        return timer.Looked(now, _fire_due(ctx, now))
    except StoreUnavailable as exc:
        store_failed(ctx, exc)
    except Exception:  # noqa: BLE001 - the table itself unreadable: the supervisor serves on, looks again
        ctx.log.exception("schedules_failed")
    return timer.LookFailed(now)


def _fire_due(ctx: Context, now: float) -> float | None:
    _, store, _ = ctx.configured
    wake_at: float | None = None
    with store.group():
        for row in _rows(ctx):
            if row.quarantined is not None or row.spec is None or row.state is None:
                continue
            spec, state = row.spec, row.state
            try:
                result = step(spec, state, now, _running(ctx, state))
                if result.quarantine is not None:
                    _quarantine(ctx, row.name, result.quarantine)
                    continue
                new = result.state
                for fire in result.fires:
                    new = _fire(ctx, row.schedule_id, spec, new, fire, manual=False)
                if new != state:
                    triggers.save_schedule(store, spec.name, new)
            except StoreError:  # the store's trouble, not the schedule's: the whole look is tried again
                raise
            except Exception as exc:  # noqa: BLE001 - one broken schedule must not stop the others
                ctx.log.exception("schedule_failed", name=spec.name)
                _quarantine(ctx, row.name, f"{type(exc).__name__}: {exc}")
                continue
            if result.state.skipped > state.skipped:
                ctx.log.warning("schedule_slots_skipped", name=spec.name,
                                skipped=result.state.skipped - state.skipped, overlap=spec.overlap.value)
            if result.wake_at is not None:
                wake_at = result.wake_at if wake_at is None else min(wake_at, result.wake_at)
    return wake_at


# -- firing ---------------------------------------------------------------------------------------
def _fire(ctx: Context, schedule_id: str, spec: ScheduleSpec, state: ScheduleState, fire: Fire, *,
          manual: bool) -> ScheduleState:
    """Submit the fire's task (its slot is its key); the state with it as the last task.  A slot that
    cannot be submitted (the queue full, say) is skipped and counted; the schedule goes on."""
    settings, _, _ = ctx.configured
    if fire.cancel is not None:
        try:
            admit(ctx, i.Cancel(fire.cancel, f"schedule {spec.name}: a newer slot fired (overlap cancel_other)"))
        except PegasusError:
            pass  # over by now
    metadata = {"schedule": spec.name, "scheduled_time": slot_time(fire.slot),
                "trigger": "manual" if manual else "schedule"}
    try:
        machine, _ = check_task(spec.text, metadata, spec.machine, settings.runtime)
        commands = stepped(ctx, i.Submit(spec.text, machine, spec.priority, metadata, SOURCE,
                                         slot_key(schedule_id, fire.slot, manual), SCHEDULE))
    except (PegasusError, ValueError) as exc:
        if manual:
            raise
        ctx.log.warning("schedule_slot_not_fired", name=spec.name, slot=slot_time(fire.slot), error=str(exc))
        return replace(state, fired=state.fired - 1, skipped=state.skipped + 1)
    carry_out(ctx, commands)
    made = next(c for c in commands if isinstance(c, Submitted))
    ctx.log.info("schedule_fired_before" if made.existing else "schedule_fired", name=spec.name,
                 slot=slot_time(fire.slot), task_id=made.task_id)
    return replace(state, last_task=made.task_id)


def _running(ctx: Context, state: ScheduleState) -> bool:
    """Whether the schedule's last task is unfinished (a blocked one waits for a person: unfinished)."""
    record = ctx.configured[2].records.get(state.last_task) if state.last_task else None
    return record is not None and record.state not in FINISHED


def _schedule(ctx: Context, name: str) -> ScheduleRow:
    for row in _rows(ctx):
        if row.name == name:
            return row
    raise ScheduleNotFound(name)


# -- quarantine -----------------------------------------------------------------------------------
def _rows(ctx: Context) -> list[ScheduleRow]:
    """Every stored schedule; one that cannot be read is quarantined in the store (once), the others are not
    held up by it.  What is quarantined is remembered for stats."""
    rows = triggers.schedules(ctx.configured[1])
    for row in rows:
        if not row.marked and row.quarantined is not None:
            try:
                _quarantine(ctx, row.name, row.quarantined)
            except StoreUnavailable:
                pass  # marked at a later read; set aside all the same
    ctx.schedules_quarantined = {row.name: row.quarantined for row in rows if row.quarantined is not None}
    return rows


def _quarantine(ctx: Context, name: str, error: str) -> None:
    """Set a schedule aside with its error, in the store (not retried at each start) and in stats."""
    ctx.log.error("schedule_quarantined", name=name, error=error)
    triggers.quarantine_schedule(ctx.configured[1], name, error)
    ctx.schedules_quarantined = {**ctx.schedules_quarantined, name: error}


def quarantined_view(ctx: Context) -> dict[str, list[dict[str, str]]]:
    """What ``stats`` says is quarantined: the schedules set aside (until removed), the tasks this start
    could not restore or restart (failed since, their error saying so), the messages set aside (kept)."""
    tasks = ctx.admission.quarantined if ctx.admission is not None else {}
    return {"schedules": [{"name": name, "error": error} for name, error in sorted(ctx.schedules_quarantined.items())],
            "tasks": [{"name": task_id, "error": error} for task_id, error in sorted(tasks.items())],
            "messages": _messages_quarantined(ctx)}


def _messages_quarantined(ctx: Context) -> list[dict[str, str]]:
    """Messages set aside in the store (kept, never given to a run), named ``task#number``."""
    try:
        rows = ctx.store.quarantined_messages() if ctx.store is not None else []
    except StoreError:
        return []
    return [{"name": f"{row['task_id']}#{row['number']}", "error": row["error"]} for row in rows]


def _view(row: ScheduleRow, now: float) -> dict[str, Any]:
    """A schedule as list, add and the controls answer it; a quarantined one with its error (never raises on a
    stored value: a row that cannot be read shows its name and why)."""
    spec, state = row.spec, row.state
    view: dict[str, Any] = {"name": row.name, "id": row.schedule_id, "created_at": row.created_at,
                            "quarantined": row.quarantined}
    if spec is None or state is None:
        return {**view, "text": "", "cron": None, "every_s": None, "tz": None, "machine": None, "priority": None,
                "overlap": None, "catchup_s": None, "paused": False, "fired": 0, "skipped": 0, "last_task": None,
                "buffered": None, "next_time": None}
    upcoming = None if state.paused or row.quarantined else next_slot(spec, max(state.cursor, now))
    return {**view, "text": spec.text, "cron": spec.cron, "every_s": spec.every_s, "tz": spec.tz,
            "machine": spec.machine, "priority": spec.priority, "overlap": Overlap(spec.overlap).value,
            "catchup_s": spec.catchup_s, "paused": state.paused, "fired": state.fired, "skipped": state.skipped,
            "last_task": state.last_task, "buffered": _time(state.buffered), "next_time": _time(upcoming)}


def _time(slot: float | None) -> str | None:
    try:
        return None if slot is None else slot_time(slot)
    except (ValueError, OverflowError, OSError):
        return None
