"""The ``pegasus`` command line as a test drives it: the real console script for one port and state directory.

``Pegasus`` runs the installed ``pegasus`` script as a subprocess in an empty working directory, with
``$PEGASUS_HOME`` in a temporary directory and an explicit ``--port`` (never 1900), and remembers every
process of its system by (pid, start time); ``stop_and_check`` stops the system and checks each one gone.
``plugins_env`` gives a ``pegasus`` process test plugins (the clone on its path).  Used by the CLI tests
(tests/integration/test_cli_run.py, test_cli_background.py) and every test that drives the CLI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.runtime import procs
from actors.runtime.system import SystemSpec, is_running, stop_daemon, system_pids
from pegasus.config import Settings
from tests.support.hosts import PROJECT_ROOT

if TYPE_CHECKING:
    from actors.client import Client

# The console script of the Python that runs the suite, where pip put it beside the interpreter; else the one
# on PATH.  A pyenv shim on PATH resolves it through ~10 bash processes on every call (~0.1 s of CPU each time).
SCRIPT = next((str(path) for path in [Path(sys.executable).parent / "pegasus"] if path.is_file()), "pegasus")
CLI_TIMEOUT = 60.0  # seconds for one command; they normally take well under 2 s
ARITHMETIC = "what is 2 + 3 * 4?"

# "05:21:38.620  lifecycle       draft -> approved   TASK_APPROVED"
TRANSITION = re.compile(r"^\d\d:\d\d:\d\d\.\d{3}\s+(\S+)\s+(\S+) -> (\S+)\s+(\S+)")


@dataclass
class Pegasus:
    """Runs the real ``pegasus`` script for one port and one state directory."""

    port: int
    home: Path
    cwd: Path
    env_extra: dict[str, str] = field(default_factory=dict)
    seen: dict[int, int] = field(default_factory=dict)  # pid -> start time of this system's processes

    @property
    def spec(self) -> SystemSpec:
        return SystemSpec(admin_port=self.port, state_dir=self.home)

    def env(self) -> dict[str, str]:
        # No PEGASUS_* setting of the caller's may leak in (a config file, another home).
        env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
        env["PEGASUS_HOME"] = str(self.home)
        env.update(self.env_extra)
        return env

    def argv(self, args: Sequence[str]) -> list[str]:
        return [SCRIPT, *args, "--port", str(self.port)]

    def __call__(self, *args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(args), cwd=self.cwd, env=self.env(), capture_output=True,
                              text=True, timeout=timeout)

    def many(self, *commands: Sequence[str]) -> list[subprocess.CompletedProcess[str]]:
        """Run independent commands at once (each pays ~0.4 s of interpreter start-up)."""
        return at_once([(self, c) for c in commands])

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.returncode == 0, f"pegasus {' '.join(args)}: {result.returncode}\n{result.stdout}{result.stderr}"
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def client(self) -> Client:
        """A client of this system, which the caller closes: what a test sets up and reads through where the
        command line is not what it tests (each command is an interpreter's start and its imports)."""
        from actors.client import Client  # here: a test that only runs commands never connects

        return Client.connect(Settings().with_overrides({"system": {"admin_port": self.port},
                                                         "state": {"home": str(self.home)}}))

    def wait_for(self, task_id: str, states: set[str], timeout: float = 60.0) -> dict[str, Any]:
        """The task, as ``status --json`` shows it, once its lifecycle state is one of states.  Polled through a
        client of the system, not ``status`` commands: a wait of seconds took several."""
        client = self.client()
        try:
            return waited(client, task_id, states, timeout)
        finally:
            client.close()

    def track(self) -> None:
        """Remember the system's current processes (checked gone at the end)."""
        self.seen.update(procs.identities(system_pids(self.spec)))

    def admin_pid(self) -> int:
        record = json.loads(self.spec.pid_file.read_text())
        return int(record["admin"][0])


def as_shown(record: Any) -> Any:
    """A client's answer as the command's ``--json`` prints it (dates and paths as text)."""
    return json.loads(json.dumps(record, default=str))


def waited(client: Client, task_id: str, states: set[str], timeout: float = 60.0) -> dict[str, Any]:
    """The task, as ``status --json`` shows it, once its lifecycle state is one of states."""
    return dict(as_shown(client.wait(task_id, timeout=timeout, until=frozenset(states))))


def at_once(commands: Sequence[tuple[Pegasus, Sequence[str]]]) -> list[subprocess.CompletedProcess[str]]:
    """Run (pegasus, args) commands concurrently; their results in order.

    One still running after ``CLI_TIMEOUT`` is killed and its pipes closed unread: the processes of a system
    it started hold them, so reading to their end would never return (the fixture that made its
    ``Pegasus`` stops that system).
    """
    running = [(p.argv(args), subprocess.Popen(p.argv(args), cwd=p.cwd, env=p.env(), text=True,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE))
               for p, args in commands]
    done = []
    try:
        for argv, proc in running:
            out, err = proc.communicate(timeout=CLI_TIMEOUT)
            done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    finally:
        for _, proc in running:
            stop_unread(proc)
    return done


def stop_unread(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if it still runs and close its pipes unread: a system it started holds them open."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def assert_failure(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 1, exactly one stderr line 'pegasus: <reason>' mentioning fragments, no stdout.

    (``run`` may have printed the transitions it saw before it failed.)
    """
    where = f"{' '.join(result.args)} -> {result.returncode}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.returncode == 1, where
    assert result.stdout == "" or result.args[1] == "run", where
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pegasus: "), where
    assert "Traceback" not in result.stderr, where
    for fragment in fragments:
        assert fragment in lines[0], where


def assert_gone(seen: dict[int, int], what: str) -> None:
    leftovers = procs.wait_gone(seen, 60.0)
    assert not leftovers, f"processes {leftovers} of {what} left behind"


def transitions(stdout: str) -> list[tuple[str, str, str, str]]:
    """(machine, from, to, event) of every transition line ``run`` printed, in order."""
    return [m.groups() for m in map(TRANSITION.match, stdout.splitlines()) if m]  # type: ignore[misc]


class Sampler:
    """Collects the processes of the specs' systems while short-lived commands run."""

    def __init__(self, *specs: SystemSpec) -> None:
        self.specs = specs
        self.seen: dict[int, dict[int, int]] = {spec.admin_port: {} for spec in specs}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for spec in self.specs:
                self.seen[spec.admin_port].update(procs.identities(system_pids(spec)))
            self._stop.wait(0.02)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()



def plugins_env(*plugins: str) -> dict[str, str]:
    """The settings that load test plugins in a ``pegasus`` process, with the clone on its path: an editable
    install maps only ``actors`` and ``pegasus``, so ``tests`` imports only from the clone's root."""
    return {"PEGASUS_TOOLS__PLUGINS": json.dumps(list(plugins)), "PYTHONPATH": str(PROJECT_ROOT)}


def make(tmp: Path, name: str, **env_extra: str) -> Pegasus:
    home, cwd = tmp / f"{name}-home", tmp / f"{name}-cwd"
    home.mkdir()
    cwd.mkdir()
    return Pegasus(port=procs.free_port(), home=home.resolve(), cwd=cwd.resolve(), env_extra=dict(env_extra))


def stop_and_check(pegasus: Pegasus) -> None:
    """Finalizer: stop the system if it still runs; every process ever seen must be gone."""
    pegasus.track()
    try:
        if is_running(pegasus.spec):
            stop_daemon(pegasus.spec)
    finally:
        survivors = procs.kill_all(dict(pegasus.seen), grace=5.0)  # only our own pids, by identity
    assert not survivors, f"processes {survivors} survived SIGKILL"
    assert not is_running(pegasus.spec)


def start_here(pegasus: Pegasus, **overrides: Any) -> None:
    """The system of ``pegasus``'s port and home, with the settings its environment gives a command, started from
    this process as the ``pegasus`` fixture starts one (forked: no launcher, nothing imported again) and left
    running for the commands to attach to; ``stop_and_check`` (or ``pegasus stop``) stops it.  For a test of
    commands on a running system: ``pegasus start`` itself is tests/integration/test_cli_background.py's.
    ``overrides``: settings by section, as ``pegasus start``'s flags give them (``http={"enabled": True, ...}``)."""
    from actors.client import Client  # here: a test that only runs commands never starts one itself
    from pegasus.config.settings import load

    settings = load(environ=pegasus.env()).with_overrides({"system": {"admin_port": pegasus.port},
                                                           "state": {"home": str(pegasus.home)}, **overrides})
    client = Client.start(settings)
    client.owns_system = False  # closed, it detaches: the system runs on, as a background one does
    client.close()
    pegasus.track()


def start_background(pegasus: Pegasus) -> dict[str, Any]:
    """``pegasus start --json`` with stdout/stderr on pipes returns while its system runs on.

    An admin that inherited the pipes would hold them open for its whole life: ``start`` would never see
    EOF (TimeoutExpired here).  Returning with the system still running is the fact, whatever the load.
    """
    result = pegasus("start", "--json")
    pegasus.track()
    assert result.returncode == 0, result.stderr
    assert is_running(pegasus.spec), "start returned, but its system is not running"
    return json.loads(result.stdout)
