"""The supervisor's schedules: client requests (add, list, pause, resume, trigger, remove) and its timer.

A mixin of ``actors.supervisor.Supervisor``.  At every wakeup it reads the schedules from the store,
asks ``pegasus.triggers.schedules.step`` what is due, submits a task per fire -- keyed by its slot
(``slot_key``, idempotency scope ``schedule``), so a slot fired before a crash answers its task
again instead of firing twice -- and saves each schedule's new cursor in the same commit.  One
timer is armed for the earliest next time; a wakeup for another time than the one armed last is
stale and changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from actors import messages as m
from actors.request_handler import request_handler
from pegasus.errors import PegasusError
from pegasus.idempotency import SCHEDULE
from pegasus.triggers.schedules import (
    Fire, Overlap, ScheduleError, ScheduleSpec, ScheduleState, ScheduleNotFound, make_spec, next_slot, resume, slot_key,
    slot_time, step, timer_delay, trigger,
)
from pegasus.store import StoreError, StoreUnavailable
from pegasus.store import triggers
from pegasus.store.triggers import ScheduleRow
from pegasus.store.health import PROBE_S
from pegasus.submission import check_task
from pegasus.task.events import EventType, new_id
from pegasus.task.names import LifecycleState

SOURCE = EventType.SCHEDULE_FIRED.value  # a fired task's source
FINISHED = frozenset({LifecycleState.DONE, LifecycleState.FAILED, LifecycleState.CANCELED})
LATE_S = 0.002  # a timer fires this much after the slot: never just before it


class Schedules:
    """Handlers of the supervisor for schedules (see the module docstring)."""

    admission: Any
    store: Any
    store_health: Any
    settings: Any
    log: Any
    send: Callable[[Any, Any], None]
    wakeupAfter: Callable[..., None]  # noqa: N815 - Thespian's name
    _carry_out: Callable[[list[Any]], None]
    _store_failed: Callable[[StoreUnavailable], None]
    _view: Callable[[str], dict[str, Any]]

    _schedule_wake: float | None = None  # the time the last armed timer is for
    _schedules_quarantined: dict[str, str] | None = None  # name -> error, as the store said last (stats)

    # -- requests ---------------------------------------------------------------------------------
    @request_handler
    def receiveMsg_ScheduleAdd(self, request: m.ScheduleAdd, sender: Any) -> Any:
        """Checked whole (bounds, a next slot within the horizon, the task it fires) before the one write."""
        now = time.time()
        spec = make_spec(request.name, request.text, cron=request.cron, every=request.every, tz=request.tz,
                         machine=request.machine, priority=request.priority, overlap=request.overlap,
                         catchup=request.catchup, now=now)
        check_task(spec.text, {}, spec.machine, self.settings.runtime)  # too long a text fails now, not at 3 a.m.
        schedule_id, state = new_id(), ScheduleState(cursor=now)
        _view(ScheduleRow(schedule_id, spec.name, spec, state, ""), now)  # answerable before anything is written
        triggers.add_schedule(self.store, schedule_id, spec, state)
        self.log.info("schedule_added", name=spec.name, cron=spec.cron, every_s=spec.every_s, tz=spec.tz)
        self._tick_schedules()
        return self._schedule_view(spec.name, now)

    @request_handler
    def receiveMsg_ScheduleList(self, request: m.ScheduleList, sender: Any) -> Any:
        now = time.time()
        return [_view(row, now) for row in self._schedule_rows()]

    @request_handler
    def receiveMsg_ScheduleControl(self, request: m.ScheduleControl, sender: Any) -> Any:
        row = self._schedule(request.name)
        now = time.time()
        if request.action == "remove":
            triggers.remove_schedule(self.store, row.name)
            self.log.info("schedule_removed", name=row.name)
            self._schedule_rows()  # a quarantined one removed leaves stats
            return {"name": row.name, "removed": True}
        if row.quarantined is not None or row.spec is None or row.state is None:
            raise ScheduleError(f"schedule {row.name!r} is quarantined ({row.quarantined}): remove it and add it "
                                "again")
        schedule_id, spec, state = row.schedule_id, row.spec, row.state
        task = None
        if request.action == "pause":
            triggers.save_schedule(self.store, spec.name, replace(state, paused=True, buffered=None))
        elif request.action == "resume":
            triggers.save_schedule(self.store, spec.name, resume(state, now))
            self._tick_schedules()
        else:  # trigger: a task now, whatever the overlap policy (cancel_other still cancels)
            with self.store.group():
                fire = trigger(spec, state, now, self._schedule_running(state))
                state = self._fire(schedule_id, spec, replace(state, fired=state.fired + 1), fire, manual=True)
                triggers.save_schedule(self.store, spec.name, state)
            task = self._view(state.last_task) if state.last_task else None
        self.log.info(f"schedule_{request.action}", name=spec.name)
        return {**self._schedule_view(spec.name, now), **({"task": task} if task is not None else {})}

    # -- the timer --------------------------------------------------------------------------------
    def _schedule_due(self, due: m.ScheduleDue) -> None:
        """The wakeup of the timer armed last (an earlier-armed one that was replaced changes nothing)."""
        if due.at != self._schedule_wake:
            return
        self._schedule_wake = None
        self._tick_schedules()

    def _tick_schedules(self) -> None:
        """Fire every schedule's due slots, save their states, arm the timer for the earliest next time."""
        if self.store is None or self.admission is None:
            return
        now = time.time()
        if not self.store_health.writable:  # nothing can be written: look again later
            self._arm_schedules(now + PROBE_S, now)
            return
        try:
            wake_at = self._fire_due(now)
        except StoreUnavailable as exc:
            self._store_failed(exc)
            wake_at = now + PROBE_S
        except Exception:  # noqa: BLE001 - the table itself unreadable: the supervisor serves on, looks again
            self.log.exception("schedules_failed")
            wake_at = now + PROBE_S
        self._arm_schedules(wake_at, now)

    def _fire_due(self, now: float) -> float | None:
        wake_at: float | None = None
        with self.store.group():
            for row in self._schedule_rows():
                if row.quarantined is not None or row.spec is None or row.state is None:
                    continue
                spec, state = row.spec, row.state
                try:
                    result = step(spec, state, now, self._schedule_running(state))
                    if result.quarantine is not None:
                        self._quarantine(row.name, result.quarantine)
                        continue
                    new = result.state
                    for fire in result.fires:
                        new = self._fire(row.schedule_id, spec, new, fire, manual=False)
                    if new != state:
                        triggers.save_schedule(self.store, spec.name, new)
                except StoreError:  # the store's trouble, not the schedule's: the whole tick is looked at again
                    raise
                except Exception as exc:  # noqa: BLE001 - one broken schedule must not stop the others
                    self.log.exception("schedule_failed", name=spec.name)
                    self._quarantine(row.name, f"{type(exc).__name__}: {exc}")
                    continue
                if result.state.skipped > state.skipped:
                    self.log.warning("schedule_slots_skipped", name=spec.name,
                                     skipped=result.state.skipped - state.skipped, overlap=spec.overlap.value)
                if result.wake_at is not None:
                    wake_at = result.wake_at if wake_at is None else min(wake_at, result.wake_at)
        return wake_at

    def _arm_schedules(self, wake_at: float | None, now: float) -> None:
        if wake_at is None:
            return
        armed = self._schedule_wake
        if armed is not None and now < armed <= wake_at:
            return  # an earlier timer is still pending
        self._schedule_wake = wake_at
        self.wakeupAfter(timedelta(seconds=timer_delay(wake_at, now) + LATE_S), payload=m.ScheduleDue(wake_at))

    # -- firing -----------------------------------------------------------------------------------
    def _fire(self, schedule_id: str, spec: ScheduleSpec, state: ScheduleState, fire: Fire, *,
              manual: bool) -> ScheduleState:
        """Submit the fire's task (its slot is its key); the state with it as the last task.  A slot that
        cannot be submitted (the queue full, say) is skipped and counted; the schedule goes on."""
        if fire.cancel is not None:
            try:
                self._carry_out(self.admission.cancel(fire.cancel, f"schedule {spec.name}: a newer slot fired "
                                                                   "(overlap cancel_other)"))
            except PegasusError:
                pass  # over by now
        metadata = {"schedule": spec.name, "scheduled_time": slot_time(fire.slot),
                    "trigger": "manual" if manual else "schedule"}
        try:
            machine, _ = check_task(spec.text, metadata, spec.machine, self.settings.runtime)
            record, effects = self.admission.submit(spec.text, machine, spec.priority, metadata, SOURCE,
                                                    slot_key(schedule_id, fire.slot, manual), scope=SCHEDULE)
        except (PegasusError, ValueError) as exc:
            if manual:
                raise
            self.log.warning("schedule_slot_not_fired", name=spec.name, slot=slot_time(fire.slot), error=str(exc))
            return replace(state, fired=state.fired - 1, skipped=state.skipped + 1)
        self._carry_out(effects)
        self.log.info("schedule_fired" if effects else "schedule_fired_before", name=spec.name,
                      slot=slot_time(fire.slot), task_id=record.task_id)
        return replace(state, last_task=record.task_id)

    def _schedule_running(self, state: ScheduleState) -> bool:
        """Whether the schedule's last task is unfinished (a blocked one waits for a person: unfinished)."""
        record = self.admission.records.get(state.last_task) if state.last_task else None
        return record is not None and record.state not in FINISHED

    def _schedule(self, name: str) -> ScheduleRow:
        for row in self._schedule_rows():
            if row.name == name:
                return row
        raise ScheduleNotFound(name)

    def _schedule_view(self, name: str, now: float) -> dict[str, Any]:
        return _view(self._schedule(name), now)

    # -- quarantine -------------------------------------------------------------------------------
    def _schedule_rows(self) -> list[ScheduleRow]:
        """Every stored schedule; one that cannot be read is quarantined in the store (once), the others are not
        held up by it.  What is quarantined is remembered for stats."""
        rows = triggers.schedules(self.store)
        for row in rows:
            if not row.marked and row.quarantined is not None:
                try:
                    self._quarantine(row.name, row.quarantined)
                except StoreUnavailable:
                    pass  # marked at a later read; set aside all the same
        self._schedules_quarantined = {row.name: row.quarantined for row in rows if row.quarantined is not None}
        return rows

    def _quarantine(self, name: str, error: str) -> None:
        """Set a schedule aside with its error, in the store (not retried at each start) and in stats."""
        self.log.error("schedule_quarantined", name=name, error=error)
        triggers.quarantine_schedule(self.store, name, error)
        self._schedules_quarantined = {**(self._schedules_quarantined or {}), name: error}

    def quarantined_view(self) -> dict[str, list[dict[str, str]]]:
        """What ``stats`` says is quarantined: the schedules set aside (until removed), the tasks this start
        could not restore or restart (failed since, their error saying so), the messages set aside (kept)."""
        tasks = getattr(self.admission, "quarantined", {}) if self.admission is not None else {}
        return {"schedules": [{"name": name, "error": error}
                              for name, error in sorted((self._schedules_quarantined or {}).items())],
                "tasks": [{"name": task_id, "error": error} for task_id, error in sorted(tasks.items())],
                "messages": self._messages_quarantined()}

    def _messages_quarantined(self) -> list[dict[str, str]]:
        """Messages set aside in the store (kept, never given to a run), named ``task#number``."""
        try:
            rows = self.store.quarantined_messages() if self.store is not None else []
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
