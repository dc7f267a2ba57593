"""The gateway on a uvicorn whose loop is not the code actors/client/quiet_server.py was written for: it serves with
uvicorn's own loop, after one warning line in logs/gateway.log, and ends with ``pegasus stop``.

The other uvicorn is the installed one with a comment added to ``Server.main_loop``, found first on the path of
every process of the system (as tests/integration/test_thespian_patches.py gives it another Thespian)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from actors.client.quiet_server import DOCS, TARGETS
from actors.runtime import procs
from actors.runtime.system import system_pids
from tests.integration.conftest import PROJECT_ROOT
from tests.integration.test_http_gateway import _wait_up
from tests.support.cli import Pegasus, make, stop_and_check

pytestmark = pytest.mark.integration
LOOP = "    async def main_loop(self) -> None:\n"


@pytest.fixture
def other_uvicorn(tmp_path: Path) -> Iterator[Pegasus]:
    """The CLI, with the installed uvicorn's files (linked) but a ``server.py`` whose ``main_loop`` differs."""
    real, copy = Path(uvicorn.__file__).parent, tmp_path / "site" / "uvicorn"
    copy.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name not in ("server.py", "__pycache__"):
            (copy / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    source = (real / "server.py").read_text()
    assert source.count(LOOP) == 1
    (copy / "server.py").write_text(source.replace(LOOP, LOOP + "        # another uvicorn's loop\n"))
    path = os.pathsep.join((str(copy.parent), str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")))
    pegasus = make(tmp_path, "other", PYTHONPATH=path)
    try:
        yield pegasus
    finally:
        stop_and_check(pegasus)


def test_a_gateway_on_another_uvicorn_serves_with_its_own_loop_after_one_warning(other_uvicorn: Pegasus) -> None:
    port = procs.free_port()
    started = other_uvicorn("start", "--http", str(port), timeout=60)
    other_uvicorn.track()
    assert started.returncode == 0, started.stderr
    _wait_up(f"http://127.0.0.1:{port}", timeout=60)
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).headers["date"]  # dated by uvicorn's tick
    log = (other_uvicorn.home / "logs" / "gateway.log").read_text()
    [warning] = [line for line in log.splitlines() if line.startswith("pegasus: warning:")]
    assert warning.startswith("pegasus: warning: the gateway runs uvicorn's own loop (a wake-up every 0.1 s): "
                              "Server.main_loop is not the code the patch was written for (source "), log
    assert warning.endswith(f", expected {TARGETS[0].expected}) (see {DOCS})"), log
    gateway = procs.listener_pid(port, system_pids(other_uvicorn.spec))
    assert gateway is not None
    assert other_uvicorn("stop").returncode == 0
    assert not procs.is_alive(gateway)
