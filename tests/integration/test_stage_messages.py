"""Messages a stage on a real system (multiprocTCPBase), counted per type in every actor process
(benchmarks/msgprof.py).  With the pools in the home host (the default, pegasus/pool/home.py) a stage is two
messages: the worker's ``Work`` and its ``WorkDone`` carrying the answer.  It was four: the task actor's
``StageRequest`` to the pool, the pool's ``Work``, the worker's ``StageResult`` to the task actor and its
``WorkDone`` to the pool -- each a wake-up of a sleeping process when stages take time (issue 33)."""

from __future__ import annotations

from pathlib import Path

from actors.runtime.procs import free_port
from benchmarks import msgprof
from benchmarks.common import pegasus_system

STAGE_PATH = ("StageRequest", "Work", "StageResult", "WorkDone")
TASKS = 4


def stage_messages(directory: Path, overrides: dict) -> tuple[int, dict[str, int]]:
    """Run TASKS classic tasks to their end; the stages the workers ran, and the stage path's messages by type
    (the supervisor's memory steps left out: memory is off)."""
    with msgprof.profiling(directory), pegasus_system(directory / "state", overrides, port=free_port()) as system:
        client = system.client
        ids = [client.submit(f"what is {n} + 1?")["task_id"] for n in range(TASKS)]
        for task_id in ids:
            assert client.wait(task_id, timeout=120)["lifecycle_state"] == "done"
    counts = msgprof.read(directory)  # every process wrote its counts on its way out
    stages = int(counts["workers"].get("Work", [0])[0])
    by_type = {name: sum(int(rows.get(name, [0])[0]) for kind, rows in counts.items() if kind != "supervisor")
               for name in STAGE_PATH}
    return stages, by_type


def test_a_stage_is_two_messages_with_the_pools_in_the_home_host(tmp_path: Path) -> None:
    stages, by_type = stage_messages(tmp_path, {"memory": {"reflector": False, "recall_k": 0},
                                                "runtime": {"task_actors_max": 1}})  # every run on the home host
    assert stages >= 6 * TASKS, by_type  # each task's stages ran on the workers
    assert by_type == {"StageRequest": 0, "Work": stages, "StageResult": 0, "WorkDone": stages}


def test_with_the_pools_in_their_own_processes_a_stage_is_four_messages(tmp_path: Path) -> None:
    """``[pools] home_host = false``: the old path, kept where it is asked for."""
    stages, by_type = stage_messages(tmp_path, {"memory": {"reflector": False, "recall_k": 0},
                                                "pools": {"home_host": False}})
    assert stages >= 6 * TASKS
    assert by_type == {"StageRequest": stages, "Work": stages, "StageResult": stages, "WorkDone": stages}
