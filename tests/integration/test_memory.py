"""Memory on real systems: the ``pegasus memory`` commands against a running system (write, search, show, forget,
export, import) and with none running, and a plan's memory.write step journalled, run by the supervisor, and read
back by memory.read in the same task."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.client import Client
from actors.runtime.system import stop_daemon
from pegasus import codec
from tests.support.cli import start_here

pytestmark = pytest.mark.integration

FACT = "The deploy key is in the vault."


def test_memory_commands_on_a_running_system_and_without_one(cli: Any, tmp_path: Path) -> None:
    start_here(cli)
    written = cli.json("memory", "write", "ops/deploy-key", FACT)
    assert (written["id"], written["unchanged"]) == ("fact:ops/deploy-key@1", False)
    found, shown, exported = (json.loads(r.stdout) for r in cli.many(
        ("memory", "search", "where is the deploy key?", "--json"), ("memory", "show", "ops/deploy-key", "--json"),
        ("memory", "export", str(tmp_path / "out"), "--json")))
    assert found["items"][0]["id"] == "fact:ops/deploy-key@1" and shown["content"] == FACT
    assert exported["files"] == ["facts/ops/deploy-key.md"]
    file = (tmp_path / "out" / "facts" / "ops" / "deploy-key.md").read_text()
    assert file.startswith("---\npath: ops/deploy-key\nversion: 1\n") and file.endswith(FACT + "\n")
    assert cli.json("memory", "forget", "ops/deploy-key")["forgotten"] == ["fact:ops/deploy-key@1"]
    gone = cli("memory", "show", "ops/deploy-key")
    assert gone.returncode == 1 and "no memory 'fact:ops/deploy-key'" in gone.stderr
    stop_daemon(cli.spec)  # no system from here (`pegasus stop` is tests/integration/test_cli_background.py's)
    # No system: the command opens the store file itself, with the same answers.
    (tmp_path / "bad" / "facts").mkdir(parents=True)
    (tmp_path / "bad" / "facts" / "x.md").write_text("---\ncolour: red\n---\nx\n")
    imported, refused = cli.many(("memory", "import", str(tmp_path / "out"), "--json"),
                                 ("memory", "import", str(tmp_path / "bad")))
    assert json.loads(imported.stdout)["facts_written"] == 1
    assert refused.returncode == 1 and "facts/x.md:2:" in refused.stderr
    assert cli.json("memory", "show", "ops/deploy-key")["content"] == FACT


def test_a_plan_writes_memory_journalled_by_the_supervisor_and_reads_it_back(
        pegasus: Callable[..., Client], state_dir: Path) -> None:
    client = pegasus()
    write = json.dumps({"path": "ops/deploy-key", "content": FACT})
    task = client.submit(f'call memory.write {write} then call memory.read {{"id": "ops/deploy-key"}}')
    done = client.wait(task["task_id"], timeout=60)
    assert done["lifecycle_state"] == "done", done
    assert done["result"].count(FACT) == 2  # written, then read back
    assert client.memory_show("ops/deploy-key")["task_id"] == task["task_id"]
    journal = sqlite3.connect(state_dir / "pegasus.db").execute(
        "SELECT tool, effect, status FROM journal WHERE task_id = ?", (task["task_id"],)).fetchall()
    assert journal == [("memory.write", "idempotent", "finished")]  # memory.read is pure: no row
    steps = _stages(client, task["task_id"])
    assert steps[:2] == [{"pool": "memory", "worker": "supervisor"}] * 2  # write, read; then respond (tool pool)


def _stages(client: Client, task_id: str) -> list[dict[str, Any]]:
    """Who ran each act step of the task (from the transitions' stage details in the store)."""


    rows = sqlite3.connect(client.settings.state_dir() / "pegasus.db").execute(
        "SELECT detail FROM transitions WHERE task_id = ? AND event = 'TOOL_CALL_COMPLETED'", (task_id,)).fetchall()
    found = []
    for (detail,) in rows:
        stage = codec.unpack(detail) or {}  # the stage's answer: its worker's fields
        found.append({key: stage.get(key) for key in ("pool", "worker")})
    return found
