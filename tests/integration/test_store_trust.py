"""Nothing lost silently (issue 15): a deleted or replaced database stops work with a clear error,
a damaged one is named at start with the check it failed, a backup taken while tasks run restores
every task, and an idempotency key makes a retried submit answer the task it created."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from actors.client import RequestError
from actors.runtime.system import SystemStartError, stop_daemon
from pegasus.store import Store
from tests.support.cli import Pegasus, assert_failure, start_here, waited
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TERMINAL = {"done", "failed", "canceled"}



# -- a deleted or replaced database ---------------------------------------------------------------


def test_a_deleted_database_stops_work_with_a_clear_error_and_can_still_be_saved(pegasus, state_dir: Path,
                                                                              tmp_path: Path) -> None:
    client = pegasus()
    finished = [client.submit(f"echo {n}")["task_id"] for n in range(3)]
    for task_id in finished:
        assert client.wait(task_id)["lifecycle_state"] == "done"
    database = state_dir / "pegasus.db"
    database.unlink()
    with pytest.raises(RequestError) as refused:
        client.submit("echo into the void")
    assert refused.value.error_type == "StoreReplaced"
    assert f"store {database} was deleted while the system ran: no work is accepted" in str(refused.value)
    with pytest.raises(RequestError, match="was deleted"):  # and stays refused
        client.submit("echo again")
    assert client.stats()["store"]["writable"] is False
    assert client.get(finished[0])["lifecycle_state"] == "done"  # the open file still answers
    saved = client.backup(tmp_path / "saved.db")  # what the message says to do
    assert saved["tasks"] == 3 and Store(tmp_path / "saved.db").task_row(finished[2])["lifecycle_state"] == "done"


def test_a_replaced_database_stops_work_with_a_clear_error(pegasus, state_dir: Path, tmp_path: Path) -> None:
    client = pegasus()
    assert client.wait(client.submit("echo before")["task_id"])["lifecycle_state"] == "done"
    database = state_dir / "pegasus.db"
    Store(tmp_path / "other.db").close()
    os.replace(tmp_path / "other.db", database)
    with pytest.raises(RequestError, match=f"store {database} was replaced by another file") as refused:
        client.submit("echo after")
    assert refused.value.error_type == "StoreReplaced"


def test_a_restart_after_the_database_was_deleted_is_refused(pegasus, state_dir: Path) -> None:
    client = pegasus()
    assert client.wait(client.submit("echo kept")["task_id"])["lifecycle_state"] == "done"
    client.close()
    for suffix in ("", "-wal", "-shm"):
        (state_dir / f"pegasus.db{suffix}").unlink(missing_ok=True)
    with pytest.raises(SystemStartError, match=f"store {state_dir / 'pegasus.db'} is missing, but this state directory had one"):
        pegasus()


# -- backup and restore ---------------------------------------------------------------------------


def test_a_backup_taken_while_tasks_run_restores_every_task_in_a_new_state_directory(pegasus, tmp_path: Path) -> None:
    client = pegasus(runtime={"max_active_tasks": 2})
    tasks = [t["task_id"] for t in client.submit_many([f"sleep 0.3 and echo {n}" for n in range(8)])]
    wait_for(lambda: client.get(tasks[0])["lifecycle_state"] == "done", what="the first task done")
    states = {t: client.get(t)["lifecycle_state"] for t in tasks}
    assert "done" in states.values() and set(states.values()) - TERMINAL, states  # some done, some not yet
    target = tmp_path / "backups" / "pegasus-backup.db"
    target.parent.mkdir()
    report = client.backup(target)
    assert report["tasks"] == 8 and report["path"] == str(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with pytest.raises(RequestError, match="exists: give --force"):
        client.backup(target)
    client.close()

    restored = tmp_path / "restored"  # the recipe: a stopped system, the copy put in place, start
    restored.mkdir()
    shutil.copy(target, restored / "pegasus.db")
    again = pegasus(state={"home": str(restored)})
    for task_id in tasks:  # every task is there; those unfinished at the backup finish now
        assert again.wait(task_id, timeout=60)["lifecycle_state"] == "done"
    assert len(again.list()) == 8


# -- a damaged database at start ------------------------------------------------------------------


def _filled_store(path: Path) -> None:
    store = Store(path)
    with store.group():
        for n in range(150):
            store.db.execute("INSERT INTO audit (audit_id, task_id, level, event_type, payload, created_at)"
                             " VALUES (?, 't', 'info', 'X', ?, 'now')", (f"a{n}", "x" * 300))
    store.close()


@pytest.mark.parametrize("damage, check", [
    ("garbage", "file header"), ("page", "PRAGMA quick_check"), ("newer", "schema version"),
])
def test_start_on_a_damaged_database_names_the_file_and_the_check(cli: Pegasus, damage: str, check: str) -> None:
    database = cli.home / "pegasus.db"
    _filled_store(database)
    if damage == "garbage":
        database.write_bytes(os.urandom(8192))
    elif damage == "page":
        data = bytearray(database.read_bytes())
        data[3 * 4096:4 * 4096] = b"\xa5" * 4096
        database.write_bytes(bytes(data))
    else:
        with sqlite3.connect(database) as db:
            db.execute("PRAGMA user_version = 99")
    result = cli("start", timeout=60)
    cli.track()
    assert_failure(result, f"store {database} failed the check {check}")


# -- the CLI: backup and submit --key --------------------------------------------------------------


def test_cli_backup_from_a_running_system_and_without_one(cli: Pegasus, tmp_path: Path) -> None:
    start_here(cli)
    with cli.client() as client:  # set up through a client: backup is the command here
        task_id = client.submit("echo kept")["task_id"]
        waited(client, task_id, {"done"})
    target = tmp_path / "cli-backup.db"
    report = json.loads(cli.ok("backup", str(target), "--json"))
    assert report["tasks"] == 1 and report["path"] == str(target)
    assert_failure(cli("backup", str(target)), f"{target} exists: give --force")
    assert "backup written" in cli.ok("backup", str(target), "--force")
    stop_daemon(cli.spec)  # no system now (`pegasus stop` is tests/integration/test_cli_background.py's)
    offline = tmp_path / "offline.db"
    assert "(1 tasks" in cli.ok("backup", str(offline))  # no system: read from the file
    assert Store(offline).task_row(task_id)["lifecycle_state"] == "done"


def test_cli_after_the_database_was_deleted_submit_fails_and_stats_says_why(cli: Pegasus) -> None:
    start_here(cli)
    (cli.home / "pegasus.db").unlink()
    assert_failure(cli("submit", "echo lost"), f"store {cli.home / 'pegasus.db'} was deleted while the system ran")
    assert "store:   takes no writes: store " in cli.ok("stats")


def test_cli_submit_with_a_key_twice_creates_one_task(cli: Pegasus, tmp_path: Path) -> None:
    start_here(cli)
    first = cli("submit", "echo once", "--key", "deploy-42")
    assert first.returncode == 0 and first.stderr == ""
    again = cli("submit", "echo once", "--key", "deploy-42")
    assert again.returncode == 0 and again.stdout == first.stdout
    assert "key 'deploy-42' was used before" in again.stderr
    assert_failure(cli("submit", "echo something else", "--key", "deploy-42"),
                   "idempotency key 'deploy-42' was used for task")
    assert_failure(cli("submit", "echo x", "--key", ""), "--key must be 1 to")
    lines = tmp_path / "tasks.txt"
    lines.write_text("echo a\necho b\n")
    ids = cli.ok("submit", "--file", str(lines), "--key", "batch-1").split()
    assert cli.ok("submit", "--file", str(lines), "--key", "batch-1").split() == ids  # a re-run adds none
    with cli.client() as client:
        assert client.list_page(limit=1)["total"] == 3


# -- idempotency keys -------------------------------------------------------------------------------


def test_a_key_answers_the_task_it_created_also_after_a_restart(pegasus) -> None:
    client = pegasus()
    first = client.submit("echo once", key="order-1")
    assert first["existing"] is False
    again = client.submit("echo once", key="order-1")  # a client retrying after a timeout
    assert (again["task_id"], again["existing"]) == (first["task_id"], True)
    with pytest.raises(RequestError, match=f"'order-1' was used for task {first['task_id']} with other content") as clash:
        client.submit("echo twice", key="order-1")
    assert clash.value.error_type == "IdempotencyConflict"

    batch = client.submit_many([{"text": "echo once", "key": "order-1"}, {"text": "echo b", "key": "order-2"},
                                {"text": "echo b", "key": "order-2"}, "echo without a key"])
    assert [b["existing"] for b in batch] == [True, False, True, False]
    assert batch[0]["task_id"] == first["task_id"] and batch[2]["task_id"] == batch[1]["task_id"]
    with pytest.raises(RequestError, match="task 2: idempotency key 'order-1' was used"):  # all or none
        client.submit_many([{"text": "echo c", "key": "order-3"}, {"text": "echo other", "key": "order-1"}])
    with pytest.raises(RequestError, match="task 2: idempotency key 'order-4' is given twice"):
        client.submit_many([{"text": "echo d", "key": "order-4"}, {"text": "echo e", "key": "order-4"}])
    assert len(client.list()) == 3
    assert client.wait(first["task_id"])["lifecycle_state"] == "done"
    client.close()

    restarted = pegasus()
    after = restarted.submit("echo once", key="order-1")
    assert (after["task_id"], after["existing"], after["lifecycle_state"]) == (first["task_id"], True, "done")
    assert len(restarted.list()) == 3
