"""Poison numbers at every door of a real system (issue 28): the ``pegasus`` command, the Python Client and
the HTTP gateway each refuse them with one clear error naming the field, nothing is stored, and the system
keeps serving with none of its processes replaced.

One system for the module (manual approval: a task waits as a draft, where it takes messages; the caps
are low so a test reaches them quickly).
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from actors import messages as m
from actors.runtime import procs
from actors.client import Client, RequestError
from actors.runtime.system import system_pids
from pegasus.config import Settings
from pegasus.errors import InvalidRequest, WebhookRefused
from pegasus.triggers.webhooks import sign
from tests.integration.conftest import ensure_gone
from tests.integration.test_http_gateway import _wait_up

pytestmark = pytest.mark.integration

MESSAGES_MAX, MESSAGES_MAX_BYTES = 3, 4096
SECRET = b"bounds-secret"
HUGE = "99999999999999999999"


class Door:
    """The system's three doors: ``cli(...)`` runs the real command, ``client``, ``http`` (an admin token)."""

    def __init__(self, client: Client, http_port: int, state: Path) -> None:
        self.client, self.state = client, state
        self.token = client.token_create("bounds", "admin")["token"]
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=60,
                                 headers={"Authorization": f"Bearer {self.token}"})
        self.pids = procs.identities(system_pids(client.spec))
        self.generation = client.generation

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
        env["PEGASUS_HOME"] = str(self.state)
        return subprocess.run(["pegasus", *args, "--port", str(self.client.spec.admin_port)], env=env,
                              capture_output=True, text=True, timeout=120)

    def tasks(self) -> int:
        return int(self.client.list_page(limit=1)["total"])

    def stored_messages(self, task_id: str) -> int:
        with sqlite3.connect(f"file:{self.state / 'pegasus.db'}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT COUNT(*) FROM task_messages WHERE task_id = ?", (task_id,)).fetchone()[0])

    def serves(self) -> None:
        """A following task completes, the supervisor is the same one and every process of the system lives."""
        task = self.client.submit("what is 2 + 3 * 4?")
        self.client.approve(task["task_id"])
        assert self.client.wait(task["task_id"], timeout=60)["lifecycle_state"] == "done"
        assert self.client.locate()["generation"] == self.generation
        gone = [pid for pid, start in self.pids.items() if not procs.is_alive(pid, start)]
        assert not gone, f"processes {gone} of the system died"


def _one_line(result: subprocess.CompletedProcess[str], status: int, *needles: str) -> str:
    """The command failed with ``status`` and its last stderr line names each needle, with no traceback."""
    assert result.returncode == status, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == ""
    line = result.stderr.strip().splitlines()[-1]
    assert all(needle in line for needle in needles), line
    return line


