"""The HTTP gateway of a real system, through httpx on 127.0.0.1: every route, every error status, SSE with
reconnect and Last-Event-ID, idempotent submit, scopes, revoked tokens, a 10 MB body refused before it is read.

One system for the module (manual approval, so a test decides when a task runs; each offline stage takes
``LATENCY_MS``, so a task runs long enough to be seen running).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.runtime import procs
from actors.client import Client
from actors.runtime.system import system_pids
from pegasus.config import Settings
from tests.integration.conftest import ensure_gone

pytestmark = pytest.mark.integration

LATENCY_MS = 150


class Api:
    """The gateway's address, the system's client, and a token of each scope."""

    def __init__(self, client: Client, port: int) -> None:
        self.client, self.port = client, port
        self.base = f"http://127.0.0.1:{port}"
        self.tokens = {scope: client.token_create(f"test-{scope}", scope)["token"]
                       for scope in ("read", "submit", "admin")}
        self.http = httpx.Client(base_url=self.base, timeout=30)

    def auth(self, scope: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[scope]}"}

    def get(self, path: str, scope: str = "read", **kwargs: Any) -> httpx.Response:
        return self.http.get(path, headers={**self.auth(scope), **kwargs.pop("headers", {})}, **kwargs)

    def post(self, path: str, scope: str = "admin", **kwargs: Any) -> httpx.Response:
        return self.http.post(path, headers={**self.auth(scope), **kwargs.pop("headers", {})}, **kwargs)

    def submit(self, text: str = "what is 2 + 3 * 4?", **kwargs: Any) -> dict[str, Any]:
        response = self.post("/v1/tasks", "submit", json={"text": text}, **kwargs)
        assert response.status_code in (200, 201), response.text
        return dict(response.json())


def _wait_up(base: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gateway at {base} did not answer within {timeout}s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    state = tmp_path_factory.mktemp("http") / "state"
    state.mkdir()
    port = procs.free_port()
    settings = Settings().with_overrides({
        "system": {"admin_port": procs.free_port()}, "state": {"home": str(state)},
        "runtime": {"approval_policy": "manual", "max_active_tasks": 1, "max_pending_tasks": 1},
        "cognition": {"latency_ms": LATENCY_MS}, "http": {"enabled": True, "port": port, "max_body_bytes": 65536}})
    client = Client.start(settings)
    seen = procs.identities(system_pids(client.spec))
    try:
        api = Api(client, port)
        _wait_up(api.base)
        seen.update(procs.identities(system_pids(client.spec)))
        yield api
        api.http.close()
    finally:
        ensure_gone(client.spec, seen, client.asys)


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return str(body["error"]["message"])


def _finish(api: Api, task_id: str) -> dict[str, Any]:
    return api.client.wait(task_id, timeout=60)


# -- health, auth, scopes --------------------------------------------------------------------------------

def test_healthz_needs_no_token_and_every_other_route_does(api: Api) -> None:
    """/healthz answers without a token; the rest answer 401 (with a Bearer challenge) without one."""
    assert api.http.get("/healthz").json()["ok"] is True
    for method, path in (("GET", "/v1/tasks"), ("GET", "/v1/stats"), ("GET", "/metrics"), ("GET", "/openapi.json"),
                         ("POST", "/v1/tasks"), ("GET", "/v1/tasks/x/events"), ("GET", "/v1/machines")):
        response = api.http.request(method, path)
        _error(response, 401, "unauthorized")
        assert response.headers["www-authenticate"].startswith("Bearer")
    _error(api.http.get("/v1/tasks", headers={"Authorization": "Bearer pgs_not-a-token"}), 401, "unauthorized")
    _error(api.http.get("/v1/tasks", headers={"Authorization": "Basic dXNlcjpwYXNz"}), 401, "unauthorized")


def test_a_read_token_cannot_submit_and_a_submit_token_cannot_cancel(api: Api) -> None:
    assert "scope 'read'" in _error(api.post("/v1/tasks", "read", json={"text": "no"}), 403, "forbidden")
    task = api.submit()
    _error(api.post(f"/v1/tasks/{task['task_id']}/cancel", "submit"), 403, "forbidden")
    assert api.post(f"/v1/tasks/{task['task_id']}/cancel", "admin").json()["lifecycle_state"] == "canceled"


def test_a_revoked_token_is_refused_from_the_next_request_on(api: Api) -> None:
    token = api.client.token_create("soon-revoked", "read")["token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert api.http.get("/v1/stats", headers=headers).status_code == 200
    assert api.client.token_revoke("soon-revoked")["revoked_at"]
    assert "revoked" in _error(api.http.get("/v1/stats", headers=headers), 401, "unauthorized")
    listed = {row["name"]: row for row in api.client.token_list()}
    assert listed["soon-revoked"]["revoked_at"] and "token_hash" not in listed["soon-revoked"]


# -- tasks -------------------------------------------------------------------------------------------------

def test_submit_get_history_and_an_idempotent_retry(api: Api) -> None:
    """201 for a new task, 200 and the same task for a key used before, 409 for the key with other text."""
    first = api.post("/v1/tasks", "submit", json={"text": "idempotent", "priority": 3, "metadata": {"k": 1}},
                     headers={"Idempotency-Key": "key-1"})
    assert first.status_code == 201 and first.json()["existing"] is False
    again = api.post("/v1/tasks", "submit", json={"text": "idempotent", "priority": 3, "metadata": {"k": 1}},
                     headers={"Idempotency-Key": "key-1"})
    assert again.status_code == 200 and again.json()["task_id"] == first.json()["task_id"] and again.json()["existing"]
    _error(api.post("/v1/tasks", "submit", json={"text": "other"}, headers={"Idempotency-Key": "key-1"}),
           409, "idempotency_conflict")
    task_id = first.json()["task_id"]
    view = api.get(f"/v1/tasks/{task_id}").json()
    assert (view["source"], view["priority"], view["metadata"], view["lifecycle_state"]) == ("http", 3, {"k": 1}, "draft")
    history = api.get(f"/v1/tasks/{task_id}/history").json()
    assert [t["to_state"] for t in history["lifecycle"]] == ["draft"]
    api.post(f"/v1/tasks/{task_id}/cancel")


def test_a_task_is_named_by_a_unique_prefix_of_its_id(api: Api) -> None:
    """Issue 31: the 8-character ids the dashboard and ``watch`` show work in every route."""
    task_id = api.submit("named by a prefix")["task_id"]
    short = task_id[:8]
    assert api.get(f"/v1/tasks/{short}").json()["task_id"] == task_id
    assert api.get(f"/v1/tasks/{short}/history").json()["task_id"] == task_id
    canceled = api.post(f"/v1/tasks/{short}/cancel")
    assert canceled.status_code == 200 and canceled.json()["task_id"] == task_id, canceled.text
    with api.http.stream("GET", f"/v1/tasks/{short}/events", headers=api.auth("read")) as events:
        assert events.status_code == 200
        assert all(event["data"]["task_id"] == task_id for event in _events(events))


@pytest.mark.parametrize("body,field", [({}, "text"), ({"text": ""}, "text"), ({"text": "x", "priority": -1}, "priority"),
                                         ({"text": "x", "machine": "nope"}, "machine"), ({"text": "x", "color": 1}, "color")])
def test_bad_input_is_a_400_naming_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    assert _error(api.post("/v1/tasks", "submit", json=body), 400, "bad_request").startswith(field)


def test_bad_json_a_bad_state_and_a_bad_cursor_are_400s(api: Api) -> None:
    _error(api.post("/v1/tasks", "submit", content=b"{not json", headers={"Content-Type": "application/json"}),
           400, "bad_request")
    _error(api.get("/v1/tasks", params={"state": "sleeping"}), 400, "bad_request")
    assert _error(api.get("/v1/tasks", params={"cursor": "???"}), 400, "bad_request").startswith("cursor")
    assert _error(api.get("/v1/tasks", params={"limit": "0"}), 400, "bad_request").startswith("limit")


def test_unknown_tasks_and_routes_are_404s(api: Api) -> None:
    for path in ("/v1/tasks/nope", "/v1/tasks/nope/history", "/v1/tasks/nope/events"):
        assert "nope" in _error(api.get(path), 404, "not_found")
    _error(api.post("/v1/tasks/nope/approve"), 404, "not_found")
    _error(api.get("/v1/nothing-here"), 404, "not_found")


def test_list_pages_newest_first_with_a_cursor_that_new_tasks_do_not_shift(api: Api) -> None:
    ids = [api.submit(f"page {n}")["task_id"] for n in range(3)]
    first = api.get("/v1/tasks", params={"state": "draft", "limit": 2}).json()
    assert [t["task_id"] for t in first["tasks"]] == ids[::-1][:2] and first["next_cursor"]
    api.submit("newer than the cursor")  # would shift an offset page
    second = api.get("/v1/tasks", params={"state": "draft", "limit": 2, "cursor": first["next_cursor"]}).json()
    assert second["tasks"][0]["task_id"] == ids[0]
    for task in api.get("/v1/tasks", params={"state": "draft", "limit": 100}).json()["tasks"]:
        api.post(f"/v1/tasks/{task['task_id']}/cancel")


def test_lifecycle_actions_and_illegal_transitions(api: Api) -> None:
    """approve, suspend, resume, cancel answer the task; what its state does not allow is a 409."""
    task_id = api.submit()["task_id"]
    _error(api.post(f"/v1/tasks/{task_id}/suspend"), 409, "invalid_transition")  # a draft is not running
    _error(api.post(f"/v1/tasks/{task_id}/retry"), 409, "invalid_transition")
    assert api.post(f"/v1/tasks/{task_id}/approve").json()["task_id"] == task_id
    _error(api.post(f"/v1/tasks/{task_id}/approve"), 409, "invalid_transition")
    api.client.wait(task_id, timeout=60, until=frozenset({"running"}))
    suspended = api.post(f"/v1/tasks/{task_id}/suspend", json={"reason": "a test"})
    assert suspended.status_code == 200 and suspended.json()["lifecycle_state"] == "blocked", suspended.text
    assert api.post(f"/v1/tasks/{task_id}/resume", "submit", json={}).status_code == 200
    assert _finish(api, task_id)["lifecycle_state"] == "done"
    _error(api.post(f"/v1/tasks/{task_id}/cancel", json={"reason": "too late"}), 409, "invalid_transition")
    _error(api.post(f"/v1/tasks/{task_id}/resume", "submit"), 409, "invalid_transition")
    _error(api.post(f"/v1/tasks/{task_id}/approve", json={"unexpected": 1}), 400, "bad_request")


def test_a_full_queue_is_a_429(api: Api) -> None:
    """max_active_tasks 1, max_pending_tasks 1: one running, one queued, the next submit is refused."""
    running, queued = api.submit("sleep 15")["task_id"], api.submit("waits")["task_id"]
    api.post(f"/v1/tasks/{running}/approve")
    api.post(f"/v1/tasks/{queued}/approve")
    try:
        api.client.wait(running, timeout=60, until=frozenset({"running"}))
        response = api.post("/v1/tasks", "submit", json={"text": "no room"})
        assert api.client.get(running)["lifecycle_state"] == "running"  # the queue was full all along
        assert "limit is 1" in _error(response, 429, "queue_full")
    finally:
        for task_id in (queued, running):
            api.post(f"/v1/tasks/{task_id}/cancel")


@pytest.mark.skipif(not hasattr(Client, "message"), reason="needs i20-messages (Client.message)")
def test_message_reaches_a_task(api: Api) -> None:
    task_id = api.submit("talk to me")["task_id"]
    response = api.post(f"/v1/tasks/{task_id}/message", "submit", json={"text": "hello"})
    assert response.status_code in (200, 409), response.text
    api.post(f"/v1/tasks/{task_id}/cancel")


def test_message_without_the_operation_is_a_501_and_checks_its_body(api: Api) -> None:
    _error(api.post("/v1/tasks/x/message", "submit", json={}), 400, "bad_request")
    if not hasattr(Client, "message"):
        _error(api.post("/v1/tasks/x/message", "submit", json={"text": "hi"}), 501, "not_implemented")


# -- bodies ------------------------------------------------------------------------------------------------

def _raw_response(port: int, head: bytes, body: bytes) -> tuple[int, bytes]:
    """Send a request's head and the start of its body on a raw socket; the status and what came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body)
        received = b""
        while True:
            head_end = received.find(b"\r\n\r\n")
            if head_end >= 0:
                length = [int(line.split(b":")[1]) for line in received[:head_end].lower().split(b"\r\n")
                          if line.startswith(b"content-length:")]
                if len(received) >= head_end + 4 + (length[0] if length else 0):
                    break
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        return int(received.split(b" ", 2)[1]), received


