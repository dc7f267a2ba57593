"""The HTTP gateway's core without a socket or a system: tokens and scopes, the error mapping, event ids
and their resumption, the token table, and the app's checks that come before any call (Starlette's TestClient)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from pegasus import requests as r
from pegasus.config import HttpSettings
from pegasus.gateway import ApiError, NotReady, Upstream, build_app
from pegasus.gateway.app import ROUTES
from pegasus.gateway.openapi import document
from pegasus.gateway.auth import Scope, allows, authenticate, new_token, token_hash
from pegasus.gateway.errors import api_error
from pegasus.gateway.events import Numbering, frame, last_event_id, ordered
from pegasus.store import tokens
from pegasus.store.database import Database


class Tokens:
    """A token table in memory: hash -> record."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def add(self, scope: str) -> str:
        token = new_token()
        self.rows[token_hash(token)] = {"name": scope, "scope": scope, "token_hash": token_hash(token)}
        return token


def test_tokens_are_random_and_only_their_hash_is_looked_up() -> None:
    one, two = new_token(), new_token()
    assert one != two and one.startswith("pgs_") and len(one) > 40
    assert token_hash(one) == token_hash(one) and len(token_hash(one)) == 64


@pytest.mark.parametrize("granted,needed,ok", [("read", Scope.READ, True), ("read", Scope.SUBMIT, False),
                                               ("submit", Scope.SUBMIT, True), ("submit", Scope.ADMIN, False),
                                               ("admin", Scope.ADMIN, True), ("root", Scope.READ, False)])
def test_each_scope_includes_the_ones_below(granted: str, needed: Scope, ok: bool) -> None:
    assert allows(granted, needed) is ok


def test_authenticate_says_401_for_no_bad_or_unknown_token_and_403_for_a_low_scope() -> None:
    table = Tokens()
    read = table.add("read")
    lookup = table.rows.get
    for header in (None, "", "Bearer", "Basic abc", "Bearer pgs_unknown"):
        with pytest.raises(ApiError) as caught:
            authenticate(header, lookup, Scope.READ)
        assert caught.value.status == 401 and "WWW-Authenticate" in caught.value.headers
    assert authenticate(f"Bearer {read}", lookup, Scope.READ)["scope"] == "read"
    with pytest.raises(ApiError) as caught:
        authenticate(f"bearer  {read} ", lookup, Scope.SUBMIT)
    assert caught.value.status == 403