def _error(response: httpx.Response, status: int, code: str, *needles: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and all(needle in error["message"] for needle in needles), error


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    state = tmp_path_factory.mktemp("bounds") / "state"
    state.mkdir()
    http_port = procs.free_port()
    settings = Settings().with_overrides({
        "system": {"admin_port": procs.free_port()}, "state": {"home": str(state)},
        "runtime": {"approval_policy": "manual", "task_messages_max": MESSAGES_MAX,
                    "task_messages_max_bytes": MESSAGES_MAX_BYTES},
        "http": {"enabled": True, "port": http_port}})
    client = Client.start(settings)
    seen = procs.identities(system_pids(client.spec))
    try:
        _wait_up(f"http://127.0.0.1:{http_port}")
        door = Door(client, http_port, state)
        seen.update(door.pids)
        yield door
        door.http.close()
    finally:
        ensure_gone(client.spec, seen, client.asys)


def test_a_priority_of_10_to_the_20_is_refused_at_every_door(door: Door) -> None:
    """``pegasus submit --priority 99999999999999999999`` printed a traceback (issue 28)."""
    before = door.tasks()
    _one_line(door.cli("submit", "--priority", HUGE, "hello"), 2, "--priority", "out of range (0 to 1000000)")
    refused = door.cli("submit", "--priority", HUGE, "hello", "--json")
    assert json.loads(refused.stderr)["error"]["type"] == "UsageError"
    # Refused by the request model the CLI's Client builds (pydantic's error was a traceback): one line, exit 1.
    _one_line(door.cli("message", "some-task", ""), 1, "pegasus: text: String should have at least 1 character")
    with pytest.raises(InvalidRequest, match=r"^priority: Input should be less than or equal to 1000000$") as exc:
        door.client.submit("hello", priority=int(HUGE))
    assert exc.value.field == "priority"
    with pytest.raises(InvalidRequest, match="task 2: priority"):
        door.client.submit_many(["fine", {"text": "hello", "priority": -1}])
    _error(door.http.post("/v1/tasks", json={"text": "hello", "priority": int(HUGE)}), 400, "bad_request",
           "priority: ")
    bypass = m.Submit.model_construct(request_id="", text="hello", machine=None, priority=int(HUGE), metadata={},
                                      source="python", follow=False, key=None)  # past the door: the supervisor's check
    with pytest.raises(RequestError, match="malformed Submit: priority") as upstream:
        door.client._ask(bypass)
    assert upstream.value.error_type == "BadRequest"
    assert door.tasks() == before
    door.serves()


def test_a_page_offset_or_cursor_past_sqlite_integers_is_refused_at_every_door(door: Door) -> None:
    """Client.list(offset=10**20) and a cursor of seq:10**30 were 'internal error: Python int too large to
    convert to SQLite INTEGER' (a 500 over HTTP)."""
    _one_line(door.cli("list", "--offset", HUGE), 2, "--offset", "out of range")
    _one_line(door.cli("list", "--limit", HUGE), 2, "--limit", "out of range")
    for call, field in ((lambda: door.client.list(offset=int(HUGE)), "offset"),
                        (lambda: door.client.list(limit=int(HUGE)), "limit"),
                        (lambda: door.client.list_page(before=int(HUGE)), "before")):
        with pytest.raises(InvalidRequest, match=f"^{field}: "):
            call()
    bypass = m.ListTasks.model_construct(request_id="", state=None, limit=10, offset=int(HUGE), before=None)
    with pytest.raises(RequestError, match="malformed ListTasks: offset") as upstream:
        door.client._ask(bypass)
    assert upstream.value.error_type == "BadRequest"
    cursor = base64.urlsafe_b64encode(f"seq:{10**30}".encode()).decode().rstrip("=")
    _error(door.http.get("/v1/tasks", params={"cursor": cursor}), 400, "bad_request", "cursor")
    _error(door.http.get("/v1/tasks", params={"limit": "²"}), 400, "bad_request", "limit")
    _error(door.http.get("/v1/tasks/x/events", headers={"Last-Event-ID": "9" * 400}), 400, "bad_request",
           "Last-Event-ID")
    door.serves()


def test_a_signed_webhook_with_a_huge_timestamp_or_a_deep_body_is_a_400_and_runs_nothing(door: Door,
                                                                                         tmp_path: Path) -> None:
    """Both were 500s (float overflow; RecursionError in json.loads)."""
    secret_file = tmp_path / "hook.secret"
    secret_file.write_bytes(SECRET)
    secret_file.chmod(0o600)
    door.client.webhook_add("bounds", "hi {a}", secret_file)
    before = door.tasks()
    body, stamp = b'{"a": 1}', 10**400
    timed = {"X-Pegasus-Timestamp": str(stamp), "X-Pegasus-Signature": sign(SECRET, body, stamp)}
    _error(door.http.post("/v1/webhooks/bounds", content=body, headers=timed), 400, "bad_timestamp",
           "x-pegasus-timestamp")
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    _error(door.http.post("/v1/webhooks/bounds", content=deep, headers={"X-Hub-Signature-256": sign(SECRET, deep)}),
           400, "bad_body", "nested more than 32 levels")
    with pytest.raises(WebhookRefused, match="nested more than 32 levels") as refused:
        door.client.deliver_webhook("bounds", {"X-Hub-Signature-256": sign(SECRET, deep)}, deep)
    assert (refused.value.status, refused.value.code) == (400, "bad_body")
    assert door.tasks() == before
    door.serves()


def test_a_task_takes_messages_up_to_its_caps_at_every_door(door: Door) -> None:
    """A task took 3,000 messages of 2 KB (6 MB stored); past ``[runtime] task_messages_max`` (or _bytes) the
    CLI, the Client and HTTP are refused naming the cap, and nothing more is stored."""
    task_id = door.client.submit("wait for my messages")["task_id"]  # a draft (manual approval)
    assert door.cli("message", task_id, "first").returncode == 0
    door.client.message(task_id, "second")
    assert door.http.post(f"/v1/tasks/{task_id}/message", json={"text": "third"}).status_code == 200
    line = _one_line(door.cli("message", task_id, "fourth"), 1, "task_messages_max is 3")
    assert line.startswith("pegasus: task ")
    with pytest.raises(RequestError, match=r"\[runtime\] task_messages_max is 3") as refused:
        door.client.message(task_id, "fourth")
    assert refused.value.error_type == "MessageLimitReached"
    _error(door.http.post(f"/v1/tasks/{task_id}/message", json={"text": "fourth"}), 409, "limit_reached",
           "task_messages_max is 3")
    assert door.stored_messages(task_id) == MESSAGES_MAX
    assert len(door.client.context(task_id).get("messages", [])) in (0, MESSAGES_MAX)  # its context took no more

    other = door.client.submit("and another")["task_id"]
    door.client.message(other, "x" * (MESSAGES_MAX_BYTES - 10))
    with pytest.raises(RequestError, match=r"task_messages_max_bytes is 4096"):
        door.client.message(other, "y" * 11)
    _error(door.http.post(f"/v1/tasks/{other}/message", json={"text": "y" * 11}), 409, "limit_reached",
           "task_messages_max_bytes")
    assert door.stored_messages(other) == 1
    for draft in (task_id, other):
        door.client.cancel(draft)
    door.serves()


def test_a_config_with_inf_or_a_huge_number_is_refused_naming_its_key(tmp_path: Path) -> None:
    """``[pools] tool_timeout_s = inf`` was accepted, then failed the start with 'input_value=None'."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    port = str(procs.free_port())
    for text, key in (("[pools]\ntool_timeout_s = inf\n", "pools.tool_timeout_s: Input should be a finite number"),
                      ("[retry]\nbackoff_s = 1e308\n", "retry.backoff_s: Input should be less than or equal to 86400")):
        (home / "pegasus.toml").write_text(text)
        result = subprocess.run(["pegasus", "start", "--port", port], env={**env, "PEGASUS_HOME": str(home)},
                                capture_output=True, text=True, timeout=120)
        _one_line(result, 1, key)
        assert not (home / "pegasus.db").exists()  # nothing started, nothing stored
