"""Fixtures for tests that run real multiprocTCPBase systems.

Every system a test starts is shut down in a finalizer, even when the test
fails, and every process it had is checked gone (and, failing that, killed by
pid -- only pids of that system, identified by pid and start time).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from actors.client import Client
from actors.runtime.system import SystemSpec, shutdown, start_system, system_pids
from pegasus.config import Settings
from pegasus.logs import LOG_FILE
from tests.support.cli import make, stop_and_check

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TROUBLE_LINES = 40  # a failed test's report shows at most this many of its system's warnings and errors


FAILED = pytest.StashKey[bool]()  # set on a test whose call failed: its fixtures' finalizers can tell


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


def print_trouble(state_dir: Path) -> None:
    """The system's warnings and errors (logs/pegasus.jsonl), printed: a failed test's report shows them
    (under "Captured stdout teardown"), so a failure seen only in CI says what the system went through."""
    path = state_dir / "logs" / LOG_FILE
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        print(f"no system log at {path}: {exc}")
        return
    trouble = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("level") in ("warning", "error", "critical"):
            trouble.append(line)
    print(f"{len(trouble)} warnings and errors in {path}" + (f", the last {TROUBLE_LINES}:" if trouble else ""))
    for line in trouble[-TROUBLE_LINES:]:
        print(line[:600])


@pytest.fixture
def free_port() -> int:
    return procs.free_port()


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
def pegasus(free_port: int, state_dir: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Client]]:
    """Start a real Pegasus system (multiprocTCPBase) with settings overrides; returns its client.

    ``start(runtime={"max_active_tasks": 2}, pools={...})``; ``start(daemon=True, ...)`` starts it in
    the background (``pegasus start``): its processes then descend from a fresh launcher, not from this
    test process and what it imported.  Every system started is shut down afterwards and every
    process it had must be gone.
    """
    started: list[tuple[Client, dict[int, int]]] = []

    def start(*, daemon: bool = False, **overrides: Any) -> Client:
        base = {"system": {"admin_port": free_port}, "state": {"home": str(state_dir)}}
        for section, values in overrides.items():
            base.setdefault(section, {}).update(values)
        settings = Settings().with_overrides(base)
        if settings.llm.provider == "openai" and not daemon:
            # Once for this process: every system forked from it inherits the SDK, where each one's llm pool
            # imported it again (its preload, actors/runtime/sharing.py, still runs: the import is found done).
            import openai  # noqa: F401, PLC0415
        client = Client.start_daemon(settings)[0] if daemon else Client.start(settings)
        started.append((client, procs.identities(system_pids(client.spec))))
        return client

    try:
        yield start
    finally:
        if started and request.node.stash.get(FAILED, False):
            print_trouble(state_dir)
        for client, seen in started:
            if client.closed:  # closed (or killed) by the test: its processes must be gone all the same
                assert procs.kill_all(seen, grace=10.0) == [], f"processes of port {client.spec.admin_port} left"
            else:
                ensure_gone(client.spec, seen, client.asys)


# -- conventions: a leader and members on one host ------------------------------------------------

# Fast failure detection for tests: a dead member is noticed in ~2-3 s (defaults: ~8.5 s).
FAST_CONVENTION = {"reregistration_period_s": 1.0, "registration_miss_max": 2, "restart_period_s": 1.0}


class Convention:
    """A leader and members on 127.0.0.1, each admin on its own free port and state directory.

    ``leader()`` starts the leader (forked from the test process, like ``Client.start``);
    ``join()`` starts a member as ``pegasus join`` does (a background daemon);
    ``member_settings()`` / ``track()`` let a test start one through the CLI.  The fixture's
    finalizer stops members first, then the leader (a member shut down after its leader can
    wait minutes on a transmit), and checks that no process of any of them is left.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.client: Client | None = None
        self.leader_port = procs.free_port()
        self.members: list[tuple[SystemSpec, dict[int, int]]] = []
        self.leader_seen: dict[int, int] = {}
        self.leader_spec: SystemSpec | None = None  # a leader started by the CLI (track_leader)

    def settings(self, port: int, name: str, **overrides: Any) -> Settings:
        base: dict[str, Any] = {"system": {"admin_port": port}, "state": {"home": str(self.root / name)},
                                "convention": dict(FAST_CONVENTION)}
        for section, values in overrides.items():
            base.setdefault(section, {}).update(values)
        return Settings().with_overrides(base)

    def leader(self, **overrides: Any) -> Client:
        self.client, _ = Client.start_leader(self.settings(self.leader_port, "leader", **overrides), daemon=False)
        self.leader_seen = procs.identities(system_pids(self.client.spec))
        return self.client

    @property
    def key_file(self) -> Path:
        """The leader's system key: what a member is given (``pegasus join --key-file``)."""
        return self.root / "leader" / "system.key"

    @property
    def leader_address(self) -> str:
        return f"127.0.0.1:{self.leader_port}"

    def member_settings(self, name: str, port: int | None = None, **overrides: Any) -> Settings:
        return self.settings(port or procs.free_port(), name, **overrides)

    def join(self, name: str, port: int | None = None, **capabilities: Any) -> SystemSpec:
        """A member offering ``llm_workers=``/``tool_workers=`` (and any other capability)."""
        from actors.runtime.lifecycle import System

        caps = {(k if "." in k else f"pegasus.{k}"): v for k, v in capabilities.items()}
        member = System.member(self.member_settings(name, port), self.leader_address, caps)
        member.join(key_file=self.key_file)
        self.track(member.spec)
        return member.spec

    def track(self, spec: SystemSpec) -> None:
        """Remember a member (started by the test or the CLI) and its processes so far."""
        for known, seen in self.members:
            if known.admin_port == spec.admin_port:
                seen.update(procs.identities(system_pids(known)))
                return
        self.members.append((spec, procs.identities(system_pids(spec))))

    def track_leader(self, spec: SystemSpec) -> None:
        """Remember a leader started by the CLI (``pegasus start --leader``) and its processes so far."""
        self.leader_spec = spec
        self.leader_seen.update(procs.identities(system_pids(spec)))

    def close(self) -> None:
        failures = []
        for spec, seen in reversed(self.members):  # members before the leader
            try:
                ensure_gone(spec, seen)
            except Exception as exc:  # noqa: BLE001 - stop the others all the same
                failures.append(exc)
        if self.client is not None and self.client.closed:  # stopped by the test: must be gone all the same
            assert procs.kill_all(self.leader_seen, grace=10.0) == [], "processes of the leader left"
        elif self.client is not None:
            ensure_gone(self.client.spec, self.leader_seen, self.client.asys)
            self.client.closed = True
        elif self.leader_spec is not None:
            ensure_gone(self.leader_spec, self.leader_seen)
        assert not failures, failures


@pytest.fixture
def convention(tmp_path: Path) -> Iterator[Convention]:
    """A convention on 127.0.0.1 (see Convention); everything it started is gone afterwards."""
    conv = Convention(tmp_path)
    try:
        yield conv
    finally:
        conv.close()


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Any]:
    """The CLI (tests/support/cli.py's ``Pegasus``) on a fresh port and home, no system started
    (``run`` may embed one)."""
    pegasus = make(tmp_path, "cli")
    try:
        yield pegasus
    finally:
        stop_and_check(pegasus)