class Refused(Exception):
    """An error that carries its own status and code, as the webhooks' WebhookRefused does."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status, self.code, self.message = status, code, message
        super().__init__(message)


@pytest.mark.parametrize("error,status,code", [
    (Upstream("TaskNotFoundError", "unknown task"), 404, "not_found"),
    (Upstream("InvalidStateTransition", "no"), 409, "invalid_transition"),
    (Upstream("IdempotencyConflict", "other text"), 409, "idempotency_conflict"),
    (Upstream("QueueFull", "full"), 429, "queue_full"),
    (Upstream("BadRequest", "text: bad"), 400, "bad_request"),
    (Upstream("DiskFull", "disk"), 503, "unavailable"),
    (Upstream("ScheduleNotFound", "?"), 404, "not_found"),
    (Upstream("SomeRefusal", "?"), 400, "bad_request"),
    (Upstream("InternalError", "?"), 500, "internal"),
    (Refused(401, "bad_signature", "the signature does not match"), 401, "bad_signature"),
    (NotReady("restarting"), 503, "unavailable"),
    (TimeoutError("slow"), 503, "unavailable"),
    (RuntimeError("bug"), 500, "internal"),
])
def test_every_error_has_its_status_and_a_stable_shape(error: Exception, status: int, code: str) -> None:
    answer = api_error(error)
    assert (answer.status, answer.code) == (status, code)
    assert set(answer.body()["error"]) == {"code", "message"}


HISTORY = {"lifecycle": [
    {"from_state": "-", "to_state": "draft", "trigger_event_type": "TASK_CREATED", "timestamp": "t1", "reason": "", "seq": 1},
    {"from_state": "draft", "to_state": "running", "trigger_event_type": "TASK_STARTED", "timestamp": "t2", "reason": "go",
     "seq": 2}],
    "cognitive": [{"run": 1, "from_state": "idle", "to_state": "thinking", "event": "X", "timestamp": "t3", "seq": 3,
                   "machine": "classic"}]}


def test_the_history_is_replayed_in_store_order_after_the_last_event_id() -> None:
    assert [t["seq"] for t in ordered(HISTORY)] == [1, 2, 3]
    numbering = Numbering(HISTORY, "t")
    assert [event_id for event_id, _ in numbering.replay(0)] == [1, 2, 3]
    assert [(i, d["to_state"], d["task_id"]) for i, d in numbering.replay(1)] == [(2, "running", "t"), (3, "thinking", "t")]
    assert numbering.replay(3) == []


def test_live_transitions_the_history_held_are_skipped_and_the_rest_numbered_on() -> None:
    numbering = Numbering(HISTORY, "t", duplicates=1)
    assert numbering.live(False) is None  # streamed text: no id
    assert numbering.live(True) == 0  # received before the history was read: in it already
    assert [numbering.live(True), numbering.live(True)] == [4, 5]


def test_an_event_frame_and_a_bad_last_event_id() -> None:
    assert frame({"a": 1}, event="transition", event_id=7) == b'id: 7\nevent: transition\ndata: {"a":1}\n\n'
    assert last_event_id(None) == 0 and last_event_id(" 12 ") == 12
    for bad in ("x", "-1"):
        with pytest.raises(ApiError):
            last_event_id(bad)


def test_the_token_table_keeps_hashes_names_once_and_revokes(tmp_path: Path) -> None:
    db = Database(tmp_path / "p.db")
    record = tokens.create(db, "ci", "a" * 64, "submit")
    assert record["scope"] == "submit" and record["revoked_at"] is None
    with pytest.raises(tokens.TokenError):
        tokens.create(db, "ci", "b" * 64, "read")
    reader = tokens.TokenReader(tmp_path / "p.db")
    assert reader.lookup("a" * 64) == {"name": "ci", "scope": "submit", "token_hash": "a" * 64}
    assert tokens.revoke(db, "ci")["revoked_at"] is not None
    assert reader.lookup("a" * 64) is None
    assert [row["name"] for row in tokens.listed(db)] == ["ci"] and "token_hash" not in tokens.listed(db)[0]
    with pytest.raises(tokens.TokenNotFound):
        tokens.revoke(db, "nobody")
    reader.close()
    db.close()


class Recorder:
    """A backend that records what it was asked (the app's checks come before any call)."""

    def __init__(self) -> None:
        self.calls: list[r.Request[Any]] = []

    def ask(self, request: r.Request[r.R]) -> r.R:
        self.calls.append(request)
        return {"task_id": "t", "existing": False}  # type: ignore[return-value]

    def ready(self) -> dict[str, Any]:
        return {"generation": 1}

    def open_stream(self, task_id: str) -> Any:
        raise Upstream("TaskNotFoundError", f"unknown task {task_id!r}")

    def watch(self, observe: Callable[[dict[str, Any]], None]) -> None:
        pass


@pytest.fixture
def app() -> Iterator[tuple[TestClient, Recorder, dict[str, str]]]:
    table, backend = Tokens(), Recorder()
    admin = table.add("admin")
    with TestClient(build_app(backend, table.rows.get, HttpSettings(max_body_bytes=2048))) as client:
        yield client, backend, {"Authorization": f"Bearer {admin}"}


def test_a_body_over_the_limit_is_refused_by_its_length_and_no_call_is_made(app: Any) -> None:
    client, backend, auth = app
    response = client.post("/v1/tasks", content=b"x" * 4096, headers=auth)
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it comes
        for _ in range(4):
            yield b"y" * 1024
    response = client.post("/v1/tasks", content=chunks(), headers=auth)
    assert response.status_code == 413 and backend.calls == []


def test_submit_passes_the_idempotency_key_and_says_http(app: Any) -> None:
    client, backend, auth = app
    response = client.post("/v1/tasks", json={"text": "hi"}, headers={**auth, "Idempotency-Key": "k1"})
    assert response.status_code == 201
    assert backend.calls == [r.Submit(text="hi", machine=None, priority=5, metadata={}, source="http", key="k1")]


def test_each_route_asks_the_request_its_row_names_built_from_path_and_body(app: Any) -> None:
    client, backend, auth = app
    assert client.post("/v1/tasks/t/message", json={"text": "hi"}, headers=auth).status_code == 200
    assert client.post("/v1/tasks/t/cancel", headers=auth).status_code == 200
    for verb in ("pause", "resume", "trigger"):
        assert client.post(f"/v1/schedules/tidy/{verb}", headers=auth).status_code == 200
    assert client.delete("/v1/schedules/tidy", headers=auth).status_code == 200
    assert backend.calls == [r.SendMessage(task_id="t", text="hi"), r.Cancel(task_id="t"), r.SchedulePause(name="tidy"),
                             r.ScheduleResume(name="tidy"), r.ScheduleTrigger(name="tidy"), r.ScheduleRemove(name="tidy")]
    asking = {(op.method, op.path): op.request for op, _ in ROUTES if op.request is not None}
    assert asking[("GET", "/v1/tasks/{task_id}")] is r.Get and asking[("POST", "/v1/tasks")] is r.Submit
    paths = document([op for op, _ in ROUTES])["paths"]
    assert all(paths[path][method.lower()]["x-request"] == request.__name__ for (method, path), request in asking.items())


def test_a_stream_of_an_unknown_task_is_a_404(app: Any) -> None:
    client, _, auth = app
    assert client.get("/v1/tasks/t/events", headers=auth).status_code == 404
    assert client.get("/healthz").json() == {"ok": True, "generation": 1}


def test_a_stream_that_ends_is_closed_and_counted_out() -> None:
    """A finished stream sends ``end`` and frees its slot; the backend's stream is closed once."""
    closed = threading.Event()

    class OneTask(Recorder):
        def open_stream(self, task_id: str) -> Any:
            class Stream:
                history = HISTORY
                duplicates = 0

                def notices(self, stop: threading.Event) -> Iterator[Any]:
                    yield {"task_id": task_id, "machine": "lifecycle", "from_state": "running", "to_state": "done",
                           "event": "TASK_DONE", "timestamp": "t4", "detail": {}}

                def close(self) -> None:
                    assert not closed.is_set()
                    closed.set()
            return Stream()

    table = Tokens()
    read = table.add("read")
    app = build_app(OneTask(), table.rows.get, HttpSettings())
    with TestClient(app) as client:
        # a bad query is a 400 even when the header names the event (Schemathesis found it answered 200)
        assert client.get("/v1/tasks/t/events?last_event_id=x",
                          headers={"Authorization": f"Bearer {read}", "Last-Event-ID": "2"}).status_code == 400
        text = client.get("/v1/tasks/t/events", headers={"Authorization": f"Bearer {read}", "Last-Event-ID": "2"}).text
    assert [line for line in text.splitlines() if line.startswith(("id:", "event:"))] == [
        "id: 3", "event: transition", "id: 4", "event: transition", "event: end"]
    assert closed.is_set() and app.state.gateway.streams == 0


def test_a_stream_whose_reader_left_before_its_first_event_is_closed_once() -> None:
    """The response closed before it ever iterated (the reader gone at once): the stream's client is given back
    and its slot freed, once however often it is closed."""
    from pegasus.gateway.streams import EventStream

    closed, freed = [], []

    class Never:
        history: dict[str, Any] = {"lifecycle": [], "cognitive": []}
        duplicates = 0

        def notices(self, stop: threading.Event) -> Iterator[Any]:
            raise AssertionError("never followed")

        def close(self) -> None:
            closed.append(1)

    response = EventStream(Never(), "t", 0, 15.0, lambda: freed.append(1))
    response.close()
    response.close()
    assert closed == [1] and freed == [1] and response.stop.is_set()


def test_a_405_names_every_method_its_path_is_served_with(app: Any) -> None:
    client, _, auth = app
    response = client.request("TRACE", "/v1/schedules/tidy", headers=auth)
    assert response.status_code == 405 and response.headers["allow"] == "DELETE"
    response = client.put("/v1/tasks", headers=auth)
    assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD, POST"  # HEAD: served with GET


def test_query_parameters_are_typed_as_the_handler_reads_them(app: Any) -> None:
    client, backend, auth = app
    parameters = {p["name"]: p["schema"] for p in client.get("/openapi.json", headers=auth).json()["paths"][
        "/v1/tasks"]["get"]["parameters"]}
    assert parameters["limit"]["type"] == "integer" and (parameters["limit"]["minimum"],
                                                          parameters["limit"]["maximum"]) == (1, 1000)
    assert parameters["cursor"]["anyOf"][0]["pattern"] == r"^[1-9][0-9]{0,17}$"
    for bad in ({"limit": ""}, {"limit": "0"}, {"cursor": "???"}, {"state": "nope"}):
        response = client.get("/v1/tasks", params=bad, headers=auth)
        assert response.status_code == 400 and response.json()["error"]["message"].startswith(next(iter(bad)))
    assert backend.calls == []
