"""The store's files and the MCP servers' logs are private whatever the umask: the database holds
every prompt and result, a server's stderr may quote tool output."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pegasus.config import Settings
from pegasus.store import Store
from pegasus.tools import mcp
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import ToolExecutionError

# A server that never answers (its stderr written, then a sleep): its start alone opens its log, without the
# mcp SDK's import that a working server costs (~1 s of CPU).
HUNG = str(Path(__file__).resolve().parents[1] / "support" / "mcp_hung.py")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def wide_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_database_wal_and_shm_are_0600_in_a_0700_directory(tmp_path: Path, wide_umask: None) -> None:
    """Issue 15: the database was 0644 (prompts world-readable)."""
    store = Store(tmp_path / "state" / "pegasus.db")  # creating the schema writes the WAL
    names = {p.name: mode(p) for p in (tmp_path / "state").iterdir()}
    assert names == {"pegasus.db": 0o600, "pegasus.db-wal": 0o600, "pegasus.db-shm": 0o600}
    assert mode(tmp_path / "state") == 0o700
    store.close()


def test_an_older_wide_store_is_narrowed(tmp_path: Path, wide_umask: None) -> None:
    Store(tmp_path / "pegasus.db").close()
    for path in tmp_path.iterdir():
        os.chmod(path, 0o644)
    os.chmod(tmp_path, 0o755)
    store = Store(tmp_path / "pegasus.db")
    assert mode(tmp_path) == 0o700
    assert all(mode(path) == 0o600 for path in tmp_path.iterdir())
    store.close()


def test_an_mcp_servers_log_is_private(tmp_path: Path, wide_umask: None) -> None:
    registry = registry_for(Settings().with_overrides({
        "mcp": {"servers": [{"name": "demo", "command": sys.executable, "args": [HUNG]}], "start_timeout_s": 1.0},
        "state": {"home": str(tmp_path / "state")}}))
    try:
        with pytest.raises(ToolExecutionError, match="demo.reverse is unavailable"):
            registry.call("demo.reverse", {"text": "abc"})
    finally:
        mcp.close_all()
    logs = tmp_path / "state" / "logs"
    assert mode(logs) == 0o700 and {p.name: mode(p) for p in logs.iterdir()} == {"mcp-demo.log": 0o600}
