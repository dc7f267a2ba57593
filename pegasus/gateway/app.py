"""The HTTP API as a Starlette app: the route table, authentication per route, bodies capped, errors as JSON.

Each route is a row (method, path, scope, the ``pegasus.requests`` class it asks); its handler
reads and checks the HTTP request, builds that request from the path, query and body, asks it of
the ``Backend`` in a worker thread (the backend's clients block), and answers JSON.  The app is a ``Router`` of mounted parts, so later routes (a dashboard)
join it under the same authentication.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route

from pegasus import requests as r
from pegasus.config import HttpSettings
from pegasus.gateway import events
from pegasus.gateway.auth import Lookup, Scope, authenticate
from pegasus.gateway.errors import ApiError, api_error
from pegasus.gateway.metrics import CONTENT_TYPE, GatewayMetrics
from pegasus.gateway.models import MessageBody, ReasonBody, ResumeBody, ScheduleBody, SubmitBody, parse
from pegasus.gateway.openapi import JSON, document
from pegasus.gateway.params import EventsQuery, ListQuery, LogQuery, Query, parse_query
from pegasus.gateway.streams import EventStream, Stream
from pegasus.store.task_ids import FULL_CHARS
from pegasus.task import machines as machine_tables, render
from pegasus.task.names import LifecycleState
from pegasus.tracing import TRACEPARENT, parse_traceparent

TERMINAL = frozenset({LifecycleState.DONE, LifecycleState.FAILED, LifecycleState.CANCELED})


class Backend(Protocol):
    """What the app calls, each in a worker thread (``actors.client.gateway.ClientBackend`` over Python clients)."""

    def ask(self, request: r.Request[r.R]) -> r.R: ...  # the request's reply, as the request declares it
    def ready(self) -> dict[str, Any]: ...  # /healthz: the guardian's and the store's view
    def open_stream(self, task_id: str) -> Stream: ...
    def watch(self, observe: Callable[[dict[str, Any]], None], *, whole: bool = False) -> None: ...
    # every task's transitions from now on: each one's detail, or (whole) the transition itself


@dataclass(frozen=True)
class Operation:
    """A row of the route table (also what /openapi.json describes)."""

    method: str
    path: str
    scope: Scope | None  # None: no bearer token (healthz; a webhook is authenticated by its signature)
    summary: str
    body: type | None = None
    status: int = 200
    query: type[Query] | tuple[str, ...] | None = None  # a model the handler validates with (names: free text)
    request: type[r.Request[Any]] | None = None  # what the route asks (None: answered by the gateway or a stream)
    produces: tuple[str, ...] = (JSON,)  # the media types of its answers
    also: tuple[int, ...] = ()  # other success statuses (200: an existing task answered again)
    headers: tuple[tuple[str, dict[str, Any]], ...] = ()  # request headers it reads, with their schemas
    accepts: tuple[str, ...] = ()  # a raw body's media types (no body model)
    plain_not_found: bool = False  # a 404 may be plain text (the dashboard's files)
    makes: str | None = None  # the field of its answer that names what it made (OpenAPI links to its routes)


class Gateway:
    """The app's state: the backend, the token lookup, the settings, the metrics."""

    def __init__(self, backend: Backend, lookup: Lookup, settings: HttpSettings, max_attempts: int | None = None) -> None:
        self.backend, self.lookup, self.settings = backend, lookup, settings
        self.max_attempts = max_attempts  # the system's [retry] max_attempts: a task's view says if a retry can be
        self.metrics = GatewayMetrics()
        self.streams = 0
        self._watching = False
        self.operations: list[Operation] = []  # every route's declaration: /openapi.json describes these

    def route(self, operation: Operation, handler: Handler) -> Route:
        """A route of ``handler`` behind ``operation``'s authentication, declared in /openapi.json."""
        self.operations.append(operation)
        return Route(operation.path, _endpoint(self, operation, handler), methods=[operation.method])

    def declare(self, operation: Operation) -> None:
        """Declare a route served by a part's own Starlette route (the dashboard's page and files)."""
        self.operations.append(operation)

    # -- the pieces every handler uses ------------------------------------------------------------
    def authorize(self, request: Request, needed: Scope) -> dict[str, Any]:
        return authenticate(request.headers.get("authorization"), self.lookup, needed)

    async def body(self, request: Request) -> bytes:
        """The request body, refused (413) past ``max_body_bytes``: by its Content-Length before any of it is
        read, and by counting what arrives when it has none (chunked)."""
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):
                raise ApiError(400, "bad_request", "Content-Length is not a number")
            if len(declared) > 18 or int(declared) > limit:  # int() of 5,000 digits raises
                raise ApiError(413, "too_large", f"the body is {declared} bytes; the limit is {limit}")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, "too_large", f"the body is over the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def ask(self, request: r.Request[r.R]) -> r.R:
        return await anyio.to_thread.run_sync(lambda: self.backend.ask(request))


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status)


