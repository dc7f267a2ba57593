"""Bounds of schedules (issue 28): every value that becomes a timer or a date is refused naming its field, or
accepted and then fires within the horizon; a stored schedule out of bounds is quarantined by ``step``, never
raised; a timer never sleeps longer than ``MAX_TIMER_S``."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pegasus.gateway.errors import ApiError
from pegasus.gateway.models import ScheduleBody, parse
from pegasus.triggers.schedules import (
    HORIZON_S, MAX_TIMER_S, ScheduleError, ScheduleSpec, ScheduleState, make_spec, next_slot, step, timer_delay,
)
from pegasus.store import Store
from pegasus.store import triggers

NOW = 1_795_000_000.0  # 2026-11-18
UNITS = ["", "ms", "s", "m", "h", "d", "w"]
numbers = st.one_of(st.integers(-10, 10**15).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.decimals(0, 10**6, places=3).map(str))
durations = st.one_of(
    st.tuples(numbers, st.sampled_from(UNITS)).map("".join),
    st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(UNITS[1:])), min_size=1, max_size=3)
    .map(lambda parts: "".join(f"{n}{u}" for n, u in parts)),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**20), 10**20), st.text(max_size=12))
CRON_FIELD = st.one_of(st.just("*"), st.integers(0, 70).map(str), st.sampled_from(
    ["*/7", "1-5", "L", "LW", "15W", "1#5", "MON#5", "5L", "30", "31", "29", "2", "FEB", "SUN", "0,30", "*/0", "?"]))
crons = st.one_of(st.lists(CRON_FIELD, min_size=5, max_size=5).map(" ".join), st.text(max_size=20),
                  st.sampled_from(["0 0 30 2 *", "0 0 31 4 *", "0 0 * 2 MON#5", "0 0 29 2 *", "0 0 L 2 *"]))
zones = st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Pacific/Kiritimati", "Asia/Kathmandu",
                         "Mars/Olympus", "../etc/passwd", "", "UTC" * 30])


def fires_within_the_horizon(spec: ScheduleSpec, now: float) -> None:
    """An accepted schedule: its next slot within the horizon, and stepping to it fires (or skips) without a
    quarantine, a timer no longer than MAX_TIMER_S."""
    slot = next_slot(spec, now)
    assert slot is not None and now < slot <= now + HORIZON_S
    result = step(spec, ScheduleState(cursor=now), slot, running=False)
    assert result.quarantine is None and [f.slot for f in result.fires] == [slot]
    assert result.wake_at is not None and 0 <= timer_delay(result.wake_at, slot) <= MAX_TIMER_S


@settings(max_examples=300, deadline=None)
@example(every="110000d", catchup="5m")
@example(every="99999999d", catchup="5m")
@example(every="6528000000000", catchup="1e400")
@example(every=float("nan"), catchup=float("inf"))
@example(every="366d", catchup="366d")
@given(every=durations, catchup=durations)
def test_every_and_catchup_are_refused_naming_the_field_or_fire_within_the_horizon(every, catchup) -> None:
    try:
        spec = make_spec("s", "t", every=every, catchup=catchup, now=NOW)
    except ScheduleError as exc:
        assert str(exc).startswith(("every", "catchup")), exc
        return
    assert spec.every_s is not None and math.isfinite(spec.every_s) and math.isfinite(spec.catchup_s)
    fires_within_the_horizon(spec, NOW)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(cron="0 0 30 2 *", tz="UTC", now=NOW)  # never: 30 February
@example(cron="0 0 * 2 MON#5", tz="UTC", now=NOW)  # a fifth Monday in February: 2044
@example(cron="0 0 29 2 *", tz="Europe/Paris", now=NOW)  # 29 February: 2028, inside
@example(cron="0 0 29 2 *", tz="UTC", now=253_402_200_000.0)  # 29 February from late 9999: none left
@given(cron=crons, tz=zones, now=st.floats(0, 253_402_300_000.0))
def test_a_cron_and_zone_are_refused_naming_the_field_or_fire_within_the_horizon(cron, tz, now) -> None:
    """Any expression, zone and clock (to year 9999): refused (cron or tz named), or its next slot comes within
    the horizon and fires."""
    try:
        spec = make_spec("s", "t", cron=cron, tz=tz, now=now)
    except ScheduleError as exc:
        assert str(exc).startswith(("cron", "tz")), exc
        return
    fires_within_the_horizon(spec, now)


def test_the_reported_poison_values_are_refused() -> None:
    for every in ("110000d", "99999999d", "6528000000000", "inf", "nan", "1e400", "0.5s", "-1"):
        with pytest.raises(ScheduleError, match="^every"):
            make_spec("big", "hi", every=every, now=NOW)
    for cron in ("0 0 30 2 *", "0 0 * 2 MON#5"):
        with pytest.raises(ScheduleError, match="^cron"):
            make_spec("big", "hi", cron=cron, now=NOW)


@settings(max_examples=200, deadline=None)
@given(body=st.fixed_dictionaries(
    {"name": st.sampled_from(["s", "big", "../x"]), "text": st.sampled_from(["x", ""])},
    optional={"every": durations, "cron": crons, "tz": zones, "catchup": durations,
              "priority": st.integers(-5, 2_000_000), "overlap": st.sampled_from(["skip", "queue", "allow_all"]),
              "extra": st.integers()}))
def test_the_http_body_is_a_400_naming_the_field_or_a_schedule_that_fires(body) -> None:
    """POST /v1/schedules's body: an unknown field or a bad value is a 400 naming it, never another error."""
    try:
        raw = json.dumps(body).encode()
    except ValueError:
        return
    try:
        parsed = parse(ScheduleBody, raw)
    except ApiError as exc:
        # the field, or the field and which of its forms refused it (every.str, every.constrained-str, ...)
        assert exc.status == 400 and exc.message.split(":")[0].split(".")[0] in (*body, "body", "every",
                                                                                "catchup"), exc.message
        if "extra" in body:
            assert exc.message.startswith("extra: Extra inputs are not permitted")
        return
    assert "extra" not in body
    spec = make_spec(parsed.name, parsed.text, cron=parsed.cron, every=parsed.every, tz=parsed.tz or "UTC",
                     catchup=parsed.catchup, now=NOW)
    fires_within_the_horizon(spec, NOW)


