"""A sub-task's start says its parent waits for its end (``StartTask.awaited``): its task actor then never
holds that end for time while many runs wait (pegasus/run/report_batch.py), or each level of a tree would
wait up to the hold and its timer."""

from __future__ import annotations

from pathlib import Path

from actors import messages as m
from actors.client import Client
from actors.task_actor import TaskActor
from tests.actors.supervisor.test_start_batches import one_task_actor


def test_the_starts_of_sub_tasks_and_only_theirs_say_their_parent_waits(tmp_path: Path, monkeypatch) -> None:
    starts: list[tuple[str, bool]] = []
    receive = TaskActor.receiveMsg_StartTask

    def seen(actor: TaskActor, start: m.StartTask, sender: object) -> None:
        starts.append((start.task_id, start.awaited))
        receive(actor, start, sender)

    monkeypatch.setattr(TaskActor, "receiveMsg_StartTask", seen)
    client = Client.start(one_task_actor(tmp_path, 29998), timeout=10)
    try:
        parent = client.submit("in parallel: echo a; echo b")["task_id"]
        assert client.wait(parent, timeout=60)["lifecycle_state"] == "done"
        children = set(client.get(parent)["children"])
    finally:
        client.close()
    assert len(children) == 2
    assert {task_id for task_id, awaited in starts if awaited} == children
    assert {awaited for task_id, awaited in starts if task_id == parent} == {False}  # its first run and its return
