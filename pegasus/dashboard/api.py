"""The routes the dashboard adds to the gateway's ``/v1`` API, under the same authentication.

``GET /v1/token`` (the token's name and scope: the page shows its buttons by it, the gateway still
checks each action), ``GET /v1/tasks/{id}/context``, ``GET /v1/webhooks`` (never their secrets) and
``GET /v1/events``: every task's transitions live, not resumable (the page reads the list again
when it reconnects; a task's own stream is the resumable one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette import types as asgi

from pegasus import requests as r
from pegasus.dashboard import routes as pages
from pegasus.dashboard.feed import Feed, Reader
from pegasus.gateway import events
from pegasus.gateway.app import Gateway, Operation, _error_response, ask_plain, task_read
from pegasus.gateway.auth import Scope
from pegasus.gateway.errors import ApiError


def dashboard_routes(gw: Gateway) -> list[BaseRoute]:
    """Everything the dashboard adds to the gateway: these routes, its page and assets, the diagrams (read scope),
    each declared in /openapi.json."""

    async def check(request: Request) -> Response | None:
        try:
            gw.authorize(request, Scope.READ)
        except Exception as exc:  # noqa: BLE001 - the gateway's error shape
            return _error_response(exc)
        return None

    for operation in PAGES:
        gw.declare(operation)
    return [*api_routes(gw), *pages.routes(check)]


PAGES = [
    Operation("GET", "/", None, "The dashboard's page (no token: it asks for one)", produces=("text/html",)),
    Operation("GET", "/dashboard/machines/{name}.svg", Scope.READ, "A state machine's diagram",
              produces=("image/svg+xml",), plain_not_found=True),
    Operation("GET", "/dashboard/static/{path}", None, "The page's scripts and styles",
              produces=("text/css", "text/javascript", "text/html"), plain_not_found=True),
]


def api_routes(gw: Gateway) -> list[Route]:
    feed = Feed()
    watching = False

    async def token(gw: Gateway, op: Operation, request: Request) -> Response:
        record = gw.authorize(request, Scope.READ)
        return JSONResponse({"name": record.get("name"), "scope": record.get("scope")})

    async def all_events(gw: Gateway, op: Operation, request: Request) -> Response:
        nonlocal watching
        if gw.streams >= gw.settings.max_streams:
            raise ApiError(429, "too_many_streams", f"{gw.streams} event streams are open; the limit is "
                           f"{gw.settings.max_streams}", {"Retry-After": "1"})
        if not watching:  # one subscription to the supervisor for every reader, made at the first
            watching = True
            await anyio.to_thread.run_sync(lambda: gw.backend.watch(feed.publish, whole=True))
        gw.streams += 1
        return _FeedResponse(gw, feed.open())

    return [
        gw.route(Operation("GET", "/v1/token", Scope.READ, "The name and scope of the token presented"), token),
        gw.route(Operation("GET", "/v1/events", Scope.READ, "Every task's transitions live (Server-Sent Events; "
                           "not resumable)", produces=("text/event-stream",)), all_events),
        gw.route(Operation("GET", "/v1/tasks/{task_id}/context", Scope.READ, "What a task knows as of its last "
                           "checkpoint", request=r.TaskContextRequest), task_read),
        gw.route(Operation("GET", "/v1/webhooks", Scope.READ, "Webhooks (never their secrets)",
                           request=r.WebhookList), ask_plain),
    ]


class _FeedResponse(StreamingResponse):
    """The stream of every task's transitions; its slot among the gateway's open streams is freed however it
    ends, a reader gone before the first event too (its generator then never runs, so it cannot free it); its
    reader was registered before it started, so every event published once it is open reaches it."""

    def __init__(self, gw: Gateway, reader: Reader) -> None:
        self.gateway, self.reader = gw, reader
        super().__init__(_frames(reader, gw.settings.keepalive_s), media_type="text/event-stream",
                         headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: asgi.Scope, receive: asgi.Receive, send: asgi.Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.reader.close()
            self.gateway.streams -= 1


async def _frames(reader: Reader, keepalive_s: float) -> AsyncIterator[bytes]:
    yield events.comment("every task's transitions")  # the headers go out now: the page shows it is live
    async for event in reader.events(keepalive_s):
        if event is None:
            yield events.comment("keep-alive")
        elif event.get("lagged"):
            yield events.frame({"lagged": True}, event="lagged")
            return
        elif "to_state" in event:  # transitions only: streamed model text stays on the task's own stream
            yield events.frame(_plain(event), event=events.TRANSITION)


def _plain(event: dict[str, Any]) -> dict[str, Any]:
    return {key: event.get(key) for key in ("task_id", "machine", "from_state", "to_state", "event", "timestamp")}
