"""The Thespian system boundary (actors/runtime/system.py) against real multiprocTCPBase systems.

What is proven here: every listening socket of every process of a system is on
127.0.0.1; a background start from a piped CLI returns promptly and leaves no
process behind after stop; attach fails fast without a system; non-loopback
binds are refused; logs land under state_dir/logs and nothing in the cwd.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator

import pytest

from actors.runtime import procs
from actors.runtime.system import (
    SystemNotRunningError,
    SystemSpec,
    SystemStartError,
    attach,
    detach,
    is_running,
    start_daemon,
    start_system,
    stop_daemon,
    system_pids,
    validate,
)
from tests.integration.conftest import ensure_gone
from tests.support.echo_actor import EchoActor

pytestmark = pytest.mark.integration

ASK = 10  # seconds; a reply normally takes milliseconds


@pytest.fixture
def cleanup() -> Iterator[list[SystemSpec]]:
    """Specs appended here are shut down (and checked gone) after the test."""
    specs: list[SystemSpec] = []
    yield specs
    for spec in specs:
        ensure_gone(spec, procs.identities(system_pids(spec)))


def _listeners(pids: list[int]) -> dict[int, list[tuple[str, int]]]:
    table = procs.listening_sockets()
    return {pid: procs.listening_addresses(pid, table) for pid in pids}


# --- bind --------------------------------------------------------------------------


def test_every_listening_socket_of_every_process_is_loopback(tcp_system):
    spec, asys = tcp_system
    parents = [asys.createActor(EchoActor) for _ in range(3)]
    children = [asys.ask(p, ("spawn",), ASK) for p in parents[:2]]
    actor_pids = {asys.ask(a, "pid", ASK) for a in parents + children}
    assert len(actor_pids) == 5  # one process per actor

    pids = system_pids(spec)
    assert actor_pids <= set(pids)
    assert len(pids) >= 7  # admin + logger + 5 actors
    listeners = _listeners(pids)
    assert all(listeners[pid] for pid in actor_pids), listeners  # not vacuous
    assert any(port == spec.admin_port for addrs in listeners.values() for _, port in addrs)
    wrong = {pid: addrs for pid, addrs in listeners.items() if any(ip != "127.0.0.1" for ip, _ in addrs)}
    assert not wrong, f"sockets not on 127.0.0.1: {wrong}"
    # The client endpoint in this process is bound the same way.
    mine = _listeners([os.getpid()])[os.getpid()]
    assert mine and all(ip == "127.0.0.1" for ip, _ in mine), mine


def test_socket_detector_reports_a_wildcard_listener():
    # Guards the test above against a detector that cannot see 0.0.0.0.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("0.0.0.0", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert ("0.0.0.0", port) in _listeners([os.getpid()])[os.getpid()]


def test_thespian_addresses_bind_to_the_configured_host(tcp_system):
    from thespian.system.transport.IPBase import TCPv4ActorAddress

    # external=True is what Thespian uses for every endpoint: it binds ('', port).
    address = TCPv4ActorAddress(None, 0, external=True)
    assert address.bindArgs == (("127.0.0.1", 0),)
    assert address.sockname[0] == "127.0.0.1"  # advertised == bound


def test_actors_select_with_one_poll_call(tcp_system):
    # Thespian's speed patches (actors/wire/thespian_patches/speed), asked of an actor forked from the
    # admin and of its child: both inherit them.  poll_selector: not a new epoll set per loop.
    spec, asys = tcp_system
    parent = asys.createActor(EchoActor)
    child = asys.ask(parent, ("spawn",), ASK)
    assert asys.ask(parent, "selector", ASK) == asys.ask(child, "selector", ASK) == "PollSet"
    # deferred_descriptions: Thespian's debug descriptions of messages are built only when written
    assert asys.ask(parent, "described", ASK) == asys.ask(child, "described", ASK) == "_Description"
    # whole_messages: a whole message is read (and a send goes on to wait for its acknowledgement) per
    # loop; quick_idle_checks (tests/actors/wire/test_thespian_transport.py drives both over real sockets)
    assert asys.ask(parent, "steps", ASK) == asys.ask(child, "steps", ASK) == [
        "_read_incoming", "_send_data", "_read_ack", "_idle_expired", "_address_hash"]
    # own_stack_chunk: each actor's loop runs above a frame that holds a frame-stack chunk of its own
    for actor in (parent, child):
        stack = asys.ask(actor, "stack", ASK)
        assert "_on_own_stack_chunk" in stack and stack.index("_on_own_stack_chunk") > stack.index("receiveMessage")


def test_the_stack_chunk_frame_is_wider_than_a_chunk_and_passes_calls_through():
    from actors.wire.thespian_patches.speed.own_stack_chunk import on_own_stack_chunk

    code = on_own_stack_chunk.__code__
    assert (code.co_nlocals + code.co_stacksize) * 8 > 32 * 1024  # more than two 16 KiB chunks: a 64 KiB one
    assert code.co_varnames == ("run", "args", "kwargs")  # declared stack depth, not 4,200 named locals (~1 MiB)
    assert on_own_stack_chunk(lambda a, b=0: (a, b), (1,), {"b": 2}) == (1, 2)


@pytest.mark.parametrize("bind", ["0.0.0.0", "10.1.2.3"])
@pytest.mark.parametrize("start", [start_system, start_daemon, attach], ids=["start_system", "start_daemon", "attach"])
def test_non_loopback_bind_is_refused(bind, start, free_port, state_dir):
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir, bind=bind)
    with pytest.raises(SystemStartError, match="allow_non_loopback"):
        start(spec)
    assert not is_running(SystemSpec(admin_port=free_port, state_dir=state_dir))
    assert not spec.pid_file.exists()
    allowed = SystemSpec(admin_port=free_port, state_dir=state_dir, bind=bind, allow_non_loopback=True)
    if bind == "0.0.0.0":
        validate(allowed)
    else:  # allowed, but no interface of this host has it
        with pytest.raises(SystemStartError, match="10.1.2.3 is not an address of this host"):
            validate(allowed)


# --- attach ---------------------------------------------------------------------------


def test_attach_without_a_system_fails_fast(free_port, state_dir):
    """Without a system, attach says so (it does not start one, nor wait for an admin to appear)."""
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir)
    with pytest.raises(SystemNotRunningError):
        attach(spec)
    assert not is_running(spec)  # attach never starts a system


def test_start_refuses_a_running_port_and_detach_keeps_the_system(tcp_system):
    spec, asys = tcp_system
    with pytest.raises(SystemStartError, match=f"is in use by the Pegasus system on 127.0.0.1:{spec.admin_port} "
                       r"\(admin pid \d+\)"):
        start_system(spec)
    client = attach(spec)
    echo = client.createActor(EchoActor)
    assert client.ask(echo, "ping", ASK) == "ping"
    detach(client)
    assert is_running(spec)
    assert asys.ask(echo, "still here", ASK) == "still here"


# --- daemon -------------------------------------------------------------------------------

START_DAEMON = """
import sys
from pathlib import Path
from actors.runtime.system import SystemSpec, start_daemon
print(start_daemon(SystemSpec(admin_port=int(sys.argv[1]), state_dir=Path(sys.argv[2]))))
"""

ATTACH_AND_ASK = """
import sys
from pathlib import Path
from actors.runtime.system import SystemSpec, attach, detach
from tests.support.echo_actor import EchoActor
asys = attach(SystemSpec(admin_port=int(sys.argv[1]), state_dir=Path(sys.argv[2])))
echo = asys.createActor(EchoActor)
print(asys.ask(echo, "pid", 10), asys.ask(echo, "hello", 10))
detach(asys)
"""


def test_daemon_from_a_piped_cli_returns_promptly_then_attach_and_stop(
    free_port, state_dir, tmp_path, python, subprocess_env, cleanup
):
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir)
    cleanup.append(spec)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    # stdout is a pipe read to EOF: if the admin inherited it, this would hang
    # (TimeoutExpired) instead of returning, with the system running on, as soon as start_daemon does.
    result = subprocess.run(
        [python, "-c", START_DAEMON, str(free_port), str(state_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=subprocess_env, timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode()
    admin_pid = int(result.stdout)
    assert is_running(spec)
    assert admin_pid in system_pids(spec)

    result = subprocess.run(
        [python, "-c", ATTACH_AND_ASK, str(free_port), str(state_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=subprocess_env, timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode()
    actor_pid, reply = result.stdout.decode().split()
    assert reply == "hello"
    pids = system_pids(spec)
    assert int(actor_pid) in pids
    wrong = {p: a for p, a in _listeners(pids).items() if any(ip != "127.0.0.1" for ip, _ in a)}
    assert not wrong

    seen = procs.identities(pids)
    stop_daemon(spec)
    assert not [pid for pid, start in seen.items() if procs.is_alive(pid, start)]
    assert not is_running(spec) and system_pids(spec) == []
    assert not spec.pid_file.exists()
    assert os.listdir(cwd) == []


def test_daemon_stop_ends_actors_orphaned_by_a_killed_parent(free_port, state_dir, cleanup):
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir)
    cleanup.append(spec)
    start_daemon(spec)
    client = attach(spec)
    try:
        parent = client.createActor(EchoActor)
        child = client.ask(parent, ("spawn",), ASK)
        parent_pid, child_pid = client.ask(parent, "pid", ASK), client.ask(child, "pid", ASK)
    finally:
        detach(client)
    assert {parent_pid, child_pid} <= set(system_pids(spec))
    seen = procs.identities(system_pids(spec))
    os.kill(parent_pid, signal.SIGKILL)  # a pid of this test's own system
    assert procs.wait_gone({parent_pid: seen[parent_pid]}, 60.0) == []
    # The orphan is re-parented to the launcher (a subreaper), not PID 1.
    assert child_pid in system_pids(spec)
    stop_daemon(spec, grace=2.0)
    assert not [pid for pid, start in seen.items() if procs.is_alive(pid, start)]


# --- logs -----------------------------------------------------------------------------------

RUN_AND_LOG = """
import sys
from pathlib import Path
from actors.runtime.system import SystemSpec, start_system, shutdown
from tests.support.echo_actor import EchoActor
spec = SystemSpec(admin_port=int(sys.argv[1]), state_dir=Path(sys.argv[2]), thesplog_level="INFO")
asys = start_system(spec)
try:
    echo = asys.createActor(EchoActor)
    assert asys.ask(echo, ("log", "marker-from-actor"), 10) == "logged"
