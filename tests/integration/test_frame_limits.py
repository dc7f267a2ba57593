"""Messages larger than a frame (``[system] max_frame_bytes``) are refused unsent by Thespian, whole: a task actor's
batch of reports or a start that outgrew it was lost, and its tasks stayed "running" for ever, with nothing in
pegasus.jsonl.  Under the smallest frame there is: batches of reports close in time, and a task whose state cannot
go in a message at all ends failed, saying so."""

from __future__ import annotations

import pytest

from actors.client import RequestError
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
TASKS = 40
SMALL = {"system": {"max_frame_bytes": 65536}, "memory": {"reflector": False},
         "runtime": {"max_message_bytes": 32768, "max_active_tasks": TASKS, "task_actors_max": 1}}


def test_forty_tasks_of_large_contexts_on_one_task_actor_all_finish_under_the_smallest_frame(pegasus) -> None:
    """Each task's reports ~15 KB, all forty on one task actor: a batch of them passed 64 KB (up to ~460 KB)."""
    client = pegasus(**SMALL)
    words = "word " * 300
    tasks = [client.submit(f"echo {n} {words}")["task_id"] for n in range(TASKS)]
    assert [client.wait(task_id, timeout=60)["lifecycle_state"] for task_id in tasks] == ["done"] * TASKS
    with pytest.raises(RequestError, match="max_frame_bytes") as refused:  # forty inputs of ~1.5 KB: ~75 KB
        client.list(limit=TASKS)
    assert refused.value.error_type == "AnswerTooLarge"


def test_a_task_whose_state_outgrows_a_frame_fails_saying_so_and_the_others_finish(pegasus) -> None:
    client = pegasus(**SMALL)
    large = client.submit("echo " + "word " * 1400)["task_id"]  # its checkpoint ~80 KB: no message carries it
    small = [client.submit(f"echo {n} hello")["task_id"] for n in range(3)]
    final = client.wait(large, timeout=60)
    assert final["lifecycle_state"] == "failed", final["lifecycle_state"]
    assert "max_frame_bytes" in final["error"] and "bytes" in final["error"], final["error"]
    assert [client.wait(task_id, timeout=60)["lifecycle_state"] for task_id in small] == ["done"] * 3


def test_runs_restored_together_after_a_restart_all_start_though_their_starts_together_outgrow_a_frame(
        pegasus) -> None:
    """Eight running tasks of ~15 KB inputs, the system stopped and started again: the restore's one StartTasks
    (~120 KB) was refused unsent and its starts were lost; it goes again one start at a time."""
    small = {**SMALL, "runtime": {**SMALL["runtime"], "max_active_tasks": 8}}
    client = pegasus(**small)
    tasks = [client.submit(f"sleep 3 and what is {n} + 3? " + "x" * 14000)["task_id"] for n in range(8)]
    wait_for(lambda: all(client.get(task_id)["lifecycle_state"] == "running" for task_id in tasks), timeout=60,
             what="all eight running")
    client.close()
    again = pegasus(**small)
    assert [again.wait(task_id, timeout=60)["lifecycle_state"] for task_id in tasks] == ["done"] * 8


@pytest.mark.parametrize("home_host", [True, False])
def test_a_stage_too_large_for_a_worker_ends_its_task_failed_saying_so_not_at_its_timeout(pegasus, home_host) -> None:
    """Its context (~75 KB: the echo's output in several fields) grows past a frame: the Work to a worker was refused
    unsent and its job waited for the stage's timeout (here 600 s), its worker judged hung."""
    client = pegasus(**{**SMALL, "pools": {"home_host": home_host, "llm_timeout_s": 600, "tool_timeout_s": 600}})
    final = client.wait(client.submit("echo " + "y" * 8000)["task_id"], timeout=120)
    assert final["lifecycle_state"] == "failed" and "max_frame_bytes" in final["error"], final
