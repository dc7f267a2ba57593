"""The check of Thespian's patches at start, through real processes (actors/thespian_patches).

* Another Thespian version installed: ``pegasus start`` and ``pegasus run`` exit 1 with one line
  ``pegasus: Thespian security patches ... and robustness patches ... cannot apply: ...`` and start
  no process.
* A security or robustness patch's target changed: the start is refused, naming the patch and the
  target that differs; no admin is started.
* A speed patch's target changed: the system starts without that patch (its actors run
  Thespian's own code there, every other patch still in place), after one warning line.

A changed target is made by replacing it before Pegasus is imported, in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import thespian

from actors.runtime import procs
from actors.runtime.system import SystemSpec, is_running, system_pids
from tests.integration.conftest import PROJECT_ROOT, ensure_gone
from tests.support.cli import ARITHMETIC, Pegasus, Sampler, make, stop_and_check, assert_failure

pytestmark = pytest.mark.integration


@pytest.fixture
def other_thespian(tmp_path: Path) -> Iterator[Pegasus]:
    """The CLI, with a Thespian 4.0.2 found first: the installed 4.0.1's code (linked) beside the metadata
    of 4.0.2, which is where the check reads the version of the Thespian imported."""
    dist = tmp_path / "site" / "thespian-4.0.2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thespian\nVersion: 4.0.2\n")
    (dist.parent / "thespian").symlink_to(Path(thespian.__path__[0]), target_is_directory=True)
    path = os.pathsep.join((str(dist.parent), str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")))
    pegasus = make(tmp_path, "other", PYTHONPATH=path)
    try:
        yield pegasus
    finally:
        stop_and_check(pegasus)


@pytest.mark.parametrize("command", [("start",), ("run", ARITHMETIC)])
def test_another_thespian_refuses_to_start_in_one_line(other_thespian: Pegasus, command: tuple[str, ...]) -> None:
    with Sampler(other_thespian.spec) as sampler:
        result = other_thespian(*command)
    assert_failure(result, "Thespian security patches bind_address, frame_auth, private_files, thespian_log and "
                   "robustness patches fresh_retry, convention_timing, logger_restart, child_exits, peer_slots, sent_callbacks, "
                   "client_sends "
                   "cannot "
                   "apply: Thespian 4.0.2 is installed, not 4.0.1", "pip install thespian==4.0.1")
    # No process was ever started for it: at most the command itself is seen (it takes the state
    # directory's lock before the check); a started admin brings its logger and actors with it.
    assert len(sampler.seen[other_thespian.port]) <= 1, sampler.seen
    assert not is_running(other_thespian.spec)


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True,
                          timeout=60)


# Someone else's change to a target, made before Pegasus is imported: (statement, the refusal's start).
CHANGED_TARGETS = {
    "security": ("IPBase.IPActorAddress.bindArgs = property(lambda self: (('', 0),))",
                 "Thespian security patch bind_address cannot apply: IPActorAddress.bindArgs is not the code"),
    "robustness": ("TCPTransport.TCPTransport._next_XMIT_6 = lambda self, intent: False",
                   "Thespian robustness patch fresh_retry cannot apply: TCPTransport._next_XMIT_6 is not the code"),
}


@pytest.mark.parametrize("kind", sorted(CHANGED_TARGETS))
def test_a_changed_security_or_robustness_target_refuses_to_start_naming_it(kind, free_port, state_dir,
                                                                            subprocess_env) -> None:
    change, refusal = CHANGED_TARGETS[kind]
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir)
    with Sampler(spec) as sampler:
        result = _run(f"""
            import os
            print(os.getpid())  # the starter itself takes the state directory's lock before the check
            from thespian.system.transport import IPBase, TCPTransport
            {change}
            from pathlib import Path
            from actors.runtime.system import SystemSpec, SystemStartError, start_system
            try:
                start_system(SystemSpec(admin_port={free_port}, state_dir=Path({str(state_dir)!r})))
            except SystemStartError as exc:
                print(exc)
            """, subprocess_env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    starter, said = result.stdout.split("\n", 1)
    assert said.startswith(refusal), said
    assert "(see docs/thespian-patches.md#" in said
    assert set(sampler.seen[free_port]) <= {int(starter)}  # no admin, no actor was ever started
    assert not is_running(spec)


def test_a_changed_speed_target_runs_without_that_patch_after_one_warning(free_port, state_dir, subprocess_env) -> None:
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir)
    try:
        result = _run(f"""
            import json
            from thespian.system.transport import TCPTransport
            def expired(self):  # someone else's change to a target of quick_idle_checks
                return self.validity.view().expired()
            TCPTransport.IdleSocket.expired = expired
            from pathlib import Path
            from actors.runtime.system import SystemSpec, shutdown, start_system
            from tests.support.echo_actor import EchoActor
            spec = SystemSpec(admin_port={free_port}, state_dir=Path({str(state_dir)!r}))
            asys = start_system(spec)
            try:
                echo = asys.createActor(EchoActor)
                print(json.dumps({{"steps": asys.ask(echo, "steps", 10), "selector": asys.ask(echo, "selector", 10),
                                  "echo": asys.ask(echo, "hello", 10)}}))
            finally:
                shutdown(spec, asys)
            """, subprocess_env)
        assert result.returncode == 0, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "pegasus: warning: running without the Thespian speed patch quick_idle_checks: IdleSocket.expired is not "
            "the code the patch was written for (") and lines[0].endswith(
            "(see docs/thespian-patches.md#quick-idle-checks)"), result.stderr
        seen = json.loads(result.stdout)
        # Thespian's own expiry check (here, the stand-in) and hash; every other patch in place
        assert seen == {"steps": ["_read_incoming", "_send_data", "_read_ack", "expired", "__hash__"],
                        "selector": "PollSet", "echo": "hello"}
    finally:
        ensure_gone(spec, procs.identities(system_pids(spec)))

