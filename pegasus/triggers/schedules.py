"""Schedules: what fires now and when to wake next, given the schedules, their cursors and the clock.

Pure (``now`` passed in); the supervisor carries out the ``Fire``s, a task per slot key, in the
commit that writes the new state.  Temporal's policies are the reference: overlap, a catch-up
window, pause, trigger-now.  Slots are a cron expression's matches in its time zone or every
``every_s`` from the epoch; ``cursor`` is the time up to which slots are settled.  docs/schedules.md.
"""

from __future__ import annotations

import math
import re
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from types import ModuleType
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pegasus.errors import PegasusError

DEFAULT_CATCHUP_S = 300.0  # missed slots up to 5 minutes old fire after downtime; older are skipped
MIN_EVERY_S = 1.0
DAY_S = 86400.0
MAX_EVERY_S = 366 * DAY_S  # rarer than yearly is a calendar matter: a cron expression says it better
MAX_CATCHUP_S = 366 * DAY_S  # a window older than the longest interval catches nothing more
HORIZON_S = 5 * 366 * DAY_S  # a schedule's next slot must come within this (29 February: every 4 years)
MAX_TIME = datetime(9000, 1, 1, tzinfo=timezone.utc).timestamp()  # a stored time past this is corrupt
MAX_TIMER_S = 3600.0  # a timer sleeps at most this long, then looks again (a far slot never overflows it)
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
    parts = _DURATION.findall(cleaned) if len(cleaned) <= 64 else []  # a longer one is no duration anyone means
    if len(cleaned) <= 64 and re.fullmatch(r"\d+(\.\d+)?", cleaned):
        seconds = float(cleaned)
    elif parts and "".join(number + unit for number, unit in parts) == cleaned:
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    else:
        raise ScheduleError(f"duration {text!r}: write it as 90s, 5m, 1h30m, 2d or a number of seconds")
    if not math.isfinite(seconds):
        raise ScheduleError(f"duration {text!r} is not a finite number of seconds")
    return seconds


def _seconds(field: str, value: str | float, low: float, high: float) -> float:
    """``value`` (a duration or seconds) checked finite and in ``[low, high]``; ScheduleError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, str | float | int):
        raise ScheduleError(f"{field}: a duration such as 90s, 5m, 2d or a number of seconds, not {value!r}")
    try:
        seconds = float(value) if isinstance(value, float | int) else parse_duration(value)
    except (ScheduleError, OverflowError) as exc:
        raise ScheduleError(f"{field}: {exc}") from None
    if not math.isfinite(seconds) or not low <= seconds <= high:
        raise ScheduleError(f"{field} {value!r} is outside {_duration_text(low)}..{_duration_text(high)}")
    return seconds


def _duration_text(seconds: float) -> str:
    return f"{seconds / DAY_S:g}d" if seconds >= DAY_S else f"{seconds:g}s"


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
            k = first_after(after, every)
            while True:
                yield k * every
                k += 1
        assert self.cron is not None
        start = datetime.fromtimestamp(after, self.zone())
        if start.timestamp() > after:  # rounded up to a microsecond, maybe onto a slot: start just before it
            start -= timedelta(microseconds=1)
        for moment in cron_library().CronSim(self.cron, start):
            if moment.timestamp() > after:
                yield moment.timestamp()

    def next_slot(self, after: float) -> float:
        return next(self.slots(after))


def make_spec(name: str, text: str, *, cron: str | None = None, every: str | float | None = None, tz: str = "UTC",
              machine: str | None = None, priority: int = 5, overlap: str = Overlap.SKIP,
              catchup: str | float | None = None, now: float | None = None) -> ScheduleSpec:
    """A checked ScheduleSpec; ScheduleError naming the field that is wrong.  With ``now``, its next slot must
    also come within ``HORIZON_S`` of it (a cron expression that fires in 2044, or never, is refused)."""
    try:
        check_name(name if isinstance(name, str) else repr(name))
    except ValueError as exc:
        raise ScheduleError(str(exc)) from None
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError("text: a schedule needs the text of the task it fires")
    if (cron is None) == (every is None):
        raise ScheduleError("cron, every: give exactly one of them")
    zone_of(tz)
    every_s = None if every is None else _seconds("every", every, MIN_EVERY_S, MAX_EVERY_S)
    if cron is not None:
        if not isinstance(cron, str) or len(cron) > 256:
            raise ScheduleError(f"cron: a cron expression of at most 256 characters, not {str(cron)[:80]!r}")
        cronsim = cron_library()
        try:
            cronsim.CronSim(cron, datetime(2000, 1, 1, tzinfo=zone_of(tz)))  # parsed and checked; the date does not matter
        except cronsim.CronSimError as exc:
            raise ScheduleError(f"cron expression {cron!r}: {exc}") from None
    try:
        policy = Overlap(overlap)
    except ValueError:
        raise ScheduleError(f"overlap {overlap!r}: one of {', '.join(Overlap)}") from None
    catchup_s = DEFAULT_CATCHUP_S if catchup is None else _seconds("catchup", catchup, 0.0, MAX_CATCHUP_S)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 1_000_000:
        raise ScheduleError(f"priority {priority!r} is outside 0..1000000")
    spec = ScheduleSpec(name, text, cron, None if every_s is None else float(every_s), tz, machine, priority, policy,
                        float(catchup_s))
    if now is not None:
        first = next_slot(spec, now)
        if first is None or first > now + HORIZON_S:
            when = "never" if first is None else f"first at {slot_time(first)}"
            what = f"cron expression {cron!r} in {tz}" if cron is not None else f"every {every!r}"
            raise ScheduleError(f"{what}: fires {when}, not within {HORIZON_S / DAY_S / 366:g} years of now (a "
                                "schedule must fire within them)")
    return spec


def zone_of(tz: str) -> ZoneInfo:
    """An IANA time zone; ScheduleError naming ``tz`` when there is no such zone."""
    try:
        if not isinstance(tz, str) or len(tz) > 64:
            raise ValueError(tz)
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"tz: unknown time zone {str(tz)[:80]!r} (an IANA name such as Europe/Paris or "
                            "UTC)") from None


def cron_library() -> ModuleType:
    """cronsim (and the calendar module it imports), loaded by the first cron expression read: the processes of
    a system without cron schedules never hold it (docs/memory.md)."""
    import cronsim  # noqa: PLC0415 - the point

    return cronsim


def _cron_errors() -> tuple[type[BaseException], ...]:
    """cronsim's error once it is loaded (only a cron expression, which loads it, raises it); else none."""
    loaded = sys.modules.get("cronsim")
    return (loaded.CronSimError,) if loaded is not None else ()


