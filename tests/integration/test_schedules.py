"""Schedules on a real system: slots fire once each, pause stops them, and after a whole-system SIGKILL and a
restart no slot fires twice and every missed one is fired or counted (which: tests/pegasus/test_schedule_timer.py)."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime
from typing import Any

import httpx
import pytest

from actors import messages as m
from actors.runtime import procs
from actors.client import Client, RequestError
from actors.runtime.system import system_pids
from pegasus.triggers.schedules import ScheduleError
from pegasus.store import Store
from tests.integration.test_http_gateway import _wait_up
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def fired(client: Client, name: str) -> list[dict[str, Any]]:
    """The tasks schedule ``name`` fired, oldest slot first."""
    tasks = [client.get(t["task_id"]) for t in client.list()]
    mine = [t for t in tasks if t["source"] == "SCHEDULE_FIRED" and t["metadata"].get("schedule") == name]
    return sorted(mine, key=lambda t: t["metadata"]["scheduled_time"])


def slots_of(tasks: list[dict[str, Any]]) -> list[float]:
    return [datetime.fromisoformat(t["metadata"]["scheduled_time"]).timestamp() for t in tasks]


def schedule(client: Client, name: str) -> dict[str, Any]:
    return next(s for s in client.schedules() if s["name"] == name)


def test_every_second_fires_once_per_slot_and_pause_stops_it(pegasus) -> None:
    client = pegasus()
    client.schedule_add("tick", text="what is 2 + 2?", every="1s", overlap="allow_all")
    wait_for(lambda: schedule(client, "tick")["fired"] >= 3, timeout=60, what="three slots")
    paused = client.schedule_pause("tick")
    assert paused["paused"] and paused["next_time"] is None
    tasks = fired(client, "tick")
    slots = slots_of(tasks)
    # One task per slot, and the slots are consecutive seconds: none skipped, none twice.
    assert len(tasks) == paused["fired"] >= 3 and paused["skipped"] == 0
    assert [b - a for a, b in zip(slots, slots[1:])] == [1.0] * (len(slots) - 1)
    assert all(t["machine"] == "classic" and t["input"] == "what is 2 + 2?" for t in tasks)
    # Paused, no slot fires however long: tests/pegasus/test_schedule_timer.py, in simulated time.
    before_resume = time.time()
    resumed = client.schedule_resume("tick")
    assert not resumed["paused"]
    wait_for(lambda: len(fired(client, "tick")) > len(tasks), timeout=30, what="a slot after the resume")
    assert schedule(client, "tick")["skipped"] == 0
    after = slots_of(fired(client, "tick"))[len(tasks)]
    assert after > before_resume  # the slots that passed while paused did not fire on resume


def test_trigger_fires_now_and_remove_ends_the_schedule(pegasus) -> None:
    client = pegasus()
    view = client.schedule_add("nightly", text="what is 1 + 1?", cron="0 3 * * *", tz="Europe/Paris")
    assert view["next_time"] is not None and view["fired"] == 0
    triggered = client.schedule_trigger("nightly")
    task = client.wait(triggered["task"]["task_id"], timeout=60)
    assert (task["source"], task["metadata"]["trigger"], task["lifecycle_state"]) == (
        "SCHEDULE_FIRED", "manual", "done")
    with pytest.raises(RequestError, match="exists"):
        client.schedule_add("nightly", text="again", every="1h")
    for bad, message in (({"cron": "61 * * * *"}, "cron expression"), ({"every": "1s", "tz": "Nowhere/Else"},
                                                                        "time zone")):
        with pytest.raises(ScheduleError, match=message):  # the Client's own check, before anything is sent
            client.schedule_add("bad", text="x", **bad)
    assert client.schedule_remove("nightly")["removed"]
    assert client.schedules() == []
    with pytest.raises(RequestError, match="no schedule named 'nightly'") as info:
        client.schedule_pause("nightly")
    assert info.value.error_type == "ScheduleNotFound"


def test_after_a_whole_system_kill_no_slot_fires_twice_and_each_missed_one_is_fired_or_counted(pegasus) -> None:
    """The window itself (missed slots inside it fired once, late; older ones counted) is
    tests/pegasus/test_schedule_timer.py's, in simulated time: here the store's side, across a SIGKILL."""
    client = pegasus()
    client.schedule_add("tick", text="what is 3 + 4?", every="1s", overlap="allow_all", catchup="3s")
    wait_for(lambda: schedule(client, "tick")["fired"] >= 2, timeout=60, what="two slots")
    spec = client.spec
    killed = procs.freeze_and_kill(lambda: system_pids(spec))  # the admin and every actor, at once
    assert procs.wait_gone(killed, timeout=60) == []
    client.closed = True
    down = time.time()

    restarted = pegasus()
    wait_for(lambda: any(slot > down for slot in slots_of(fired(restarted, "tick"))), timeout=60,
             what="a slot after the restart")
    restarted.schedule_pause("tick")
    tasks = fired(restarted, "tick")
    slots = slots_of(tasks)
    view = schedule(restarted, "tick")
    assert len(slots) == len(set(slots)) == view["fired"]  # no slot twice
    # Every slot from the first on is fired or counted skipped: the gaps are exactly the slots skipped.
    steps = [round(b - a) for a, b in zip(slots, slots[1:])]
    assert sum(s - 1 for s in steps) == view["skipped"], (steps, view)
    print(f"\n{len(slots)} slots fired, {view['skipped']} skipped while down")


def test_overlap_skip_starts_no_slot_while_the_last_task_runs(pegasus) -> None:
    """Every second, each task sleeping 1.5 s: the slots that come meanwhile are skipped and counted, and no two
    of the schedule's tasks ever run at once."""
    client = pegasus()
    client.schedule_add("slow", text="sleep 1.5", every="1s", overlap="skip")
    wait_for(lambda: schedule(client, "slow")["skipped"] >= 2 and schedule(client, "slow")["fired"] >= 2,
             timeout=60, what="skipped slots and a second task")
    client.schedule_pause("slow")
    tasks = [client.wait(t["task_id"], timeout=60) for t in fired(client, "slow")]
    assert all(t["lifecycle_state"] == "done" for t in tasks)
    for earlier, later in zip(tasks, tasks[1:]):  # each started after the one before had finished
        assert datetime.fromisoformat(later["created_at"]) >= datetime.fromisoformat(earlier["updated_at"])
    slots = slots_of(tasks)
    assert all(b - a >= 2.0 for a, b in zip(slots, slots[1:]))  # the slots in between were skipped