def _error_response(exc: BaseException) -> JSONResponse:
    error = api_error(exc)
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


Handler = Callable[[Gateway, Operation, Request], Awaitable[Response]]


def _asked(op: Operation) -> type[r.Request[Any]]:
    assert op.request is not None, f"{op.method} {op.path} names no request"
    return op.request


# -- tasks ---------------------------------------------------------------------------------------------

async def submit(gw: Gateway, op: Operation, request: Request) -> Response:
    body = parse(SubmitBody, await gw.body(request))
    key = request.headers.get("idempotency-key")
    if key is not None and not (0 < len(key) <= 200):
        raise ApiError(400, "bad_request", "Idempotency-Key: 1 to 200 characters")
    metadata = dict(body.metadata)
    if parse_traceparent(request.headers.get(TRACEPARENT)) is not None:  # the task's trace continues the caller's
        metadata[TRACEPARENT] = request.headers[TRACEPARENT].strip().lower()
    task = await gw.ask(r.Submit(text=body.text, machine=body.machine, tier=body.tier, priority=body.priority,
                                 metadata=metadata, source="http", key=key))
    return _json(task, 200 if task.get("existing") else 201)


def _next_cursor(tasks: list[dict[str, Any]], limit: int) -> str | None:
    """The page's last task's seq (``ListQuery.cursor``), None on the last page."""
    if len(tasks) < limit or not tasks or "seq" not in tasks[-1]:
        return None
    return str(tasks[-1]["seq"])


async def list_tasks(gw: Gateway, op: Operation, request: Request) -> Response:
    query = parse_query(ListQuery, request)
    before = None if query.cursor is None else int(query.cursor)
    page = await gw.ask(r.ListTasks(state=query.state, limit=query.limit, offset=0, before=before,
                                    text=query.text, metadata=_meta(query.meta)))
    tasks = page["tasks"]
    return _json({"tasks": tasks, "total": page["total"], "next_cursor": _next_cursor(tasks, query.limit)})


def _meta(pairs: list[str]) -> dict[str, str]:
    """``meta=key=value`` query parameters (ListQuery has checked their count and form): the values a task must have."""
    return dict(pair.partition("=")[::2] for pair in pairs)


async def task_log(gw: Gateway, op: Operation, request: Request) -> Response:
    query = parse_query(LogQuery, request)
    return _json(await gw.ask(r.TaskLog(task_id=request.path_params["task_id"], after=query.after)))


async def task_get(gw: Gateway, op: Operation, request: Request) -> Response:
    """A task, with the system's ``max_attempts`` (the dashboard offers Retry only while attempts are left)."""
    task = await gw.ask(r.Get(task_id=request.path_params["task_id"]))
    return _json({**task, "max_attempts": gw.max_attempts} if gw.max_attempts is not None else task)


async def task_read(gw: Gateway, op: Operation, request: Request) -> Response:
    """A read of one task: the row's request of the path's task_id."""
    return _json(await gw.ask(_asked(op)(task_id=request.path_params["task_id"])))


async def task_action(gw: Gateway, op: Operation, request: Request) -> Response:
    """A task action: the row's request of the path's task_id and the fields the body gives (the request's own
    defaults for those it leaves out)."""
    raw = await gw.body(request)
    fields: dict[str, Any] = {}
    if op.body is not None:
        fields = parse(op.body, raw).model_dump(exclude_none=True)
    elif raw.strip() not in (b"", b"{}"):
        raise ApiError(400, "bad_request", f"body: {op.path.rsplit('/', 1)[-1]} takes no fields")
    return _json(await gw.ask(_asked(op)(task_id=request.path_params["task_id"], **fields)))


async def task_events(gw: Gateway, op: Operation, request: Request) -> Response:
    """Server-Sent Events of one task: the stored transitions after ``Last-Event-ID``, then live ones, then
    ``end`` once the task is done, failed or canceled (see ``pegasus.gateway.events`` and ``.streams``)."""
    task_id = request.path_params["task_id"]
    query = parse_query(EventsQuery, request)  # checked even when the header names the event: a bad one is a 400
    header = request.headers.get("last-event-id")  # before the task is looked up; the header wins over the query
    after = events.last_event_id(header) if header else query.last_event_id or 0
    if len(task_id) < FULL_CHARS:  # a prefix: the stream's events carry the whole id
        task_id = (await gw.ask(r.Get(task_id=task_id)))["task_id"]
    if gw.streams >= gw.settings.max_streams:
        raise ApiError(429, "too_many_streams", f"{gw.streams} event streams are open; the limit is "
                       f"{gw.settings.max_streams}", {"Retry-After": "1"})
    gw.streams += 1
    try:
        stream = await anyio.to_thread.run_sync(lambda: gw.backend.open_stream(task_id))
    except BaseException:
        gw.streams -= 1
        raise

    def freed() -> None:
        gw.streams -= 1
    return EventStream(stream, task_id, after, gw.settings.keepalive_s, freed)


