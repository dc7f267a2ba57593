"""No task text reaches the logs on error paths unless ``[logging] content = true`` (issue 15).

Tasks whose text holds a secret fail inside the supervisor, a task actor and a stage
worker (tests.support.faults); every file under ``logs/`` is then searched for it.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from actors.client import RequestError

pytestmark = pytest.mark.integration

FAULTS = {"plugins": ["tests.support.faults:register"]}
ERROR_EVENTS = {"request_failed", "task_actor_error", "stage_failed"}


def provoke_every_error_path(pegasus, state_dir: Path, content: bool,
                             level: str = "info") -> tuple[str, str, set[str]]:
    """(secret, every log file's text, the events logged) after tasks failed in each process kind."""
    secret = f"SECRET-{uuid.uuid4().hex}"
    client = pegasus(tools=FAULTS, logging={"content": content, "level": level})
    with pytest.raises(RequestError, match="internal error"):
        client.submit(f"FAIL-IN-SUBMIT {secret}")
    for marker in ("FAIL-IN-TASK", "FAIL-IN-THINK"):
        task = client.submit(f"{marker} {secret}", metadata={"note": secret})
        assert client.wait(task["task_id"], timeout=60)["lifecycle_state"] == "failed"
    client.close()  # every process has written what it will
    logs = state_dir / "logs"
    text = "".join(path.read_text(errors="replace") for path in sorted(logs.iterdir()) if path.is_file())
    events = {json.loads(line)["event"] for line in (logs / "pegasus.jsonl").read_text().splitlines()}
    return secret, text, events


def test_no_task_text_in_any_log_file_by_default(pegasus, state_dir: Path) -> None:
    secret, text, events = provoke_every_error_path(pegasus, state_dir, content=False)
    assert ERROR_EVENTS <= events  # each error path was taken and logged ...
    assert secret not in text  # ... without the task's text
    assert "<withheld: " in text
    assert "transition" not in events  # a debug line (the task's transitions are in the store: `pegasus logs`)


def test_content_true_lets_task_text_into_the_log(pegasus, state_dir: Path) -> None:
    secret, text, events = provoke_every_error_path(pegasus, state_dir, content=True, level="debug")
    assert ERROR_EVENTS <= events and secret in text
    assert "transition" in events  # the task actor's debug lines, at level debug
    assert "held by a local" not in text  # exception locals: never
