"""The routes the dashboard adds to the gateway's app (Starlette's TestClient, a backend in memory): one watch for
every events reader, transitions only, and each stream's slot freed when its reader goes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from pegasus.config import HttpSettings
from pegasus.dashboard.api import dashboard_routes
from pegasus.gateway import build_app
from tests.pegasus.gateway.test_gateway import Tokens

NOTICE = {"task_id": "t1", "machine": "lifecycle", "from_state": "-", "to_state": "draft", "event": "TASK_CREATED",
          "timestamp": "2026-01-01T00:00:00+00:00", "detail": {"secret": "not sent"}}


class Watched:
    """A backend whose watch keeps its observer for the test to hand it notices."""

    def __init__(self) -> None:
        self.watches: list[bool] = []
        self.observe: Callable[[dict[str, Any]], None] = lambda notice: None

    def ask(self, request: Any) -> Any:
        return {"task_id": request.task_id, "state": None, "context": {}}

    def watch(self, observe: Callable[[dict[str, Any]], None], *, whole: bool = False) -> None:
        self.watches.append(whole)
        self.observe = observe


def test_every_reader_shares_one_watch_gets_transitions_only_and_frees_its_slot() -> None:
    table, backend = Tokens(), Watched()
    read = {"Authorization": f"Bearer {table.add('read')}"}
    app = build_app(backend, table.rows.get, HttpSettings(), parts=(dashboard_routes,))  # type: ignore[arg-type]
    gateway = app.state.gateway
    with TestClient(app) as client:
        for _ in range(2):
            with client.stream("GET", "/v1/events", headers=read) as response:
                lines = response.iter_lines()
                assert next(lines).startswith(":") and gateway.streams == 1
                backend.observe({"task_id": "t1", "text": "a model's streamed reply"})  # no transition: not sent
                backend.observe(NOTICE)
                sent = [line for line in (next(lines), next(lines), next(lines)) if line]
                assert sent[0] == "event: transition" and json.loads(sent[1][len("data: "):]) == {
                    key: value for key, value in NOTICE.items() if key != "detail"}
        assert gateway.streams == 0  # each reader gone: its slot is free again
        assert backend.watches == [True]  # one subscription, made by the first reader
        assert client.get("/v1/token", headers=read).json() == {"name": "read", "scope": "read"}
        assert client.get("/v1/tasks/t9/context", headers=read).json()["task_id"] == "t9"
        assert client.get("/", headers={}).headers["content-security-policy"].startswith("default-src 'none'")
