"""Webhook deliveries through Client.deliver_webhook on a real system: a validly signed delivery makes one task;
a bad or missing signature, a replayed timestamp and a redelivery make no other."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from actors.client import Client, RequestError
from pegasus.errors import WebhookRefused
from pegasus.triggers.webhooks import sign

pytestmark = pytest.mark.integration

BODY = json.dumps({"action": "opened", "pull_request": {"title": "Fix the parser", "number": 12}}).encode()


def task_count(client: Client) -> int:
    return client.list_page()["total"]


def refused(client: Client, name: str, headers: dict[str, str], body: bytes = BODY) -> WebhookRefused:
    with pytest.raises(WebhookRefused) as info:
        client.deliver_webhook(name, headers, body)
    return info.value


def test_a_signed_delivery_makes_one_task_and_nothing_else_makes_another(pegasus, tmp_path: Path) -> None:
    client = pegasus()
    secret_file = tmp_path / "gh.secret"
    secret_file.write_bytes(b"it is a secret\n")
    secret_file.chmod(0o600)
    view = client.webhook_add("gh", 'Review "{pull_request.title}" (#{pull_request.number})', secret_file)
    assert view["secret_file"] == str(secret_file) and "secret" not in json.dumps(client.webhooks()).replace(
        "secret_file", "").replace(str(secret_file), "")
    secret = b"it is a secret"
    headers = {"X-Hub-Signature-256": sign(secret, BODY), "X-GitHub-Delivery": "72d3162e-1"}

    task = client.deliver_webhook("gh", headers, BODY)
    assert not task["existing"] and task_count(client) == 1
    done = client.get(task["task_id"])
    assert (done["input"], done["source"]) == ('Review "Fix the parser" (#12)', "WEBHOOK_TRIGGERED")
    assert done["metadata"]["body"] == json.loads(BODY) and done["metadata"]["delivery"] == "72d3162e-1"

    again = client.deliver_webhook("gh", headers, BODY)  # GitHub redelivers with the same delivery id
    assert again["task_id"] == task["task_id"] and again["existing"]
    missing = refused(client, "gh", {})
    bad = refused(client, "gh", {**headers, "X-Hub-Signature-256": sign(b"guess", BODY), "X-GitHub-Delivery": "2"})
    tampered = refused(client, "gh", {**headers, "X-GitHub-Delivery": "3"}, BODY.replace(b"Fix", b"Own"))
    old = int(time.time()) - 301
    replayed = refused(client, "gh", {"X-Pegasus-Timestamp": str(old), "X-Pegasus-Signature": sign(secret, BODY, old)})
    unknown = refused(client, "gitlab", headers)
    assert [(e.status, e.code) for e in (missing, bad, tampered, replayed, unknown)] == [
        (401, "bad_signature"), (401, "bad_signature"), (401, "bad_signature"), (401, "replayed"),
        (404, "unknown_webhook")]
    assert task_count(client) == 1  # none of them made a task

    # The timestamped form: a fresh one makes a task; its replay inside the window answers the same task.
    now = int(time.time())
    timed = {"X-Pegasus-Timestamp": str(now), "X-Pegasus-Signature": sign(secret, BODY, now)}
    first = client.deliver_webhook("gh", timed, BODY)
    assert client.deliver_webhook("gh", timed, BODY)["task_id"] == first["task_id"] and task_count(client) == 2


def test_a_missing_template_field_names_it_and_bad_webhooks_are_refused(pegasus, tmp_path: Path) -> None:
    client = pegasus()
    view = client.webhook_add("ci", "Build {repository.full_name} at {after}")
    path = Path(view["secret_file"])
    assert path.is_relative_to(client.settings.state_dir()) and stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = path.read_bytes().strip()
    body = json.dumps({"after": "abc123"}).encode()
    error = refused(client, "ci", {"X-Hub-Signature-256": sign(secret, body)}, body)
    assert (error.status, error.code) == (400, "missing_field") and "repository.full_name" in str(error)
    not_json = b"after=abc"
    assert refused(client, "ci", {"X-Hub-Signature-256": sign(secret, not_json)}, not_json).code == "bad_body"
    assert task_count(client) == 0

    readable = tmp_path / "shared.secret"
    readable.write_text("s")
    os.chmod(readable, 0o644)
    with pytest.raises(RequestError, match="chmod 600"):
        client.webhook_add("leaky", "x", readable)
    with pytest.raises(RequestError, match="stray"):
        client.webhook_add("braces", "a } b")
    with pytest.raises(RequestError, match="exists"):
        client.webhook_add("ci", "again")
    assert [w["name"] for w in client.webhooks()] == ["ci"]
    assert client.webhook_remove("ci")["removed"] and not path.exists()  # the secret made for it goes with it
    assert client.webhooks() == []
