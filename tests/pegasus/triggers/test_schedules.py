"""The schedule core (pegasus.triggers.schedules): slots of cron and every, DST, catch-up and overlap, clock passed in."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pegasus.admission import Admission
from pegasus.config import Settings
from pegasus.idempotency import SCHEDULE
from pegasus.triggers.schedules import (
    BUFFER_POLL_S, MAX_CATCHUP_FIRES, Overlap, ScheduleError, ScheduleState, make_spec, parse_duration, resume,
    slot_key, step, trigger,
)
from pegasus.store import Store
from pegasus.store import triggers

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


def at(zone: ZoneInfo, *args: int) -> float:
    return datetime(*args, tzinfo=zone).timestamp()


def local(zone: ZoneInfo, slot: float) -> str:
    return datetime.fromtimestamp(slot, zone).strftime("%Y-%m-%d %H:%M %Z")


def test_durations_parse_and_bad_ones_are_named() -> None:
    """90s, 5m, 1h30m, 2d and plain seconds; anything else names the text."""
    assert [parse_duration(t) for t in ("90s", "5m", "1h30m", "2d", "1.5", "500ms")] == [90, 300, 5400, 172800,
                                                                                           1.5, 0.5]
    for bad in ("", "5 minutes", "m5", "1x"):
        with pytest.raises(ScheduleError, match="duration"):
            parse_duration(bad)


def test_bad_schedules_are_refused_naming_the_problem() -> None:
    """A bad cron, zone, policy or name, both or neither of cron/every, a sub-second every: each named."""
    cases = [({"cron": "61 * * * *"}, "cron expression"), ({"cron": "* * *"}, "cron expression"),
             ({"every": "1s", "tz": "Mars/Olympus"}, "time zone"), ({"every": "1s", "overlap": "queue"}, "overlap"),
             ({}, "exactly one"), ({"cron": "* * * * *", "every": "1s"}, "exactly one"),
             ({"every": "100ms"}, "every .100ms. is outside 1s")]
    for kwargs, message in cases:
        with pytest.raises(ScheduleError, match=message):
            make_spec("s", "do it", **kwargs)
    with pytest.raises(ScheduleError, match="name"):
        make_spec("../x", "do it", every="1s")


def test_cron_in_a_zone_across_spring_forward_fires_once_after_the_gap() -> None:
    """02:30 daily in New York: on 2026-03-08 02:30 does not exist; it fires at 03:00 EDT, then 02:30 again."""
    spec = make_spec("s", "t", cron="30 2 * * *", tz="America/New_York")
    start = at(NEW_YORK, 2026, 3, 7, 12, 0)
    slots = [spec.next_slot(start)]
    for _ in range(2):
        slots.append(spec.next_slot(slots[-1]))
    assert [local(NEW_YORK, s) for s in slots] == ["2026-03-08 03:00 EDT", "2026-03-09 02:30 EDT",
                                                   "2026-03-10 02:30 EDT"]


def test_cron_in_a_zone_across_fall_back_fires_once_in_the_repeated_hour() -> None:
    """01:30 daily in New York: 2026-11-01 has 01:30 twice; one slot, 25 hours before the next."""
    spec = make_spec("s", "t", cron="30 1 * * *", tz="America/New_York")
    first = spec.next_slot(at(NEW_YORK, 2026, 10, 31, 12, 0))
    second = spec.next_slot(first)
    third = spec.next_slot(second)
    assert [local(NEW_YORK, s) for s in (first, second, third)] == [
        "2026-11-01 01:30 EDT", "2026-11-02 01:30 EST", "2026-11-03 01:30 EST"]
    assert second - first == 25 * 3600 and third - second == 24 * 3600


def test_hourly_cron_across_paris_spring_forward_has_no_slot_in_the_gap() -> None:
    """Every hour at :00 in Paris on 2026-03-29: 02:00 does not exist; 01:00 CET is followed by 03:00 CEST."""
    spec = make_spec("s", "t", cron="0 * * * *", tz="Europe/Paris")
    first = spec.next_slot(at(PARIS, 2026, 3, 29, 0, 30))
    second = spec.next_slot(first)
    assert [local(PARIS, s) for s in (first, second)] == ["2026-03-29 01:00 CET", "2026-03-29 03:00 CEST"]
    assert second - first == 3600  # one real hour apart: nothing fired twice, nothing lost


def test_every_is_counted_from_the_epoch_and_fires_each_slot_once() -> None:
    spec = make_spec("s", "t", every="10s", overlap="allow_all")
    state = ScheduleState(cursor=1005.0)
    first = step(spec, state, 1009.0, running=False)
    assert first.fires == [] and first.wake_at == 1010.0
    second = step(spec, first.state, 1010.0, running=False)
    assert [f.slot for f in second.fires] == [1010.0] and second.wake_at == 1020.0
    again = step(spec, second.state, 1010.5, running=False)  # an early or repeated wakeup: nothing twice
    assert again.fires == []


def test_after_downtime_missed_slots_inside_the_window_fire_and_older_are_counted() -> None:
    """Down from 1000 to 1100, every 10s, catch-up 35s: 1070..1100 fire, 1010..1060 are skipped (6)."""
    spec = make_spec("s", "t", every="10s", overlap="allow_all", catchup="35s")
    result = step(spec, ScheduleState(cursor=1000.0), 1100.0, running=False)
    assert [f.slot for f in result.fires] == [1070.0, 1080.0, 1090.0, 1100.0]
    assert (result.state.skipped, result.state.fired, result.state.cursor) == (6, 4, 1100.0)


def test_catchup_of_a_cron_schedule_counts_what_it_skips() -> None:
    spec = make_spec("s", "t", cron="* * * * *", overlap="allow_all", catchup="150s")
    start = at(PARIS, 2026, 1, 1, 10, 0)
    result = step(spec, ScheduleState(cursor=start), start + 600, running=False)  # 10 minutes down
    assert [local(PARIS, f.slot)[-9:-4] for f in result.fires] == ["10:08", "10:09", "10:10"]
    assert result.state.skipped == 7


def test_a_huge_catchup_window_fires_at_most_the_latest_slots() -> None:
    spec = make_spec("s", "t", every="1s", overlap="allow_all", catchup="365d")
    result = step(spec, ScheduleState(cursor=0.0), 30 * 86400.0, running=False)
    assert len(result.fires) == MAX_CATCHUP_FIRES and result.fires[-1].slot == 30 * 86400.0
    assert result.state.skipped == 30 * 86400 - MAX_CATCHUP_FIRES


def test_overlap_skip_fires_the_first_due_slot_only_when_nothing_runs() -> None:
    spec = make_spec("s", "t", every="10s", overlap="skip")
    busy = step(spec, ScheduleState(cursor=1000.0), 1030.0, running=True)
    assert busy.fires == [] and busy.state.skipped == 3
    idle = step(spec, ScheduleState(cursor=1000.0), 1030.0, running=False)
    assert [f.slot for f in idle.fires] == [1010.0] and idle.state.skipped == 2


def test_overlap_buffer_one_keeps_one_start_until_the_running_task_ends() -> None:
    spec = make_spec("s", "t", every="10s", overlap="buffer_one")
    busy = step(spec, ScheduleState(cursor=1000.0, last_task="a"), 1030.0, running=True)
    assert busy.fires == [] and busy.state.buffered == 1010.0 and busy.state.skipped == 2
    assert busy.wake_at == 1030.0 + BUFFER_POLL_S  # polls for the end of the running task
    still = step(spec, busy.state, 1030.5, running=True)
    assert still.fires == [] and still.state.buffered == 1010.0
    done = step(spec, still.state, 1031.0, running=False)
    assert [f.slot for f in done.fires] == [1010.0] and done.state.buffered is None


def test_overlap_cancel_other_cancels_the_running_task_and_fires_the_latest() -> None:
    spec = make_spec("s", "t", every="10s", overlap="cancel_other")
    result = step(spec, ScheduleState(cursor=1000.0, last_task="a"), 1020.0, running=True)
    assert [(f.slot, f.cancel) for f in result.fires] == [(1020.0, "a")] and result.state.skipped == 1
    idle = step(spec, ScheduleState(cursor=1000.0, last_task="a"), 1010.0, running=False)
    assert [(f.slot, f.cancel) for f in idle.fires] == [(1010.0, None)]


def test_paused_fires_nothing_and_resume_does_not_fire_what_passed_meanwhile() -> None:
    spec = make_spec("s", "t", every="10s", overlap="allow_all")
    paused = ScheduleState(cursor=1000.0, paused=True)
    assert step(spec, paused, 1100.0, running=False).fires == []
    resumed = resume(paused, 1100.0)
    assert step(spec, resumed, 1105.0, running=False).fires == []
    assert [f.slot for f in step(spec, resumed, 1110.0, running=False).fires] == [1110.0]


def test_trigger_ignores_skip_but_cancel_other_still_cancels() -> None:
    running = ScheduleState(cursor=0.0, last_task="a")
    assert trigger(make_spec("s", "t", every="1h"), running, 5.0, running=True).cancel is None
    assert trigger(make_spec("s", "t", every="1h", overlap="cancel_other"), running, 5.0, running=True).cancel == "a"


def test_slot_keys_are_distinct_per_slot_and_schedule() -> None:
    keys = {slot_key("id1", 10.0), slot_key("id1", 11.0), slot_key("id2", 10.0), slot_key("id1", 10.0, True)}
    assert len(keys) == 4 and slot_key("id1", 10.0) == "id1@1970-01-01T00:00:10+00:00"


def test_schedules_round_trip_through_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    spec = make_spec("nightly", "tidy up", cron="0 3 * * *", tz="Europe/Paris", overlap=Overlap.BUFFER_ONE,
                     priority=2, catchup="1h")
    triggers.add_schedule(store, "id1", spec, ScheduleState(cursor=5.0))
    with pytest.raises(ScheduleError, match="exists"):
        triggers.add_schedule(store, "id2", spec, ScheduleState(cursor=5.0))
    triggers.save_schedule(store, "nightly", ScheduleState(7.0, True, 6.0, 3, 4, "t1"))
    [row] = triggers.schedules(store)
    assert (row.schedule_id, row.spec, row.state, row.quarantined) == ("id1", spec, ScheduleState(7.0, True, 6.0, 3,
                                                                                                 4, "t1"), None)
    assert triggers.remove_schedule(store, "nightly") and not triggers.remove_schedule(store, "nightly")


def test_a_slot_fired_again_answers_its_first_task_and_scopes_keep_keys_apart(tmp_path: Path) -> None:
    """A slot's key (scope schedule) made a task; firing the slot again (a cursor lost in a crash) makes none,
    and the same key in the submit scope is another request's."""
    admission = Admission(Settings(), store=Store(tmp_path / "p.db"))
    key = slot_key("id1", 60.0)
    meta = {"schedule": "s", "scheduled_time": "1970-01-01T00:01:00+00:00"}
    first, effects = admission.submit("t", "classic", 5, meta, "SCHEDULE_FIRED", key, scope=SCHEDULE)
    again, none = admission.submit("t", "classic", 5, meta, "SCHEDULE_FIRED", key, scope=SCHEDULE)
    assert effects and none == [] and again.task_id == first.task_id
    other, _ = admission.submit("t", "classic", 5, meta, "cli", key)
    assert other.task_id != first.task_id and len(admission.records) == 2