finally:
    shutdown(spec, asys)
"""


def test_logs_land_under_state_dir_and_cwd_stays_empty(free_port, state_dir, tmp_path, python, subprocess_env, cleanup):
    spec = SystemSpec(admin_port=free_port, state_dir=state_dir)
    cleanup.append(spec)
    cwd, tmpdir = tmp_path / "cwd", tmp_path / "tmpdir"
    cwd.mkdir()
    tmpdir.mkdir()
    env = dict(subprocess_env, TMPDIR=str(tmpdir))
    env.pop("THESPLOG_FILE", None)
    result = subprocess.run(
        [python, "-c", RUN_AND_LOG, str(free_port), str(state_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert os.listdir(cwd) == []
    assert os.listdir(tmpdir) == []  # Thespian's default is $TMPDIR/thespian.log
    thesplog = state_dir / "logs" / "thespian.log"
    assert thesplog.exists() and "shutdown" in thesplog.read_text()
    assert "marker-from-actor" in (state_dir / "logs" / "actors.log").read_text()


def test_a_deferred_message_description_is_thespians_own_and_still_logged(tmp_path, monkeypatch):
    import logging
    import re

    from thespian.actors import ActorAddress
    from thespian.system import transport, utilis

    from actors.wire.thespian_patches.security import thespian_log
    from actors.wire.thespian_patches.speed import deferred_descriptions

    for name in ("_thesplog_control_settings", "_thesplog_file", "_thesplog_old_file"):
        monkeypatch.setattr(utilis, name, getattr(utilis, name))  # put back afterwards
    for name in ("THESPLOG_FILE", "THESPLOG_FILE_MAXSIZE", "THESPLOG_THRESHOLD"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    def untimed(text: str) -> str:  # an intent's description includes its time left
        return re.sub(r"\d+:\d\d:\d\d\.\d+", "T", text)

    deferred_descriptions.install()
    intent = transport.TransmitIntent(ActorAddress("target"), {"payload": 1})
    described = intent.identify()
    assert type(described).__name__ == "_Description"
    own = untimed(deferred_descriptions._INTENT.original(intent))
    assert untimed(str(described)) == own and "TransportIntent(" in own
    envelope = transport.ReceiveEnvelope(ActorAddress("sender"), "hello")
    assert str(envelope) == str(envelope.identify()) == deferred_descriptions._ENVELOPE.original(envelope)
    assert "hello" in str(envelope)
    log = thespian_log.install(tmp_path, "DEBUG")
    utilis.thesplog("Attempting intent %s", intent.identify(), level=logging.DEBUG)
    assert f"Attempting intent {own}" in untimed(log.read_text())
