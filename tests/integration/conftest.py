"""Fixtures for tests that run real multiprocTCPBase systems.

Every system a test starts is shut down in a finalizer, even when the test
fails, and every process it had is checked gone (and, failing that, killed by
pid -- only pids of that system, identified by pid and start time).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import procs
from actors.client import Client
from actors.system import SystemSpec, shutdown, start_system, system_pids
from pegasus.config import Settings

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    """A port free on 127.0.0.1 now (the kernel's choice for port 0), never 1900."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port != 1900:  # Thespian's default admin port: never collide with a real one
            return port


@pytest.fixture
def free_port() -> int:
    return _free_port()


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """Environment for child Python processes: the project importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


@pytest.fixture
def python() -> str:
    return sys.executable


def ensure_gone(spec: SystemSpec, seen: dict[int, int], asys: object | None = None) -> None:
    """Shut spec's system down; fail if any process of it (seen or found) survives."""
    seen.update(procs.identities(system_pids(spec)))
    try:
        shutdown(spec, asys, grace=10.0)
    finally:
        # Belt and braces: SIGKILL anything of ours that shutdown missed.
        survivors = procs.kill_all(seen, grace=0.5)
    assert not survivors, f"processes {survivors} survived"
    leftovers = [pid for pid, start in seen.items() if procs.is_alive(pid, start)]
    assert not leftovers, f"processes {leftovers} of port {spec.admin_port} left behind"


@pytest.fixture
def tcp_system(free_port: int, state_dir: Path) -> Iterator[tuple[SystemSpec, object]]:
    """A started multiprocTCPBase system: yields (spec, ActorSystem client).

    Shut down afterwards; every process it had must be gone.
    """
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir)
    asys = start_system(spec)
    seen = procs.identities(system_pids(spec))
    try:
        yield spec, asys
    finally:
        ensure_gone(spec, seen, asys)


@pytest.fixture
def pegasus(free_port: int, state_dir: Path) -> Iterator[Callable[..., Client]]:
    """Start a real Pegasus system (multiprocTCPBase) with settings overrides; returns its client.

    ``start(runtime={"max_active_tasks": 2}, pools={...})``.  Every system started
    is shut down afterwards and every process it had must be gone.
    """
    started: list[tuple[Client, dict[int, int]]] = []

    def start(**overrides: Any) -> Client:
        base = {"system": {"admin_port": free_port}, "state": {"home": str(state_dir)}}
        for section, values in overrides.items():
            base.setdefault(section, {}).update(values)
        client = Client.start(Settings().with_overrides(base))
        started.append((client, procs.identities(system_pids(client.spec))))
        return client

    try:
        yield start
    finally:
        for client, seen in started:
            if client.closed:  # closed (or killed) by the test: its processes must be gone all the same
                assert procs.kill_all(seen, grace=10.0) == [], f"processes of port {client.spec.admin_port} left"
            else:
                ensure_gone(client.spec, seen, client.asys)
