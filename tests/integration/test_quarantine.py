"""Quarantine on a real system (issue 28): rows written into the SQLite file as an old version or a bug would have
-- messages that will not decode, a checkpoint that raises on rebuild, a task row that will not decode,
post-reflection rows that will not read, a webhook whose template is not text -- neither stop the start nor restart
the supervisor: each is set aside with its error (stats, status, list), its one task failed or going on without
it, and a new task is served to completion."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pegasus import codec
from pegasus.admission import Admission
from pegasus.config import Settings
from pegasus.errors import WebhookRefused
from pegasus.store import Store
from tests.support.cli import Pegasus

pytestmark = pytest.mark.integration

BAD_DELTA = codec.pack({"format": 1, "delta": {"k": "not a dict of edits"}})  # AttributeError in delta.apply
DONE_ROW = ("INSERT INTO tasks (task_id, machine, lifecycle_state, cognitive_state, priority, seq, input, source, "
            "created_at, updated_at) VALUES (?, 'classic', 'done', 'completed', 5, ?, 'x', 'cli', 'then', 'then')")


def test_poisoned_rows_are_quarantined_and_the_same_supervisor_serves(pegasus: Any, state_dir: Path,
                                                                      tmp_path: Path) -> None:
    """On eb89c12 this system did not start: Configure raised out of restore (Could not decode to UTF-8, then
    AttributeError in a delta, then the reflector's rebuild of a done task with no checkpoint)."""
    admission = Admission(Settings().with_overrides({"state": {"home": str(state_dir)}}),
                          store=Store(state_dir / "pegasus.db"))
    talk, _ = admission.submit("echo hi", "classic", 5, {}, "cli")  # running when "the system died"
    broken, _ = admission.submit("echo broken", "classic", 5, {}, "cli")
    undecodable, _ = admission.submit("echo undecodable", "classic", 5, {}, "cli")
    admission.store.add_message(talk.task_id, "echo the good one")
    admission.store.close()
    with sqlite3.connect(state_dir / "pegasus.db") as db:
        db.execute("INSERT INTO task_messages (task_id, seq, text, created_at) VALUES (?, 2, CAST(X'FF41' AS TEXT), "
                   "'then')", (talk.task_id,))  # not UTF-8
        db.execute("INSERT INTO task_messages (task_id, seq, text, created_at) VALUES (?, 3, X'6869', 'then')",
                   (talk.task_id,))  # bytes, not text
        db.execute("INSERT INTO checkpoints (task_id, run, kind, state, data, created_at) VALUES (?, 1, 'delta', "
                   "'thinking', ?, 'then')", (broken.task_id, BAD_DELTA))
        db.execute("UPDATE tasks SET metadata = X'C1' WHERE task_id = ?", (undecodable.task_id,))
        db.execute("INSERT INTO webhooks (name, template, secret, created_at) VALUES ('odd', CAST(X'FF7B787D' AS "
                   "TEXT), X'00', 'then')")  # a template that is not UTF-8: `webhook list` failed for everyone
        db.execute(DONE_ROW, ("unreflected", 1000))  # done, no checkpoint: its reflection cannot rebuild it
        db.execute(DONE_ROW, ("odd-reflection", 1001))
        db.execute("INSERT INTO post_reflections (task_id, status, attempts, updated_at) VALUES "
                   "('odd-reflection', 'running', 'x', 'then')")  # attempts that are not a number

    client = pegasus()
    generation, pid = client.locate()["generation"], client.stats()["supervisor_pid"]
    task = client.submit("echo new")
    assert client.wait(task["task_id"], timeout=60)["lifecycle_state"] == "done"
    talked = client.wait(talk.task_id, timeout=60)  # went on without the bad messages
    assert talked["lifecycle_state"] == "done", talked
    assert [m["content"] for m in talked["messages"]] == ["echo the good one"]
    assert [m["number"] for m in talked["messages_quarantined"]] == ["2", "3"]
    assert "UnicodeDecodeError" in talked["messages_quarantined"][0]["error"]
    for task_id, error in ((broken.task_id, "AttributeError"), (undecodable.task_id, "FormatError")):
        failed = client.get(task_id)  # shown, the column that will not decode as None
        assert (failed["lifecycle_state"], failed["exit_reason"]) == ("failed", "fatal_error")
        assert failed["error"].startswith("quarantined: ") and error in failed["error"], failed
    for task_id in ("unreflected", "odd-reflection"):
        reflection = client.get(task_id)["post_reflection"]
        assert reflection["status"] == "failed" and reflection["error"].startswith("quarantined: "), reflection

    client.webhook_add("good", text="echo {x}")
    assert [(w["name"], bool(w["quarantined"])) for w in client.webhooks()] == [("good", False), ("odd", True)]
    with pytest.raises(WebhookRefused, match="quarantined: UnicodeDecodeError") as refused:
        client.deliver_webhook("odd", {}, b"{}")
    assert refused.value.status == 409

    cli = Pegasus(port=client.spec.admin_port, home=state_dir, cwd=tmp_path)
    stats, status, listed = cli.many(["stats", "--json"], ["status", talk.task_id], ["list", "--json"])
    assert stats.returncode == status.returncode == listed.returncode == 0, (stats.stderr, status.stderr)
    quarantined = json.loads(stats.stdout)["quarantined"]
    assert [q["name"] for q in quarantined["messages"]] == [f"{talk.task_id}#2", f"{talk.task_id}#3"]
    assert {q["name"] for q in quarantined["tasks"]} == {broken.task_id, undecodable.task_id}
    states = {t["task_id"]: (t["lifecycle_state"], t["exit_reason"]) for t in json.loads(listed.stdout)["tasks"]}
    assert states[undecodable.task_id] == states[broken.task_id] == ("failed", "fatal_error")
    assert "3 QUARANTINED: quarantined: ValueError: message 3 is stored as blob" in status.stdout
    assert (client.locate()["generation"], client.stats()["supervisor_pid"]) == (generation, pid)  # never restarted