# -- the system ---------------------------------------------------------------------------------------

async def ask_plain(gw: Gateway, op: Operation, request: Request) -> Response:
    """The row's request, of no fields (stats, schedules)."""
    return _json(await gw.ask(_asked(op)()))


async def list_machines(gw: Gateway, op: Operation, request: Request) -> Response:
    return _json([render.describe(machine) for machine in machine_tables.MACHINES.values()])


async def healthz(gw: Gateway, op: Operation, request: Request) -> Response:
    return _json({"ok": True, **await anyio.to_thread.run_sync(gw.backend.ready)})


async def metrics(gw: Gateway, op: Operation, request: Request) -> Response:
    if not gw._watching:  # stage latencies are counted from the first scrape on
        gw._watching = True
        await anyio.to_thread.run_sync(lambda: gw.backend.watch(gw.metrics.observe))
    stats = await gw.ask(r.Stats())  # and the guardian's view (its children's restarts), as /healthz reads it
    return Response(gw.metrics.render({**stats, "guardian": await anyio.to_thread.run_sync(gw.backend.ready)}),
                    media_type=CONTENT_TYPE)


async def openapi(gw: Gateway, op: Operation, request: Request) -> Response:
    return _json(document(gw.operations))


# -- webhooks and schedules -------------------------------------------------------------------------

async def webhook(gw: Gateway, op: Operation, request: Request) -> Response:
    try:
        raw = await gw.body(request)
        headers = {name.lower(): value for name, value in request.headers.items()}
        task = await gw.ask(r.DeliverWebhook(name=request.path_params["name"], headers=headers, body=raw))
    except Exception as exc:
        gw.metrics.webhook(api_error(exc).status)
        raise
    existing = isinstance(task, dict) and bool(task.get("existing"))
    answered = existing or (isinstance(task, dict) and task.get("task_id") is None)  # again, or no task
    gw.metrics.webhook(200 if answered else 201, redelivered=existing)
    return _json(task, 200 if answered else 201)


async def add_schedule(gw: Gateway, op: Operation, request: Request) -> Response:
    body = parse(ScheduleBody, await gw.body(request))
    fields = {k: v for k, v in body.model_dump().items() if v is not None and k != "name"}
    return _json(await gw.ask(r.ScheduleAdd.of(body.name, **fields)), 201)


async def schedule_control(gw: Gateway, op: Operation, request: Request) -> Response:
    """Pause, resume, trigger or remove: the row's request of the path's schedule name."""
    if (await gw.body(request)).strip() not in (b"", b"{}"):
        raise ApiError(400, "bad_request", "body: this takes no fields")
    return _json(await gw.ask(_asked(op)(name=request.path_params["name"])))