def test_cancel_other_cancels_the_running_task_and_buffer_one_starts_one_after_it(pegasus) -> None:
    """Every second, tasks sleeping 2.5 s: cancel_other cancels each running task when the next slot fires;
    buffer_one starts a waiting slot only once the running task is done, and skips the others."""
    client = pegasus()
    client.schedule_add("latest", text="sleep 2.5", every="1s", overlap="cancel_other")
    client.schedule_add("queued", text="sleep 2.5", every="1s", overlap="buffer_one")
    wait_for(lambda: len([t for t in fired(client, "latest") if t["lifecycle_state"] == "canceled"]) >= 2
             and schedule(client, "queued")["fired"] >= 2, timeout=60, what="canceled and buffered tasks")
    for name in ("latest", "queued"):
        client.schedule_pause(name)
    latest = fired(client, "latest")
    assert [t["lifecycle_state"] for t in latest[:-1]] == ["canceled"] * (len(latest) - 1)
    queued = [client.wait(t["task_id"], timeout=60) for t in fired(client, "queued")]
    assert all(t["lifecycle_state"] == "done" for t in queued) and schedule(client, "queued")["skipped"] >= 1
    for earlier, later in zip(queued, queued[1:]):  # the buffered one started after the running one ended
        assert datetime.fromisoformat(later["created_at"]) >= datetime.fromisoformat(earlier["updated_at"])
    slots = slots_of(queued)  # the one buffered is the first slot that came while the first task ran
    assert slots[1] - slots[0] == 1.0


# -- poison (issue 28): refused at every door, nothing stored, the supervisor never restarted ---------------

POISON = [({"every": "110000d"}, "every"), ({"every": "99999999d"}, "every"), ({"every": "6528000000000"}, "every"),
          ({"every": "inf"}, "every"), ({"every": "1h", "catchup": "1e400"}, "catchup"),
          ({"cron": "0 0 30 2 *"}, "cron"), ({"cron": "0 0 * 2 MON#5"}, "cron"),
          ({"cron": "* * * * *", "tz": "Mars/Olympus"}, "tz")]


def test_poison_schedule_values_are_refused_store_nothing_and_the_supervisor_serves_on(pegasus) -> None:
    """Each value the issue reported (a slot in 2271 or past year 9999, infinity, 30 February, a first slot in
    2044, no such zone): refused by the Client naming the field, and refused again by the supervisor when sent
    past the Client's check; nothing stored, the same supervisor serves a task after."""
    client = pegasus()
    before = (client.locate()["generation"], client.stats()["supervisor_pid"])
    for values, field in POISON:
        with pytest.raises(ScheduleError, match=f"^{field}"):
            client.schedule_add("big", text="hi", **values)
        with pytest.raises(RequestError, match=f"^{field}"):  # sent as it is, past the Client's check
            client._ask(m.ScheduleAdd(name="big", text="hi", **values))
    assert client.schedules() == []
    # A yearly slot is over 24.8 days away: on 8f3b2f9 its timer overflowed poll()'s int milliseconds and the
    # supervisor died at once, again after every restart (4 restarts in 4 s); the timer now sleeps an hour at most.
    assert client.schedule_add("yearly", text="hi", cron="0 0 1 1 *")["next_time"] is not None
    task = client.submit("what is 2 + 2?")
    assert client.wait(task["task_id"], timeout=60)["lifecycle_state"] == "done"
    assert (client.locate()["generation"], client.stats()["supervisor_pid"]) == before


