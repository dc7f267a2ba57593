"""A start finds its admin cheaply (issue 30): among the processes of the session the admin's start opened,
proved by the lock and the admin port, never by a scan of every process of the host (~10 ms a start here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.runtime import ownership, procs, system
from actors.runtime.system import SystemSpec, read_owner, start_system, system_pids
from tests.integration.conftest import ensure_gone

pytestmark = pytest.mark.integration


def test_a_start_records_its_admin_without_a_scan_of_every_process(
        free_port: int, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[SystemSpec] = []
    every_process = system._admin_pid

    def scan(spec: SystemSpec) -> int | None:
        scans.append(spec)
        return every_process(spec)

    monkeypatch.setattr(system, "_admin_pid", scan)
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir)
    asys = start_system(spec)
    seen = procs.identities(system_pids(spec))
    try:
        record = read_owner(spec)
        assert record is not None and record["admin"] is not None
        admin, start = record["admin"]
        assert seen.get(admin) == start and ownership.holds(admin, state_dir)
        assert procs.listener_pid(free_port, list(seen)) == admin  # the admin, not its logger holding the socket too
    finally:
        ensure_gone(spec, seen, asys)
    assert scans == []  # the admin was found in its own session
