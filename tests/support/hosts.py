"""A convention across hosts: a leader and members, each in a network namespace of its own (tests/support/netns.py).

``Machines`` runs each admin as a user would, through the real command line
inside the host's namespace (``ip netns exec NS python -m actors.cli start
--leader`` / ``join LEADER:PORT --key-file ...``), each binding its own
address with ``allow_non_loopback``; the test talks to the leader through a
``Driver`` (a Client in the leader's namespace, over pipes).  Every process
any of them had is remembered by (pid, start time) and, at ``close``, stopped
then killed by pid; the namespaces are deleted last.  On ``Loopback``
the same convention runs on one network stack (127.0.0.1, a port each): the
benchmark's comparison (benchmarks/hosts.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actors.runtime import convention as conv, procs
from actors.runtime.spec import SystemSpec
from actors.runtime.system import system_pids
from pegasus import config, files
from pegasus.config import Settings
from tests.support.netns import Hosts, Loopback

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def toml(sections: dict[str, dict[str, Any]]) -> str:
    return "".join(f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()) + "\n"
                   for name, values in sections.items())


class Driver:
    """A Client in the leader's namespace: ``driver.call("submit", text)`` -> its result."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([*argv, sys.executable, "-m", "tests.support.hosts_driver"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self._read()
        assert ready == {"ok": "ready"}, ready

    def _read(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the driver exited ({self.proc.wait()})")
        return json.loads(line)

    def call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, "args": args, "kwargs": kwargs}) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["ok"]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Machines:
    """A leader and members, one per namespace of ``hosts`` (the first host leads)."""

    def __init__(self, root: Path, hosts: Hosts | Loopback, convention: dict[str, Any] | None = None) -> None:
        self.root, self.hosts = root, hosts
        self.convention = dict(convention or {})  # [convention] settings of every host (failure detection)
        self.leader_host = hosts.names[0]
        self.seen: dict[int, int] = {}
        self.drivers: list[Driver] = []
        self.specs: dict[str, SystemSpec] = {}

    @property
    def leader_address(self) -> str:
        return f"{self.hosts.address(self.leader_host)}:{self.hosts.port(self.leader_host)}"

    @property
    def key_file(self) -> Path:
        return self.root / self.leader_host / "system.key"

    def env(self, host: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
        env["PEGASUS_HOME"] = str(self.root / host)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        return env

    def configure(self, host: str, **sections: dict[str, Any]) -> Settings:
        """Write the host's pegasus.toml: its own address, the opt-in, fast failure detection."""
        home = self.root / host
        home.mkdir(mode=0o700, exist_ok=True)
        base: dict[str, dict[str, Any]] = {
            "system": {"admin_port": self.hosts.port(host), "bind": self.hosts.address(host),
                       "allow_non_loopback": self.hosts.address(host) != "127.0.0.1"},
            "convention": dict(self.convention), "state": {"home": str(home)}}
        for name, values in sections.items():
            base.setdefault(name, {}).update(values)
        (home / "pegasus.toml").write_text(toml(base))
        return config.load(home / "pegasus.toml", environ=self.env(host))

    def pegasus(self, host: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """The real command line, inside the host's namespace."""
        return subprocess.run([*self.hosts.exec_argv(host), sys.executable, "-m", "actors.cli", *args],
                              env=self.env(host), cwd=self.root, capture_output=True, text=True, timeout=timeout)

    def start_leader(self, **sections: dict[str, Any]) -> SystemSpec:
        settings = self.configure(self.leader_host, **sections)
        started = self.pegasus(self.leader_host, "start", "--leader")
        spec = conv.leader_spec(settings.with_overrides({"convention": {"lead": True}}))
        self._track(self.leader_host, spec)
        assert started.returncode == 0, started.stderr
        return spec

    def join(self, host: str, llm: int, tool: int) -> SystemSpec:
        settings = self.configure(host)
        joined = self.pegasus(host, "join", self.leader_address, "--key-file", str(self.key_file),
                              "--capability", f"pegasus.llm_workers={llm}",
                              "--capability", f"pegasus.tool_workers={tool}", "--json")
        spec = conv.member_spec(settings, self.leader_address, {})
        self._track(host, spec)
        assert joined.returncode == 0, joined.stderr
        assert json.loads(joined.stdout)["member"] == spec.member_name == f"{self.hosts.address(host)}:{self.hosts.port(host)}"
        return spec

    def driver(self) -> Driver:
        driver = Driver(self.hosts.exec_argv(self.leader_host), self.env(self.leader_host))
        self.drivers.append(driver)
        return driver

    def pids(self, host: str) -> list[int]:
        pids = system_pids(self.specs[host])
        self.seen.update(procs.identities(pids))
        return pids

    def kill(self, host: str) -> list[int]:
        """SIGKILL every process of the host's admin (by the pids its state directory names), as a machine's
        death would: again until none is left, since a launcher's watcher may fork in between."""
        victims: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while (found := procs.identities(self.pids(host))) and time.monotonic() < deadline:
            for pid, start in found.items():
                if procs.is_alive(pid, start):
                    os.kill(pid, signal.SIGKILL)
            victims.update(found)
            time.sleep(0.05)
        return list(victims)

    def _track(self, host: str, spec: SystemSpec) -> None:
        self.specs[host] = spec
        self.seen.update(procs.identities(system_pids(spec)))

    def close(self) -> None:
        """End every process any host had, by pid (a clean ``pegasus stop`` is test_deploy_recipe's): each
        launcher is told first that this is a stop, so none starts its admin again; then the namespaces go."""
        try:
            for driver in self.drivers:
                driver.close()
            for spec in self.specs.values():
                if spec.state_dir.is_dir():
                    files.write_private(spec.stopping_file, b"")
            for _ in range(2):  # a process started meanwhile descends from one seen: the second round finds it
                for host in self.specs:
                    self.pids(host)
                procs.kill_all(self.seen, grace=0.0)
            survivors = [pid for pid, start in self.seen.items() if procs.is_alive(pid, start)]
            assert not survivors, f"processes {survivors} survived"
        finally:
            self.hosts.close()


TEST_BOUND_S = 300  # a namespace test (~6-30 s alone, ~60 s on 2 cores at load 17) past this is stuck


@contextmanager
def time_bound(seconds: int = TEST_BOUND_S) -> Iterator[None]:
    """Raise TimeoutError in the test after ``seconds`` (SIGALRM), so a stuck one still reaches its finalizers."""
    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"a namespace test ran past its {seconds} s bound")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def listening_on(pid: int) -> set[str]:
    """The addresses pid's TCP sockets listen on, read in its own network namespace."""
    inodes = set(procs.socket_inodes(pid))
    found = set()
    with open(f"/proc/{pid}/net/tcp", encoding="ascii") as table:
        for row in list(table)[1:]:
            cols = row.split()
            if cols[3] == "0A" and int(cols[9]) in inodes:  # LISTEN
                raw = bytes.fromhex(cols[1].split(":")[0])
                found.add(".".join(str(b) for b in reversed(raw)))
    return found

