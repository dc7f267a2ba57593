"""``System.wait_for_http``: a start returns once its HTTP gateway accepts connections, or says why not."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from actors.runtime import procs
from actors.runtime.lifecycle import System
from actors.runtime.system import SystemStartError
from pegasus.config import Settings


def _system(tmp_path: Path, port: int, enabled: bool = True) -> System:
    return System.of(Settings().with_overrides({"state": {"home": str(tmp_path)},
                                                "http": {"enabled": enabled, "port": port}}))


def test_returns_once_the_port_accepts(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        _system(tmp_path, listener.getsockname()[1]).wait_for_http(timeout=30)


def test_a_gateway_that_never_listens_is_a_start_error_naming_its_log(tmp_path: Path) -> None:
    port = procs.free_port()
    with pytest.raises(SystemStartError, match=rf"did not listen on 127\.0\.0\.1:{port} .*logs/gateway\.log"):
        _system(tmp_path, port).wait_for_http(timeout=0.2)


def test_without_http_there_is_nothing_to_wait_for(tmp_path: Path) -> None:
    _system(tmp_path, procs.free_port(), enabled=False).wait_for_http(timeout=0)
