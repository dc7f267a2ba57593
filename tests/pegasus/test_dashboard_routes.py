"""The dashboard's page, assets and diagrams, served by a real uvicorn on 127.0.0.1: every asset comes from
the package (no other origin is named), each response forbids other origins' scripts and framing."""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message

import pytest
import uvicorn
from starlette.applications import Starlette

from actors.runtime import procs
from pegasus.dashboard.routes import SECURITY_HEADERS, routes, static_dir


@pytest.fixture
def served() -> Iterator[str]:
    port = procs.free_port()
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=routes()), host="127.0.0.1", port=port,
                                           log_config=None, access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def _get(url: str) -> tuple[int, Message, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def test_the_page_and_its_assets_come_from_the_package_with_a_strict_policy(served: str) -> None:
    status, headers, body = _get(served + "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"] == SECURITY_HEADERS["Content-Security-Policy"]
    assets = re.findall(rb'(?:src|href)="(/[^"]+)"', body)
    assert {a.decode() for a in assets} == {"/dashboard/static/app.css", "/dashboard/static/charts.js",
                                            "/dashboard/static/app.js"}
    for asset in assets:
        status, headers, content = _get(served + asset.decode())
        assert status == 200 and content, asset
        assert headers["X-Content-Type-Options"] == "nosniff" and "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    # Nothing the page loads or calls is on another origin (no CDN; the API is this gateway's /v1).
    for name in ("index.html", "charts.js", "app.js", "app.css"):
        text = (static_dir() + "/" + name)
        assert not re.search(r"https?://", open(text, encoding="utf-8").read().replace("http://www.w3.org/2000/svg", "")), name


def test_each_machine_has_a_diagram_and_an_unknown_one_is_404(served: str) -> None:
    status, headers, body = _get(served + "/dashboard/machines/classic.svg")
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
    assert b'data-state="perceiving"' in body
    status, _, body = _get(served + "/dashboard/machines/nope.svg")
    assert status == 404 and b"nope" in body


def test_the_token_is_kept_for_the_session_only_and_sent_as_a_header() -> None:
    """The page keeps the token in sessionStorage (gone with the tab) and sends it only as Authorization."""
    script = open(static_dir() + "/app.js", encoding="utf-8").read()
    assert "sessionStorage" in script and "localStorage" not in script
    assert "new EventSource" not in script  # it cannot send a header: the token would have to go in the URL
    assert re.findall(r"token\(\)", script) and all("Bearer ${token()}" in line for line in script.splitlines()
                                                    if "token()}" in line)