def test_a_10_mb_body_is_refused_before_it_is_read(api: Api) -> None:
    """The Content-Length says 10 MB; only 1 KB is ever sent, and the 413 comes anyway."""
    head = (f"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {api.tokens['submit']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {10 * 1024 * 1024}\r\n\r\n").encode()
    status, received = _raw_response(api.port, head, b"x" * 1024)
    assert status == 413 and b"too_large" in received


def test_a_chunked_body_over_the_limit_is_cut_off(api: Api) -> None:
    head = (f"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {api.tokens['submit']}\r\n"
            f"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    chunk = b"y" * 32768
    body = b"".join(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in range(3))
    status, received = _raw_response(api.port, head, body)
    assert status == 413 and b"too_large" in received


# -- events ------------------------------------------------------------------------------------------------

def _events(response: httpx.Response, stop_after: int | None = None) -> Iterator[dict[str, Any]]:
    """The SSE events of a streamed response: id (None without one), event, data (parsed)."""
    event: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if "data" in event:
                yield {"id": event.get("id"), "event": event.get("event"), "data": json.loads(event["data"])}
            event = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(": ")
        event[name] = int(value) if name == "id" else value


def _transitions(api: Api, task_id: str, last_event_id: int | None = None,
                 take: int | None = None) -> list[dict[str, Any]]:
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    seen: list[dict[str, Any]] = []
    with api.http.stream("GET", f"/v1/tasks/{task_id}/events", headers={**api.auth("read"), **headers}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for event in _events(response):
            if event["event"] == "end":
                break
            if event["event"] == "transition":
                seen.append(event)
                if take is not None and len(seen) >= take:
                    break
    return seen


def test_events_stream_live_and_resume_with_last_event_id(api: Api) -> None:
    """A stream read partly, closed, and resumed with Last-Event-ID gives every transition once, in order,
    ids consecutive from 1, the same as the whole stream read again later (from the store)."""
    task_id = api.submit()["task_id"]
    with api.http.stream("GET", f"/v1/tasks/{task_id}/events", headers=api.auth("read")) as response:
        events = _events(response)
        first = next(events)
        assert (first["id"], first["data"]["to_state"]) == (1, "draft")
        api.post(f"/v1/tasks/{task_id}/approve")  # live from here on
        head = [first] + [next(events) for _ in range(3)]
    assert [e["id"] for e in head] == [1, 2, 3, 4]
    tail = _transitions(api, task_id, last_event_id=head[-1]["id"])
    assert _finish(api, task_id)["lifecycle_state"] == "done"
    whole = _transitions(api, task_id)
    assert [e["id"] for e in whole] == list(range(1, len(whole) + 1))
    assert [e["id"] for e in head + tail] == [e["id"] for e in whole]
    strip = [(e["data"]["machine"], e["data"]["from_state"], e["data"]["to_state"], e["data"]["event"])
             for e in head + tail]
    assert strip == [(e["data"]["machine"], e["data"]["from_state"], e["data"]["to_state"], e["data"]["event"])
                     for e in whole]
    history = api.get(f"/v1/tasks/{task_id}/history").json()
    assert len(whole) == len(history["lifecycle"]) + len(history["cognitive"])
    assert _transitions(api, task_id, last_event_id=len(whole)) == []
    _error(api.get(f"/v1/tasks/{task_id}/events", headers={"Last-Event-ID": "abc"}), 400, "bad_request")


# -- the system --------------------------------------------------------------------------------------------

def test_stats_machines_metrics_and_openapi(api: Api) -> None:
    stats = api.get("/v1/stats").json()
    assert {"tasks", "queue_length", "pools"} <= set(stats)
    assert {m["name"] for m in api.get("/v1/machines").json()} >= {"classic", "reason_act", "lifecycle"}
    task_id = api.submit()["task_id"]
    api.get("/metrics")  # the first scrape starts watching transitions (stage latencies): it answers once subscribed
    api.post(f"/v1/tasks/{task_id}/approve")
    _finish(api, task_id)
    metrics = api.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    for name in ("pegasus_tasks{state=\"done\"}", "pegasus_queue_length", "pegasus_pool_workers{pool=\"llm\",status=\"idle\"}",
                 "pegasus_stage_seconds_bucket{", "pegasus_model_tokens"):
        assert name in metrics.text, name
    document = api.get("/openapi.json").json()
    assert document["openapi"].startswith("3.") and "/v1/tasks/{task_id}/events" in document["paths"]
    assert "SubmitBody" in document["components"]["schemas"]


def test_the_gateway_is_a_process_of_the_system_and_comes_back_when_killed(api: Api) -> None:
    """Killed, the gateway is started again by its keeper; it is among the system's processes (stop ends it)."""
    pid = procs.listener_pid(api.port, system_pids(api.client.spec))
    assert pid is not None, "the gateway is not among the system's processes"
    procs.kill_all({pid: procs.read_stat(pid).starttime}, grace=0)  # type: ignore[union-attr]
    _wait_up(api.base)
    assert procs.listener_pid(api.port, system_pids(api.client.spec)) not in (None, pid)
    assert api.get("/v1/stats").status_code == 200


@pytest.mark.skipif(not hasattr(Client, "deliver_webhook"), reason="needs i21-schedules (Client.deliver_webhook)")
def test_a_signed_webhook_makes_one_task_without_a_token_and_refusals_keep_their_status(api: Api, tmp_path: Path) -> None:
    """POST /v1/webhooks/NAME (no bearer token: the signature is the authentication): 201 and a task, the
    redelivery 200 and the same task; a bad signature 401, a missing template field 400, an unknown webhook 404."""
    from pegasus.triggers.webhooks import sign

    secret_file = tmp_path / "gh.secret"
    secret_file.write_bytes(b"http secret\n")
    secret_file.chmod(0o600)
    api.client.webhook_add("gh-http", 'Review "{pull_request.title}"', secret_file)
    body = json.dumps({"pull_request": {"title": "Fix the parser"}}).encode()
    headers = {"X-Hub-Signature-256": sign(b"http secret", body), "X-GitHub-Delivery": "d-1",
               "Content-Type": "application/json"}
    first = api.http.post("/v1/webhooks/gh-http", content=body, headers=headers)
    assert first.status_code == 201, first.text
    task = api.client.get(first.json()["task_id"])
    assert (task["input"], task["source"]) == ('Review "Fix the parser"', "WEBHOOK_TRIGGERED")
    again = api.http.post("/v1/webhooks/gh-http", content=body, headers=headers)
    assert again.status_code == 200 and again.json()["task_id"] == task["task_id"]
    _error(api.http.post("/v1/webhooks/gh-http", content=body, headers={**headers, "X-GitHub-Delivery": "d-2",
                                                                         "X-Hub-Signature-256": sign(b"guess", body)}),
           401, "bad_signature")
    other = json.dumps({"issue": {}}).encode()
    _error(api.http.post("/v1/webhooks/gh-http", content=other, headers={"X-Hub-Signature-256": sign(b"http secret", other)}),
           400, "missing_field")
    _error(api.http.post("/v1/webhooks/none-such", content=body, headers=headers), 404, "unknown_webhook")
    api.post(f"/v1/tasks/{task['task_id']}/cancel")


@pytest.mark.skipif(not hasattr(Client, "schedules"), reason="needs i21-schedules (Client.schedules)")
def test_schedules_over_http(api: Api) -> None:
    """Add (admin), list (read), pause, resume, trigger, remove; an unknown one is a 404, a bad one a 400."""
    _error(api.post("/v1/schedules", "submit", json={"name": "h", "text": "x", "every": "1h"}), 403, "forbidden")
    added = api.post("/v1/schedules", json={"name": "hourly", "text": "what is 2 + 3 * 4?", "every": 3600})
    assert added.status_code == 201, added.text
    assert "hourly" in [row["name"] for row in api.get("/v1/schedules").json()]
    assert api.post("/v1/schedules/hourly/pause").json()["paused"] is True
    assert api.post("/v1/schedules/hourly/resume").json()["paused"] is False
    fired = api.post("/v1/schedules/hourly/trigger")
    assert fired.status_code == 200 and fired.json()["task"]["task_id"], fired.text
    assert api.http.delete("/v1/schedules/hourly", headers=api.auth("admin")).status_code == 200
    _error(api.post("/v1/schedules/hourly/pause"), 404, "not_found")
    _error(api.post("/v1/schedules", json={"name": "bad", "text": "x", "cron": "not a cron"}), 400, "bad_request")
    api.post(f"/v1/tasks/{fired.json()['task']['task_id']}/cancel")


def test_non_loopback_bind_is_refused_without_tls(tmp_path: Path) -> None:
    from pegasus.errors import ConfigError

    with pytest.raises(ConfigError, match="allow_non_loopback"):
        Settings().with_overrides({"http": {"bind": "0.0.0.0"}})
    assert Settings().with_overrides({"http": {"bind": "0.0.0.0", "allow_non_loopback": True}}).http.bind == "0.0.0.0"
    with pytest.raises(ConfigError, match="tls_key"):
        Settings().with_overrides({"http": {"tls_cert": str(tmp_path / "cert.pem")}})


def test_a_replaced_supervisor_is_found_again_and_meanwhile_the_answer_is_a_503(api: Api) -> None:
    """The supervisor SIGKILLed: the guardian starts another; the gateway's connections find it (answers until
    then are 503 unavailable, never another error). Last in the module: it restarts the supervisor."""
    old = api.get("/v1/stats").json()["supervisor_pid"]
    procs.kill_all({old: procs.read_stat(old).starttime}, grace=0)  # type: ignore[union-attr]
    deadline, statuses = time.monotonic() + 60, set()
    while True:
        response = api.get("/v1/stats")
        statuses.add(response.status_code)
        if response.status_code == 200 and response.json()["supervisor_pid"] != old:
            break
        if response.status_code != 200:
            _error(response, 503, "unavailable")
        assert time.monotonic() < deadline, statuses
        time.sleep(0.1)
    assert api.submit()["lifecycle_state"] == "draft"
