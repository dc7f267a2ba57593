"""Schedules: what fires now and when to wake next, given the schedules, their cursors and the clock.

Pure: no store, no actors, no clock of its own (``now`` is epoch seconds, passed in).  The
supervisor reads every schedule from the store at each wakeup, calls ``step`` and carries
out its ``Fire``s (a task each, keyed by its slot: ``slot_key``), writing the new state in
the same commit.  Temporal's schedule policies are the reference: an overlap policy, a
catch-up window after downtime, pause and trigger-now.

A schedule's *slots* are its nominal times: a cron expression's matches in its time zone
(cronsim: a wall-clock time skipped by a DST change fires once at the first time after
the gap, one repeated by a change fires once), or every ``every_s`` seconds counted from
the Unix epoch (so slots do not drift across restarts).  A schedule's ``cursor`` is the
time up to which its slots are settled (fired, skipped or buffered): slots in
``(cursor, now]`` are due.  Missed slots older than ``catchup_s`` are skipped and counted.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from pegasus.errors import PegasusError

DEFAULT_CATCHUP_S = 300.0  # missed slots up to 5 minutes old fire after downtime; older are skipped
MIN_EVERY_S = 1.0
MAX_CATCHUP_FIRES = 100  # allow_all: at most this many missed slots fire at once (the latest ones)
MAX_COUNTED = 100_000  # skipped cron slots counted one by one up to this many, then estimated no further
BUFFER_POLL_S = 1.0  # a buffered start checks this often whether the running task has finished
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ScheduleError(PegasusError, ValueError):
    """A schedule that cannot be made (bad cron, zone, duration, name or policy); the message names it."""


class ScheduleNotFound(PegasusError):
    """No schedule of that name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no schedule named {name!r}")


class Overlap(StrEnum):
    """What a slot does while the schedule's previous task still runs (Temporal's overlap policies)."""

    SKIP = "skip"  # not started; counted as skipped
    BUFFER_ONE = "buffer_one"  # started once the running one ends; at most one waits, the rest are skipped
    ALLOW_ALL = "allow_all"  # started anyway
    CANCEL_OTHER = "cancel_other"  # the running one is canceled, this one started


def check_name(name: str, what: str = "schedule") -> str:
    """A schedule's or a webhook's name (it appears in paths and URLs); ValueError naming what is allowed."""
    if not NAME.match(name):
        raise ValueError(f"{what} name {name!r}: letters, digits, '_', '.', '-', at most 64, not starting with "
                         "a punctuation mark")
    return name


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(text: str) -> float:
    """Seconds of a duration such as ``90s``, ``5m``, ``1h30m``, ``2d`` or a plain number of seconds."""
    cleaned = text.strip().lower()
    try:
        return float(cleaned)
    except ValueError:
        pass
    parts = _DURATION.findall(cleaned)
    if not cleaned or "".join(number + unit for number, unit in parts) != cleaned:
        raise ScheduleError(f"duration {text!r}: write it as 90s, 5m, 1h30m, 2d or a number of seconds")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


