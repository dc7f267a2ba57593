"""A database damaged under a running system (issue 28): truncated, or bytes written over it.

Before, the error said the store "resumes by itself" (it never can), ``stats``
got no reply within 30 s and a write was tried every second for ever.  Now the
damage is named with what to do (restore a backup), ``stats`` answers, the log
says it once, no write is tried again and the unfinished tasks are saved beside
the store.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from actors.client import RequestError
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def _truncate(database: Path) -> None:
    os.truncate(database, 0)


def _overwrite_header(database: Path) -> None:
    with open(database, "r+b") as file:
        file.write(os.urandom(100))  # the header: SQLite no longer knows the file


@pytest.mark.parametrize("damage", [_truncate, _overwrite_header], ids=["truncated", "header-overwritten"])
def test_a_database_damaged_under_a_running_system_is_named_and_stats_answers(pegasus, state_dir: Path,
                                                                              tmp_path: Path, free_port: int,
                                                                              subprocess_env: dict[str, str],
                                                                              damage) -> None:
    client = pegasus()
    for task in client.submit_many([f"echo {n}" for n in range(20)]):
        client.wait(task["task_id"])
    client.close()
    client = pegasus()  # a fresh start: the damage is read, not served from a cache
    supervisor = client.stats()["supervisor_pid"]
    waiting = client.submit("sleep 60 and echo unsaved")["task_id"]
    client.backup(tmp_path / "backup.db")
    database = state_dir / "pegasus.db"
    damage(database)

    def refused() -> RequestError | None:
        try:
            client.list(limit=100)
            client.submit("echo after the damage")
        except RequestError as exc:
            return exc
        return None
    error = wait_for(refused, what="a request refused")
    assert error.error_type == "StoreCorrupt", error
    assert f"store {database} is damaged" in str(error) and "cannot resume by itself" in str(error)
    assert "restore a backup" in str(error) and "resumes by itself" not in str(error).replace("cannot resume", "")

    for _ in range(2):  # answered (the client's own timeout), not "no reply within 30s"
        stats = client.stats()
        assert stats["store"]["state"] == "damaged" and stats["store"]["writable"] is False
        assert "pegasus stop" in stats["store"]["action"] and "pegasus start" in stats["store"]["action"]
        assert stats["supervisor_pid"] == supervisor  # not crash-looping
    assert client.store_status()["state"] == "damaged"  # what /healthz shows (with ok false)
    with pytest.raises(RequestError, match="is damaged"):
        client.submit("echo still refused")

    saved = state_dir / "pegasus.db.unsaved-tasks.json"
    wait_for(saved.exists, what="the unfinished tasks saved beside the store")
    assert waiting in {task["task_id"] for task in json.loads(saved.read_text())["tasks"]}
    log = state_dir / "logs" / "pegasus.jsonl"

    def events() -> list[str]:  # a line being written may be cut short: skipped
        return [found.group(1) for found in map(re.compile(r'"event": "(\w+)"').search, log.read_text().splitlines())
                if found]
    wait_for(lambda: "store_tasks_saved" in events(), what="the log saying so (the logger writes on its own time)")
    assert events().count("store_damaged") == 1 and "store_available" not in events(), events()[-20:]

    client.close()  # what the action says: stop, restore the backup, start
    restored = subprocess.run([sys.executable, "-m", "actors.cli", "restore", str(tmp_path / "backup.db")],
                              env={**subprocess_env, "PEGASUS_HOME": str(state_dir),
                                   "PEGASUS_SYSTEM__ADMIN_PORT": str(free_port)},
                              capture_output=True, text=True, timeout=120)
    assert restored.returncode == 0 and "restored 21 tasks" in restored.stdout, restored.stderr
    again = pegasus()
    assert len(again.list()) == 21 and again.get(waiting)["lifecycle_state"] in ("queued", "running")
