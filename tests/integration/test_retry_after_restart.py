"""Retry of a task that failed before the system's current start (issue 28).

The task is failed by a verification gate that looks for a file; the system is
stopped, the file made, the system started again (background or embedded) and
the task retried: it runs and ends done.  Before, the retried task stayed
``queued`` forever (``KeyError`` in Admission: only the store held it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.runtime.system import shutdown

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("daemon, backoff_s", [(False, 0.0), (True, 0.2)], ids=["embedded", "background"])
def test_a_task_failed_before_a_restart_is_retried_and_done(pegasus, tmp_path: Path, daemon: bool,
                                                            backoff_s: float) -> None:
    marker = tmp_path / "marker"
    settings = {"verification": {"gates": [{"name": "marker", "command": ["test", "-e", str(marker)],
                                            "timeout_s": 30}], "max_gate_retries": 0},
                "retry": {"backoff_s": backoff_s}}
    client = pegasus(daemon=daemon, **settings)
    task_id = client.submit("what is 2 + 2?")["task_id"]
    assert client.wait(task_id, timeout=60)["exit_reason"] == "gate_failed"
    if daemon:
        shutdown(client.spec)
    client.close()

    marker.touch()
    again = pegasus(daemon=daemon, **settings)
    assert again.retry(task_id)["attempts"] == 2
    done = again.wait(task_id, timeout=60)
    assert (done["lifecycle_state"], done["attempts"]) == ("done", 2)
    assert again.stats()["active"] == 0