TASK = "/v1/tasks/{task_id}"
EVENT_STREAM = "text/event-stream"
FORM = "application/x-www-form-urlencoded"
KEY = {"type": "string", "minLength": 1, "maxLength": 200}
EVENT_ID = {"type": "string", "pattern": r"^[0-9]{0,18}$"}  # as events.last_event_id reads it (empty: none)
SCHEDULE = "/v1/schedules/{name}"
ROUTES: list[tuple[Operation, Handler]] = [
    (Operation("POST", "/v1/tasks", Scope.SUBMIT, "Submit a task (Idempotency-Key: a key used before answers "
               "its task; traceparent: its trace continues the caller's)", SubmitBody, 201, request=r.Submit,
               also=(200,), headers=(("Idempotency-Key", KEY), ("traceparent", {"type": "string"})),
               makes="task_id"), submit),
    (Operation("GET", "/v1/tasks", Scope.READ, "Tasks, newest first (state, limit, cursor; text: every word in "
               "the input or result; meta=key=value, repeatable)",
               query=ListQuery, request=r.ListTasks), list_tasks),
    (Operation("GET", TASK, Scope.READ, "A task (max_attempts: a failed task is retried while attempts are fewer)",
               request=r.Get), task_get),
    (Operation("GET", TASK + "/history", Scope.READ, "A task's transitions and audit", request=r.History), task_read),
    (Operation("GET", TASK + "/logs", Scope.READ, "A task's log: transitions, stage errors, model step-downs, tool "
               "output, in order (after: the next of the previous answer)", query=LogQuery, request=r.TaskLog),
     task_log),
    (Operation("DELETE", TASK, Scope.ADMIN, "Delete a task and its sub-tasks (every one finished)",
               request=r.DeleteTask), task_read),
    (Operation("GET", TASK + "/events", Scope.READ, "A task's transitions live (Server-Sent Events; resume "
               "with Last-Event-ID)", query=EventsQuery, produces=(EVENT_STREAM,),
               headers=(("Last-Event-ID", EVENT_ID),)), task_events),
    (Operation("POST", TASK + "/cancel", Scope.ADMIN, "Cancel a task", ReasonBody, request=r.Cancel), task_action),
    (Operation("POST", TASK + "/suspend", Scope.ADMIN, "Suspend a running task", ReasonBody, request=r.Suspend),
     task_action),
    (Operation("POST", TASK + "/resume", Scope.SUBMIT, "Resume a suspended or blocked task", ResumeBody,
               request=r.Resume), task_action),
    (Operation("POST", TASK + "/approve", Scope.ADMIN, "Approve a draft task", request=r.Approve), task_action),
    (Operation("POST", TASK + "/retry", Scope.ADMIN, "Retry a failed task", request=r.Retry), task_action),
    (Operation("POST", TASK + "/message", Scope.SUBMIT, "Send a running task a message", MessageBody,
               request=r.SendMessage), task_action),
    (Operation("GET", "/v1/stats", Scope.READ, "Tasks, queue, pools, usage", request=r.Stats), ask_plain),
    (Operation("GET", "/v1/machines", Scope.READ, "The state machines"), list_machines),
    (Operation("POST", "/v1/webhooks/{name}", None, "Deliver a webhook (authenticated by its HMAC signature)",
               request=r.DeliverWebhook, status=201, also=(200,), accepts=(JSON, FORM)), webhook),
    (Operation("GET", "/v1/schedules", Scope.READ, "Schedules", request=r.ScheduleList), ask_plain),
    (Operation("POST", "/v1/schedules", Scope.ADMIN, "Add a schedule", ScheduleBody, 201, request=r.ScheduleAdd,
               makes="name"),
     add_schedule),
    (Operation("POST", SCHEDULE + "/pause", Scope.ADMIN, "Pause a schedule", request=r.SchedulePause),
     schedule_control),
    (Operation("POST", SCHEDULE + "/resume", Scope.ADMIN, "Resume a schedule", request=r.ScheduleResume),
     schedule_control),
    (Operation("POST", SCHEDULE + "/trigger", Scope.ADMIN, "Fire a schedule now", request=r.ScheduleTrigger),
     schedule_control),
    (Operation("DELETE", SCHEDULE, Scope.ADMIN, "Remove a schedule", request=r.ScheduleRemove),
     schedule_control),
    (Operation("GET", "/healthz", None, "Whether the system answers (no token)"), healthz),
    (Operation("GET", "/metrics", Scope.READ, "Prometheus metrics", request=r.Stats, produces=("text/plain",)),
     metrics),
    (Operation("GET", "/openapi.json", Scope.READ, "This API's OpenAPI document"), openapi),
]


def _endpoint(gw: Gateway, operation: Operation, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            if operation.scope is not None:
                gw.authorize(request, operation.scope)
            return await handler(gw, operation, request)
        except Exception as exc:  # noqa: BLE001 - every error is an answer of the stable shape
            return _error_response(exc)
    endpoint.__name__ = handler.__name__
    return endpoint


def routes(gw: Gateway) -> list[Route]:
    return [gw.route(op, handler) for op, handler in ROUTES]


async def _not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "bad_request")
    headers = {"Allow": _allowed(request)} if status == 405 else None
    return JSONResponse({"error": {"code": code, "message": f"{request.method} {request.url.path}: "
                                   f"{getattr(exc, 'detail', 'not found')}"}}, status_code=status, headers=headers)


def _allowed(request: Request) -> str:
    """The methods of every route of this path (one path may be served by several routes: GET and DELETE)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= set(route.methods or ())
    return ", ".join(sorted(methods))


def build_app(backend: Backend, lookup: Lookup, settings: HttpSettings,
              parts: Sequence[Callable[[Gateway], list[BaseRoute]]] = (), max_attempts: int | None = None) -> Starlette:
    """The gateway's ASGI app over ``backend`` (tokens found with ``lookup``)."""
    gw = Gateway(backend, lookup, settings, max_attempts)
    # parts: more routes on the same gateway, so under the same tokens (the web dashboard: pegasus.dashboard.api),
    # each declared with gw.route or gw.declare so /openapi.json describes it
    core = routes(gw)
    extra = [route for part in parts for route in part(gw)]
    app = Starlette(routes=[*core, *extra], exception_handlers={404: _not_found, 405: _not_found})
    app.state.gateway = gw
    return app