@dataclass(frozen=True)
class ScheduleSpec:
    """What a schedule is: when its slots are and the task each fires (checked by ``make_spec``)."""

    name: str
    text: str
    cron: str | None = None
    every_s: float | None = None
    tz: str = "UTC"
    machine: str | None = None
    priority: int = 5
    overlap: Overlap = Overlap.SKIP
    catchup_s: float = DEFAULT_CATCHUP_S

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def slots(self, after: float) -> Iterator[float]:
        """The slots strictly after ``after`` (epoch seconds), in order, for ever."""
        if self.every_s is not None:
            every = self.every_s
            k = int(after // every) + 1
            while True:
                yield k * every
                k += 1
        assert self.cron is not None
        start = datetime.fromtimestamp(after, self.zone())
        if start.timestamp() > after:  # rounded up to a microsecond, maybe onto a slot: start just before it
            start -= timedelta(microseconds=1)
        for moment in CronSim(self.cron, start):
            if moment.timestamp() > after:
                yield moment.timestamp()

    def next_slot(self, after: float) -> float:
        return next(self.slots(after))


def make_spec(name: str, text: str, *, cron: str | None = None, every: str | float | None = None, tz: str = "UTC",
              machine: str | None = None, priority: int = 5, overlap: str = Overlap.SKIP,
              catchup: str | float | None = None) -> ScheduleSpec:
    """A checked ScheduleSpec; ScheduleError naming what is wrong."""
    try:
        check_name(name)
    except ValueError as exc:
        raise ScheduleError(str(exc)) from None
    if not text.strip():
        raise ScheduleError("a schedule needs the text of the task it fires")
    if (cron is None) == (every is None):
        raise ScheduleError("give exactly one of cron and every")
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {tz!r} (an IANA name such as Europe/Paris or UTC)") from None
    every_s = None
    if every is not None:
        every_s = every if isinstance(every, float | int) else parse_duration(every)
        if every_s < MIN_EVERY_S:
            raise ScheduleError(f"every {every!r} is under the minimum of {MIN_EVERY_S:g}s")
        every_s = float(every_s)
    if cron is not None:
        try:
            CronSim(cron, datetime(2000, 1, 1, tzinfo=zone))  # parsed and checked; the date does not matter
        except CronSimError as exc:
            raise ScheduleError(f"cron expression {cron!r}: {exc}") from None
    try:
        policy = Overlap(overlap)
    except ValueError:
        raise ScheduleError(f"overlap {overlap!r}: one of {', '.join(Overlap)}") from None
    catchup_s = DEFAULT_CATCHUP_S if catchup is None else (
        float(catchup) if isinstance(catchup, float | int) else parse_duration(catchup))
    if catchup_s < 0:
        raise ScheduleError("the catch-up window cannot be negative")
    if not 0 <= priority <= 1_000_000:
        raise ScheduleError(f"priority {priority} is outside 0..1000000")
    return ScheduleSpec(name, text, cron, every_s, tz, machine, priority, policy, catchup_s)


@dataclass(frozen=True)
class ScheduleState:
    """Where a schedule is: its cursor, a buffered slot, what it fired and skipped, its last task."""

    cursor: float
    paused: bool = False
    buffered: float | None = None
    fired: int = 0
    skipped: int = 0
    last_task: str | None = None


@dataclass(frozen=True)
class Fire:
    """Start the schedule's task for ``slot``; ``cancel``: the running task to cancel first."""

    name: str
    slot: float
    cancel: str | None = None


@dataclass(frozen=True)
class Step:
    fires: list[Fire]
    state: ScheduleState
    wake_at: float | None  # None: nothing to wake for (paused)


def step(spec: ScheduleSpec, state: ScheduleState, now: float, running: bool) -> Step:
    """The slots of ``spec`` due at ``now`` turned into fires and skips by its overlap policy.

    ``running``: whether the task the schedule fired last is still unfinished.
    """
    if state.paused:
        return Step([], state, None)
    fires: list[Fire] = []
    skipped = 0
    buffered = state.buffered
    if buffered is not None and not running:  # the buffered start's turn
        fires.append(Fire(spec.name, buffered))
        buffered, running = None, True
    due, missed = _due(spec, state.cursor, now)
    skipped += missed
    if due:
        if spec.overlap == Overlap.ALLOW_ALL:
            kept = due[-MAX_CATCHUP_FIRES:]
            skipped += len(due) - len(kept)
            fires += [Fire(spec.name, slot) for slot in kept]
        elif spec.overlap == Overlap.CANCEL_OTHER:  # only the latest would survive the cancellations anyway
            skipped += len(due) - 1 + len(fires)
            fires = [Fire(spec.name, due[-1], cancel=state.last_task if running else None)]
        elif spec.overlap == Overlap.SKIP:
            if running:
                skipped += len(due)
            else:
                fires.append(Fire(spec.name, due[0]))
                skipped += len(due) - 1
        else:  # BUFFER_ONE
            rest = due
            if not running:
                fires.append(Fire(spec.name, rest[0]))
                rest = rest[1:]
            if rest and buffered is None:
                buffered, rest = rest[0], rest[1:]
            skipped += len(rest)
    new = replace(state, cursor=max(state.cursor, now), buffered=buffered, fired=state.fired + len(fires),
                  skipped=state.skipped + skipped)
    wake_at = spec.next_slot(max(state.cursor, now))
    if buffered is not None:
        wake_at = min(wake_at, now + BUFFER_POLL_S)
    return Step(fires, new, wake_at)


def _due(spec: ScheduleSpec, cursor: float, now: float) -> tuple[list[float], int]:
    """The slots in ``(cursor, now]`` inside the catch-up window (the latest ``MAX_CATCHUP_FIRES``), and how
    many older ones were missed."""
    if now <= cursor:
        return [], 0
    window_start = max(cursor, now - spec.catchup_s)  # a slot on it is inside the window
    if spec.every_s is not None:  # arithmetic: a year of one-second slots costs nothing
        every = spec.every_s
        first, last = int(cursor // every) + 1, int(now // every)
        if last < first:
            return [], 0
        kept_from = max(first, math.ceil(window_start / every), last - MAX_CATCHUP_FIRES + 1)
        return [k * every for k in range(kept_from, last + 1)], kept_from - first
    due: deque[float] = deque(maxlen=MAX_CATCHUP_FIRES)
    missed = 0
    for slot in spec.slots(cursor):
        if slot > now:
            break
        if slot < window_start:
            missed += 1
            if missed >= MAX_COUNTED:  # counted no further: on to the window
                return _due(replace(spec, catchup_s=now - window_start), window_start - 1e-6, now)[0], missed
            continue
        if len(due) == due.maxlen:
            missed += 1
        due.append(slot)
    return list(due), missed


def trigger(spec: ScheduleSpec, state: ScheduleState, now: float, running: bool) -> Fire:
    """``trigger``: a task now whatever the overlap (as Temporal's trigger-immediately with allow-all);
    cancel_other still cancels the running one."""
    cancel = state.last_task if running and spec.overlap == Overlap.CANCEL_OTHER else None
    return Fire(spec.name, now, cancel=cancel)


def resume(state: ScheduleState, now: float) -> ScheduleState:
    """Unpaused: the slots that passed while it was paused are not fired (nor counted as missed)."""
    return replace(state, paused=False, cursor=max(state.cursor, now), buffered=None)


def slot_time(slot: float) -> str:
    """A slot as an ISO 8601 UTC time (what a fired task's metadata and key carry)."""
    return datetime.fromtimestamp(slot, timezone.utc).isoformat()


def slot_key(schedule_id: str, slot: float, manual: bool = False) -> str:
    """The idempotency key of a slot's task: a slot fires at most once, also across crashes."""
    return f"{schedule_id}@{'trigger:' if manual else ''}{slot_time(slot)}"
