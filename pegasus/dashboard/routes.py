"""The dashboard's routes on the gateway's Starlette app: the page at ``/``, its assets under
``/dashboard/static/`` and each machine's diagram at ``/dashboard/machines/NAME.svg``.

The page and its assets are the same for everyone and hold no data (the login form must load before
any token is known); what they show comes from ``/v1`` with the token. Every response of the
dashboard carries a Content-Security-Policy that allows only this origin's scripts and styles, no
inline script, no frames: a task's text shown by the page cannot run as code, and the page cannot be
framed by another site.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from pegasus.dashboard.diagram import svg
from pegasus.task import machines
from pegasus.task.errors import UnknownMachineError
from pegasus.task.render import describe

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

Check = Callable[[Request], Awaitable[Response | None]]
"""The gateway's authentication for a route: None to go on, or the response refusing the request."""


def static_dir() -> str:
    """Where the page and its assets are, inside the installed package."""
    return str(resources.files("pegasus.dashboard") / "static")


class _Secured:
    """An ASGI app whose responses all carry SECURITY_HEADERS (the static files')."""

    def __init__(self, app: StaticFiles) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))  # type: ignore[call-overload]
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]


def routes(check: Check | None = None) -> list[BaseRoute]:
    """The dashboard's routes; ``check`` guards the diagrams (the gateway's read scope), when given."""
    index = (resources.files("pegasus.dashboard") / "static" / "index.html").read_bytes()

    async def page(request: Request) -> Response:
        return Response(index, media_type="text/html; charset=utf-8",
                        headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"})

    async def diagram(request: Request) -> Response:
        if check is not None and (refused := await check(request)) is not None:
            return refused
        name = request.path_params["name"]
        try:
            machine = machines.get(name)
        except UnknownMachineError as exc:
            return Response(str(exc), status_code=404, media_type="text/plain", headers=SECURITY_HEADERS)
        return Response(svg(describe(machine)), media_type="image/svg+xml", headers=SECURITY_HEADERS)

    return [
        Route("/", page, methods=["GET"]),
        Route("/dashboard/machines/{name}.svg", diagram, methods=["GET"]),
        Mount("/dashboard/static", app=_Secured(StaticFiles(directory=static_dir())), name="dashboard-static"),
    ]