@settings(max_examples=150, deadline=None)
# Found by hypothesis in CI: a cursor a hair before a cron slot was rounded up onto it (datetime keeps
# microseconds), and the slot was neither fired nor skipped.
@example(every="cron", catchup=0, gaps=[60.0, 1.0], start=1772954999.9999998)
@given(every=st.sampled_from(["1s", "2s", "7.5s", "cron"]), catchup=st.integers(0, 60),
       gaps=st.lists(st.floats(0.0, 120.0), min_size=1, max_size=25),
       start=st.floats(at(NEW_YORK, 2026, 3, 8, 1, 30), at(NEW_YORK, 2026, 3, 8, 2, 30)))
def test_every_slot_is_fired_once_or_skipped_once_whatever_the_wakeups(every: str, catchup: int, gaps: list[float],
                                                                      start: float) -> None:
    """allow_all: over any sequence of wakeups (late, early, repeated), each slot that passed is fired exactly once
    or counted as skipped exactly once, and a fired slot was inside the catch-up window when it fired."""
    spec = make_spec("s", "t", overlap="allow_all", catchup=catchup, tz="America/New_York",
                     **({"cron": "* * * * *"} if every == "cron" else {"every": every}))
    state, now, fired_slots = ScheduleState(cursor=start), start, []
    for gap in gaps:
        now += gap
        result = step(spec, state, now, running=False)
        assert all(now - catchup <= fire.slot <= now for fire in result.fires)
        fired_slots += [fire.slot for fire in result.fires]
        state = result.state
    passed = []
    for slot in spec.slots(start):
        if slot > now:
            break
        passed.append(slot)
    assert fired_slots == sorted(set(fired_slots)) and set(fired_slots) <= set(passed)
    assert state.fired == len(fired_slots) and state.fired + state.skipped == len(passed)
