"""The HTTP routes of issue 31 without a socket: a task's log, deleting a task, searching the list."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from pegasus import requests as r
from pegasus.config import HttpSettings
from pegasus.gateway import Upstream, build_app
from tests.pegasus.gateway.test_gateway import Recorder, Tokens


class Pages(Recorder):
    """Records what it is asked; answers a list with an empty page."""

    def ask(self, request: r.Request[r.R]) -> r.R:
        self.calls.append(request)
        if isinstance(request, r.DeleteTask) and request.task_id == "busy":
            raise Upstream("TaskTreeNotFinished", "task busy's tree has 1 task(s) not finished")
        return {"tasks": [], "total": 0} if isinstance(request, r.ListTasks) else {}  # type: ignore[return-value]


@pytest.fixture
def app() -> Iterator[tuple[TestClient, Pages, dict[str, str], dict[str, str]]]:
    table, backend = Tokens(), Pages()
    admin, read = table.add("admin"), table.add("read")
    with TestClient(build_app(backend, table.rows.get, HttpSettings())) as client:
        yield client, backend, {"Authorization": f"Bearer {admin}"}, {"Authorization": f"Bearer {read}"}


def test_logs_delete_and_search_ask_their_requests(app: Any) -> None:
    client, backend, admin, read = app
    assert client.get("/v1/tasks/t/logs", headers=read).status_code == 200
    assert client.get("/v1/tasks/t/logs?after=17", headers=read).status_code == 200
    assert client.get("/v1/tasks?text=quarterly report&meta=team=ops&meta=kind=a=b", headers=read).status_code == 200
    assert client.delete("/v1/tasks/t", headers=admin).status_code == 200
    assert backend.calls == [r.TaskLog(task_id="t"), r.TaskLog(task_id="t", after=17),
                             r.ListTasks(limit=50, text="quarterly report", metadata={"team": "ops", "kind": "a=b"}),
                             r.DeleteTask(task_id="t")]


def test_a_refused_delete_is_409_and_needs_admin(app: Any) -> None:
    client, backend, admin, read = app
    assert client.delete("/v1/tasks/t", headers=read).status_code == 403
    refused = client.delete("/v1/tasks/busy", headers=admin)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_finished"
    for bad in ("/v1/tasks/t/logs?after=-1", "/v1/tasks/t/logs?after=x", "/v1/tasks?meta=novalue"):
        response = client.get(bad, headers=read)
        assert response.status_code == 400 and response.json()["error"]["code"] == "bad_request", bad
    assert [type(call) for call in backend.calls] == [r.DeleteTask]
