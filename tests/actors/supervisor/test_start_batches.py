"""The runs the supervisor starts on one task actor in one commit travel as one ``StartTasks`` message, each
actor's messages in their order; a task actor runs every start of it (actors/supervisor/outbox.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from actors import messages as m
from actors.client import Client
from actors.supervisor.outbox import MOST_STARTS, coalesced
from actors.task_actor import TaskActor
from pegasus.config import Settings


def one_task_actor(tmp_path: Path, admin_port: int) -> Settings:
    """A whole supervisor and one task actor in this process (simpleSystemBase), memory off."""
    return Settings().with_overrides({
        "system": {"base": "simpleSystemBase", "admin_port": admin_port}, "state": {"home": str(tmp_path)},
        "runtime": {"task_actors_min": 1, "task_actors_max": 1}, "memory": {"recall_k": 0, "reflector": False}})


def _start(task_id: str) -> m.StartTask:
    return m.StartTask(None, 1, None, None, task_id=task_id)


def test_the_starts_to_one_actor_go_as_one_message_and_every_actor_keeps_its_order() -> None:
    a, b = object(), object()
    drop = m.DropTask("t0", 1)
    sends = [(a, _start("t1")), (b, _start("t2")), (a, _start("t3")), (a, drop), (a, _start("t4")),
             (b, _start("t5")), (a, _start("t6"))]
    out = coalesced(sends)
    assert [(to, type(message).__name__) for to, message in out] == [
        (a, "StartTasks"), (b, "StartTasks"), (a, "DropTask"), (a, "StartTasks")]
    assert [s.task_id for s in out[0][1].starts] == ["t1", "t3"]  # the drop stays after t3 and before t4
    assert [s.task_id for s in out[1][1].starts] == ["t2", "t5"]
    assert [s.task_id for s in out[3][1].starts] == ["t4", "t6"]
    assert coalesced([(a, _start("t1")), (b, drop)]) == [(a, _start("t1")), (b, drop)]  # one start: as it was


def test_a_start_message_holds_at_most_its_bound() -> None:
    a = object()
    out = coalesced([(a, _start(f"t{i}")) for i in range(MOST_STARTS + 1)])
    assert [len(message.starts) if isinstance(message, m.StartTasks) else 1 for _, message in out] == [MOST_STARTS, 1]


def test_the_tasks_of_one_submit_reach_their_task_actor_in_one_message(tmp_path: Path, monkeypatch) -> None:
    """The whole supervisor and its task actor (simpleSystemBase: one process): 6 tasks submitted at once
    reach the one task actor as one StartTasks, and every one runs to done."""
    received: Counter[str] = Counter()
    receive = TaskActor.receiveMessage

    def counted(actor: TaskActor, message: object, sender: object) -> None:
        received[type(message).__name__] += 1
        receive(actor, message, sender)

    monkeypatch.setattr(TaskActor, "receiveMessage", counted)
    client = Client.start(one_task_actor(tmp_path, 29999), timeout=10)
    try:
        tasks = client.submit_many([f"what is {i} + 1?" for i in range(6)])
        for task in tasks:
            assert client.wait(task["task_id"], timeout=60)["lifecycle_state"] == "done"
    finally:
        client.close()
    assert received["StartTasks"] == 1 and received["StartTask"] == 0