def next_slot(spec: ScheduleSpec, after: float) -> float | None:
    """The slot after ``after``, None when there is none a calendar can say (never raises)."""
    try:
        slot = spec.next_slot(after)
    except (StopIteration, ValueError, OverflowError, ArithmeticError, ScheduleError) + _cron_errors():
        return None
    return slot if math.isfinite(slot) and slot <= MAX_TIME else None


def check_spec(spec: ScheduleSpec, state: ScheduleState) -> str | None:
    """What is wrong with a stored schedule (one an old version or a bug wrote), None when nothing is: the
    bounds ``make_spec`` sets, and a state whose times are finite and within the calendar."""
    try:
        make_spec(spec.name, spec.text, cron=spec.cron, every=spec.every_s, tz=spec.tz, machine=spec.machine,
                  priority=spec.priority, overlap=spec.overlap, catchup=spec.catchup_s)
    except ScheduleError as exc:
        return str(exc)
    for field in ("cursor", "buffered"):
        value = getattr(state, field)
        if value is None and field == "buffered":
            continue
        if isinstance(value, bool) or not isinstance(value, float | int) or not 0 <= value <= MAX_TIME:
            return f"state {field} {value!r} is not a time between 1970 and 9000"
    return None


def timer_delay(wake_at: float, now: float) -> float:
    """How long the timer armed at ``now`` for ``wake_at`` sleeps: at most ``MAX_TIMER_S``, never negative or
    infinite (the wakeup then looks again), so no stored value can overflow a timer."""
    delay = wake_at - now if math.isfinite(wake_at) and math.isfinite(now) else MAX_TIMER_S
    return min(max(0.0, delay), MAX_TIMER_S)


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
    wake_at: float | None  # None: nothing to wake for (paused, quarantined)
    quarantine: str | None = None  # the schedule is broken (what is wrong): quarantine it, fire nothing


def step(spec: ScheduleSpec, state: ScheduleState, now: float, running: bool) -> Step:
    """The slots of ``spec`` due at ``now`` turned into fires and skips by its overlap policy.

    ``running``: whether the task the schedule fired last is still unfinished.  Never raises: a schedule out of
    bounds, or one the calendar cannot follow, is a ``Step`` that quarantines it.
    """
    problem = check_spec(spec, state)
    if problem is None:
        try:
            return _step(spec, state, now, running)
        except Exception as exc:  # noqa: BLE001 - a stored schedule no check foresaw: quarantined, not raised
            problem = f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} (no next slot)"
    return Step([], state, None, problem)


def _step(spec: ScheduleSpec, state: ScheduleState, now: float, running: bool) -> Step:
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
        first, last = first_after(cursor, every), first_after(now, every) - 1
        if last < first:
            return [], 0
        on_window = first_after(window_start, every)
        on_window -= (on_window - 1) * every == window_start  # a slot on the window's start is inside
        kept_from = max(first, on_window, last - MAX_CATCHUP_FIRES + 1)
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


def first_after(t: float, every: float) -> int:
    """The index ``k`` of the first slot ``k * every`` strictly after ``t``, checked against the slot as it is
    computed: ``t // every + 1`` alone can be one off in floating point (every 60.001 s: a slot was lost)."""
    k = int(t // every) + 1
    while k * every <= t:
        k += 1
    while (k - 1) * every > t:
        k -= 1
    return k


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
