"""The gateway program on a uvicorn whose loop is not the code actors/client/quiet_server.py was written for: it
serves with uvicorn's own loop, after one warning line in its log, and ends on SIGTERM.

The other uvicorn is the installed one with a comment added to ``Server.main_loop``, found first on the gateway's
path (as tests/integration/test_thespian_patches.py gives a system another Thespian).  The gateway runs as its
keeper starts it, without a system behind it: every request it serves then answers 503."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from actors.client.quiet_server import DOCS, TARGETS
from actors.messages.gateway import HOME_ENV
from actors.runtime import procs
from actors.runtime.spec import SETTINGS_FILE
from pegasus.config import Settings
from tests.integration.conftest import PROJECT_ROOT

pytestmark = pytest.mark.integration
LOOP = "    async def main_loop(self) -> None:\n"
WAIT_S = 60.0  # a bound for a loaded machine


def _other_uvicorn(site: Path) -> None:
    """The installed uvicorn's files (linked) in ``site``, but a ``server.py`` whose ``main_loop`` differs."""
    real, copy = Path(uvicorn.__file__).parent, site / "uvicorn"
    copy.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name not in ("server.py", "__pycache__"):
            (copy / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    source = (real / "server.py").read_text()
    assert source.count(LOOP) == 1
    (copy / "server.py").write_text(source.replace(LOOP, LOOP + "        # another uvicorn's loop\n"))


def test_a_gateway_on_another_uvicorn_serves_with_its_own_loop_after_one_warning(tmp_path: Path) -> None:
    _other_uvicorn(tmp_path / "site")
    state, port = tmp_path / "state", procs.free_port()
    state.mkdir()
    settings = Settings().with_overrides({"state": {"home": str(state)}, "system": {"admin_port": procs.free_port()},
                                          "http": {"enabled": True, "port": port}})
    (state / SETTINGS_FILE).write_text(settings.model_dump_json())
    path = os.pathsep.join((str(tmp_path / "site"), str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")))
    log = tmp_path / "gateway.log"
    with log.open("w") as out:
        gateway = subprocess.Popen([sys.executable, "-P", "-c", "from actors.client.gateway import main; main()"],
                                   env={**os.environ, HOME_ENV: str(state), "PYTHONPATH": path}, cwd=state,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=WAIT_S)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and gateway.poll() is None, log.read_text()
                time.sleep(0.05)
        assert response.status_code == 503 and response.json()["error"]["code"] == "unavailable"  # no system
        assert response.headers["date"]  # dated by uvicorn's own tick
        [warning] = [line for line in log.read_text().splitlines() if line.startswith("pegasus: warning:")]
        assert warning.startswith("pegasus: warning: the gateway runs uvicorn's own loop (a wake-up every 0.1 s): "
                                  "Server.main_loop is not the code the patch was written for (source ")
        assert warning.endswith(f", expected {TARGETS[0].expected}) (see {DOCS})")
        gateway.send_signal(signal.SIGTERM)
        assert gateway.wait(timeout=WAIT_S) == -signal.SIGTERM  # uvicorn stops, then ends as the signal asked
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()
