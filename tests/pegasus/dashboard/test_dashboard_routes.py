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
from pathlib import Path

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
    assert {a.decode() for a in assets} == {"/dashboard/static/app.css", "/dashboard/static/app.js"}  # app.js imports
    for asset in assets:
        status, headers, content = _get(served + asset.decode())
        assert status == 200 and content, asset
        assert headers["X-Content-Type-Options"] == "nosniff" and "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    # Nothing the page loads or calls is on another origin (no CDN; the API is this gateway's /v1).
    for path in Path(static_dir()).iterdir():  # every file, the modules app.js imports too
        assert not re.search(r"https?://", path.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", "")), path


def test_the_script_is_es_modules_each_served_as_javascript_and_at_most_450_lines(served: str) -> None:
    """app.js is a module (the page loads it as one); each module it imports, and theirs, is served as JavaScript,
    and no script is over 450 lines (issue 31: app.js had grown to 822)."""
    _, _, page = _get(served + "/")
    assert b'<script type="module" src="/dashboard/static/app.js">' in page
    seen, waiting = set(), ["app.js"]
    while waiting:
        name = waiting.pop()
        seen.add(name)
        status, headers, body = _get(served + "/dashboard/static/" + name)
        assert status == 200 and "javascript" in headers["Content-Type"], name
        waiting += [found for found in re.findall(r'^import .* from "\./([\w-]+\.js)";$', body.decode(), re.M)
                    if found not in seen]
    assert seen == {"app.js", "core.js", "tasks.js", "task.js", "system.js", "charts.js"}
    lengths = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in Path(static_dir()).glob("*.js")}
    assert all(n <= 450 for n in lengths.values()), lengths


def test_each_machine_has_a_diagram_and_an_unknown_one_is_404(served: str) -> None:
    status, headers, body = _get(served + "/dashboard/machines/classic.svg")
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
    assert b'data-state="perceiving"' in body
    status, _, body = _get(served + "/dashboard/machines/nope.svg")
    assert status == 404 and b"nope" in body


def test_the_token_is_kept_for_the_session_only_and_sent_as_a_header() -> None:
    """The page keeps the token in sessionStorage (gone with the tab) and sends it only as Authorization."""
    script = "\n".join(path.read_text(encoding="utf-8") for path in sorted(Path(static_dir()).glob("*.js")))
    assert "sessionStorage" in script and "localStorage" not in script
    assert "new EventSource" not in script  # it cannot send a header: the token would have to go in the URL
    assert re.findall(r"token\(\)", script) and all("Bearer ${token()}" in line for line in script.splitlines()
                                                    if "token()}" in line)