# -- the core never raises on a stored schedule ---------------------------------------------------

STORED_POISON = [
    (ScheduleSpec("big", "hi", every_s=9_504_000_000.0), ScheduleState(cursor=NOW), "every"),  # 110000d
    (ScheduleSpec("nan", "hi", every_s=float("nan")), ScheduleState(cursor=NOW), "every"),
    (ScheduleSpec("feb", "hi", cron="0 0 30 2 *"), ScheduleState(cursor=NOW), "cron"),
    (ScheduleSpec("zone", "hi", cron="* * * * *", tz="Mars/Olympus"), ScheduleState(cursor=NOW), "tz"),
    (ScheduleSpec("late", "hi", every_s=60.0), ScheduleState(cursor=1e20), "cursor"),
    (ScheduleSpec("inf", "hi", every_s=60.0), ScheduleState(cursor=NOW, buffered=float("inf")), "buffered"),
]


@pytest.mark.parametrize(("spec", "state", "field"), STORED_POISON, ids=[s.name for s, _, _ in STORED_POISON])
def test_a_stored_schedule_out_of_bounds_is_quarantined_not_raised(spec, state, field) -> None:
    result = step(spec, state, NOW + 60, running=False)
    assert result.fires == [] and result.wake_at is None and result.state == state
    assert result.quarantine is not None and field in result.quarantine


@settings(max_examples=300, deadline=None)
@given(every=st.floats(allow_nan=True, allow_infinity=True), catchup=st.floats(allow_nan=True, allow_infinity=True),
       cursor=st.floats(allow_nan=True, allow_infinity=True), now=st.floats(0, 253_402_300_000.0),
       cron=st.none() | crons)
def test_step_never_raises_on_any_stored_schedule(every, catchup, cursor, now, cron) -> None:
    spec = ScheduleSpec("s", "t", cron=cron, every_s=None if cron else every, catchup_s=catchup)
    result = step(spec, ScheduleState(cursor=cursor), now, running=False)
    assert (result.quarantine is None) or (result.fires == [] and result.wake_at is None)
    if result.wake_at is not None:
        assert 0 <= timer_delay(result.wake_at, now) <= MAX_TIMER_S


@pytest.mark.parametrize(("wake_at", "now", "delay"), [
    (100.0, 40.0, 60.0), (10.0, 40.0, 0.0), (1e300, 0.0, MAX_TIMER_S), (9_504_000_000.0, NOW, MAX_TIMER_S),
    (float("inf"), 0.0, MAX_TIMER_S), (float("nan"), 0.0, MAX_TIMER_S), (5.0, float("nan"), MAX_TIMER_S),
    (-float("inf"), 0.0, MAX_TIMER_S)])
def test_a_timer_is_clamped_to_at_most_an_hour_never_negative_or_infinite(wake_at, now, delay) -> None:
    """Whatever the wake time (a slot in 2271, infinity, NaN), the timer sleeps at most MAX_TIMER_S, then the
    wakeup looks again: a far value cannot overflow Thespian's select."""
    assert timer_delay(wake_at, now) == delay


def test_an_unreadable_stored_row_comes_back_quarantined_and_the_others_read(tmp_path: Path) -> None:
    """A row an old version or a bug wrote (unknown spec field, no JSON) reads as quarantined with why; marked,
    it stays quarantined with that error; the good one is read as it is."""
    store = Store(tmp_path / "p.db")
    good = make_spec("good", "t", every="1h")
    triggers.add_schedule(store, "id1", good, ScheduleState(cursor=5.0))
    with sqlite3.connect(tmp_path / "p.db") as db:
        for name, spec in (("bad", '{"name": "bad", "text": "t", "colour": "red", "overlap": "skip"}'),
                           ("worse", "not json")):
            db.execute("INSERT INTO schedules (name, id, spec, paused, cursor, fired, skipped, created_at) "
                       "VALUES (?, ?, ?, 0, 5.0, 0, 0, 'then')", (name, f"id-{name}", spec))
    rows = {row.name: row for row in triggers.schedules(store)}
    assert rows["good"].spec == good and rows["good"].quarantined is None
    assert rows["bad"].spec is None and "colour" in rows["bad"].quarantined and not rows["bad"].marked
    assert rows["worse"].quarantined.startswith("unreadable: JSONDecodeError")
    triggers.quarantine_schedule(store, "bad", rows["bad"].quarantined)
    again = {row.name: row for row in triggers.schedules(store)}
    assert again["bad"].marked and again["bad"].quarantined == rows["bad"].quarantined


def test_quarantined_records_are_a_gauge_per_kind_in_metrics() -> None:
    """/metrics counts what stats says is quarantined, per kind, for an operator to alert on."""
    from pegasus.gateway.metrics import GatewayMetrics  # noqa: PLC0415 - the gateway's, only here

    text = GatewayMetrics().render({"quarantined": {"schedules": [{"name": "big", "error": "every ..."}],
                                                    "tasks": []}}).decode()
    assert 'pegasus_quarantined{kind="schedules"} 1.0' in text and 'pegasus_quarantined{kind="tasks"} 0.0' in text
