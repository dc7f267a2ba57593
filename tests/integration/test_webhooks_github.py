"""GitHub's deliveries through the real gateway and the real CLI (issue 32): a hook made with ``pegasus webhook
add --events``, its ``ping`` answered 200 with no task, a form-encoded ``pull_request`` making a task whose text
names the event, an event the hook does not take answered 200 with no task, saying so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from actors.runtime import procs
from pegasus.triggers.webhooks import sign
from tests.integration.test_http_gateway import _wait_up
from tests.support.cli import start_here

pytestmark = pytest.mark.integration

SECRET = b"it is a secret"


def test_ping_form_encoded_deliveries_and_an_event_filter(cli: Any, tmp_path: Path) -> None:
    port = procs.free_port()
    start_here(cli, http={"enabled": True, "port": port})
    base = f"http://127.0.0.1:{port}"
    _wait_up(base, 60)
    secret_file = tmp_path / "gh.secret"
    secret_file.write_bytes(SECRET + b"\n")
    secret_file.chmod(0o600)
    cli.ok("webhook", "add", "gh", "--text", '{@event}: review "{pull_request.title}"', "--secret-file",
           str(secret_file), "--events", "pull_request,push")
    assert cli.json("webhook", "list")[0]["events"] == ["pull_request", "push"]

    def post(event: str, body: bytes, content_type: str, delivery: str) -> httpx.Response:
        return httpx.post(base + "/v1/webhooks/gh", content=body, timeout=30, headers={
            "X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "User-Agent": "GitHub-Hookshot/044aadd",
            "Content-Type": content_type, "X-Hub-Signature-256": sign(SECRET, body)})

    ping = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    pong = post("ping", ping, "application/json", "d-1")
    assert pong.status_code == 200 and pong.json()["task_id"] is None, pong.text

    pull = json.dumps({"action": "opened", "pull_request": {"title": "Fix the parser"}})
    form = urlencode({"payload": pull}).encode()
    made = post("pull_request", form, "application/x-www-form-urlencoded", "d-2")
    assert made.status_code == 201, made.text
    task = cli.json("status", made.json()["task_id"])
    assert task["input"] == 'pull_request: review "Fix the parser"' and task["metadata"]["event"] == "pull_request"

    skipped = post("issues", pull.encode(), "application/json", "d-3")
    assert skipped.status_code == 200 and skipped.json()["task_id"] is None
    assert "issues" in skipped.json()["message"]
    assert cli.json("list")["total"] == 1  # the ping and the filtered event made none