def test_poison_schedule_bodies_over_http_are_a_400_naming_the_field_and_store_nothing(pegasus) -> None:
    """POST /v1/schedules with each poison value, or an unknown field: a 400 naming the field (no 500, nothing
    stored: the issue's every of 6528000000000 was stored despite its 400), /healthz's restarts unchanged, a
    submit over HTTP then completes; the schema says the body takes no other fields."""
    port = procs.free_port()
    client = pegasus(http={"enabled": True, "port": port})
    base = f"http://127.0.0.1:{port}"
    _wait_up(base)
    auth = {"Authorization": f"Bearer {client.token_create('poison', 'admin')['token']}"}
    with httpx.Client(base_url=base, headers=auth, timeout=30) as http:
        restarts = http.get("/healthz").json()["restarts"]
        for values, field in [*POISON, ({"every": 1e300}, "every"), ({"every": "1h", "colour": "red"}, "colour")]:
            refused = http.post("/v1/schedules", json={"name": "big", "text": "hi", **values})
            assert refused.status_code == 400, refused.text
            named = refused.json()["error"]["message"].replace(":", " ").split()[:3]
            # the field, or the field and which of its forms refused it (every.constrained-str)
            assert field in [word.split(".")[0] for word in named], refused.text
        assert http.get("/v1/schedules").json() == []
        body = http.get("/openapi.json").json()["components"]["schemas"]["ScheduleBody"]
        assert body["additionalProperties"] is False
        task = http.post("/v1/tasks", json={"text": "what is 2 + 2?"}).json()
        assert client.wait(task["task_id"], timeout=60)["lifecycle_state"] == "done"
        assert http.get("/healthz").json()["restarts"] == restarts


def test_bad_records_stored_by_an_old_version_are_quarantined_and_the_system_serves(pegasus, state_dir) -> None:
    """Schedules written into the SQLite file as an old version or a bug would have (a slot in 2271: it
    overflowed the supervisor's timer; a spec with a field no version knows), and a task of an unknown machine:
    the system starts and serves, they show quarantined with their error in list and stats, fire nothing, and a
    good schedule beside them fires."""
    Store(state_dir / "pegasus.db").close()  # the schema as this version makes it, then rows written by hand
    spec = {"name": "big", "text": "hi", "cron": None, "every_s": 9_504_000_000.0, "tz": "UTC", "machine": None,
            "priority": 5, "overlap": "skip", "catchup_s": 300.0}
    with sqlite3.connect(state_dir / "pegasus.db") as db:
        for name, fields in (("big", spec), ("odd", {**spec, "name": "odd", "every_s": 60.0, "colour": "red"})):
            db.execute("INSERT INTO schedules (name, id, spec, paused, cursor, fired, skipped, created_at) "
                       "VALUES (?, ?, ?, 0, ?, 0, 0, 'then')", (name, f"id-{name}", json.dumps(fields), time.time()))
        db.execute("INSERT INTO tasks (task_id, machine, lifecycle_state, cognitive_state, priority, seq, input, "
                   "source, created_at, updated_at) VALUES ('gone', 'gone_machine', 'queued', 'received', 5, 1, 'x', "
                   "'cli', 'then', 'then')")  # and a task of a machine no longer known (a removed plugin)
    client = pegasus()
    client.schedule_add("tick", text="what is 2 + 2?", every="1s")
    wait_for(lambda: schedule(client, "tick")["fired"] >= 1, timeout=60, what="the good schedule firing")
    views = {v["name"]: v for v in client.schedules()}
    assert "every 9504000000.0 is outside" in views["big"]["quarantined"] and views["big"]["next_time"] is None
    assert "colour" in views["odd"]["quarantined"] and views["tick"]["quarantined"] is None
    quarantined = client.stats()["quarantined"]
    assert {q["name"] for q in quarantined["schedules"]} == {"big", "odd"}
    assert [q["name"] for q in quarantined["tasks"]] == ["gone"] and "gone_machine" in quarantined["tasks"][0]["error"]
    gone = client.get("gone")
    assert (gone["lifecycle_state"], gone["exit_reason"]) == ("failed", "fatal_error")
    with pytest.raises(RequestError, match="quarantined"):
        client.schedule_trigger("big")
    generation = client.locate()["generation"]
    task = client.submit("what is 3 + 4?")
    assert client.wait(task["task_id"], timeout=60)["lifecycle_state"] == "done"
    assert client.locate()["generation"] == generation and fired(client, "big") == fired(client, "odd") == []
    with sqlite3.connect(state_dir / "pegasus.db") as db:  # marked in the store: not tried again at each start
        marked = dict(db.execute("SELECT name, quarantined FROM schedules WHERE quarantined IS NOT NULL"))
    assert set(marked) == {"big", "odd"}
    assert client.schedule_remove("big")["removed"] and "big" not in str(client.stats()["quarantined"])
