"""Nobody gets in: frames are authenticated before they are unpickled, and nothing is done by port alone.

Against real multiprocTCPBase systems:

* the issue's 67-byte pickle (``__reduce__`` -> ``os.mkdir``), sent to every listening
  socket of every process of a system, as another uid and as this uid without
  the key, runs nowhere; the system counts, logs and keeps serving;
* a frame with a bad MAC, a truncated frame and an oversized length header are
  each refused (the oversized one before its body is read);
* an authentic request the supervisor cannot unpickle gets a clear BadRequest,
  and a message too large to send is refused by the sender;
* a convention member with another key is refused, with a clear error on both sides;
* a second system on one state directory is refused, naming the owner;
* ``stop``/``status``/``start`` never touch a program that merely holds the port;
* everything under the state directory is private.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.wire import frames
from actors.runtime import procs
from actors.runtime.ownership import key_path, load_key
from actors.runtime import convention as conv
from actors.runtime.lifecycle import System
from actors.client import Client, RequestError
from actors.runtime.system import SystemSpec, is_running, stop_daemon, system_pids
from pegasus.config import Settings
from tests.integration.conftest import Convention
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

NOBODY = 65534


class _MakeDir:
    """The attack: unpickling this creates a directory (any code would run the same way)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # noqa: ANN204
        return (os.mkdir, (self.path,))


def raw_frame(obj: object) -> bytes:
    """Thespian's frame as an attacker writes it: ``<size>>`` + a bare pickle."""
    data = pickle.dumps(obj)
    return b"%d>" % len(data) + data


def send_raw(port: int, data: bytes, timeout: float = 2.0) -> bytes:
    """Send bytes to 127.0.0.1:port, return what comes back before the peer closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        reply = b""
        try:
            while chunk := sock.recv(4096):
                reply += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return reply


def listening_ports(spec: SystemSpec) -> set[int]:
    """Every port a process of the system listens on: the admin, the logger, every actor."""
    listening = procs.listening_sockets()
    return {port for pid in system_pids(spec) for _, port in procs.listening_addresses(pid, listening)}


def as_uid(uid: int, action: Callable[[], None]) -> int:
    """Run ``action`` in a forked child that has dropped to ``uid``; its exit status."""
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def log_lines(state_dir: Path, event: str) -> list[dict]:
    path = state_dir / "logs" / "pegasus.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return [line for line in lines if line.get("event") == event]


def serves(client: Client) -> bool:
    done = client.wait(client.submit("what is 6 * 7?")["task_id"], timeout=60)
    return done["lifecycle_state"] == "done" and "42" in str(done["result"])


# -- the attack ------------------------------------------------------------------------------


def test_the_raw_pickle_runs_nowhere_as_another_uid_or_without_the_key(pegasus, tmp_path: Path) -> None:
    """The issue's attack against every socket of every process: nothing runs, everything is counted."""
    client = pegasus()
    assert serves(client)  # every actor exists: supervisor, pools, workers, a task actor
    ports = listening_ports(client.spec)
    assert client.spec.admin_port in ports and len(ports) >= 8, ports
    as_nobody = tmp_path / "made-by-nobody's-frame"
    without_key = tmp_path / "made-by-a-keyless-frame"

    def attack(marker: Path) -> Callable[[], None]:
        def send() -> None:
            for port in sorted(ports):
                try:
                    send_raw(port, raw_frame(_MakeDir(str(marker))), timeout=1.0)
                except OSError:
                    pass
        return send

    assert as_uid(NOBODY, attack(as_nobody)) == 0
    attack(without_key)()
    # Every frame read and refused (counted, and logged from both peers), then: nothing made.
    stats = wait_for(lambda: (s := client.stats())["rejected_frames"] >= 2 * len(ports) and s, what="every frame refused")

    def logged_both() -> list[dict[str, Any]] | None:
        lines = log_lines(client.spec.state_dir, "frame_rejected")
        peers = [line["peer"] for line in lines]
        return lines if all(any(uid in p for p in peers) for uid in ("(uid 65534)", f"(uid {os.getuid()})")) else None

    rejected = wait_for(logged_both, what="frame_rejected logged for both peers")
    assert not as_nobody.exists() and not without_key.exists()
    assert serves(client)
    assert all("bad MAC" in line["reason"] for line in rejected)
    # Logged once per peer (address and uid), kind and process: not once per frame.
    admin = json.loads(client.spec.pid_file.read_text())["admin"][0]
    for _ in range(5):
        send_raw(client.spec.admin_port, raw_frame(_MakeDir(str(without_key))), timeout=1.0)
    wait_for(lambda: client.stats()["rejected_frames"] >= stats["rejected_frames"] + 5, what="five more refused")
    from_me = [line for line in log_lines(client.spec.state_dir, "frame_rejected")
               if line["pid"] == admin and f"(uid {os.getuid()})" in line["peer"]]
    assert len(from_me) == 1


def test_a_system_holds_none_of_its_starters_listening_sockets(pegasus) -> None:
    """Every process of a system held the listening sockets of the process that started it (its client's, a
    server of its own): frames sent there waited unread for ever (the raw-pickle test's count fell short
    when a test before it in the same process had left one open), and the port stayed taken."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = pegasus()
        starters = {port for _, port in procs.listening_addresses(os.getpid())}
        assert server.getsockname()[1] in starters and len(starters) >= 2  # the server and the client's own
        assert not starters & listening_ports(client.spec), starters & listening_ports(client.spec)


def test_bad_mac_truncated_and_oversized_frames_are_refused(pegasus, tmp_path: Path) -> None:
    client = pegasus()
    port = client.spec.admin_port
    marker = tmp_path / "made"
    data = pickle.dumps((None, _MakeDir(str(marker))))
    forged = b"%d>" % (33 + len(data)) + b"\x02" + secrets.token_bytes(32) + data  # the right shape, a wrong MAC
    system = frames.Trust(load_key(key_path(client.spec.state_dir)), 1 << 20, None)
    before = client.stats()["rejected_frames"]

    reply = send_raw(port, forged)
    assert reply == system.ack_data_error and not marker.exists()  # refused, in the system's own words

    assert send_raw(port, b"1000>" + forged[:100], timeout=0.5) == b""  # cut short: never completed
    assert send_raw(port, b"-5>" + forged, timeout=0.5) == b""  # a length that is no number

    # 300 MB announced: refused at the header, the body is never read (the sender is cut off).
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"300000000>")
        sent, cut_off = 0, False
        try:
            while sent < 64 * 1024 * 1024:
                sent += sock.send(b"\x00" * 65536)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            cut_off = True
    assert cut_off and sent < 64 * 1024 * 1024
    wait_for(lambda: client.stats()["rejected_frames"] >= before + 3, what="the three frames refused")
    assert not marker.exists() and serves(client)

    def reasons() -> list[str] | None:
        logged = [line["reason"] for line in log_lines(client.spec.state_dir, "frame_rejected")]
        return logged if any("announced 300000000 bytes; the limit is 16777216" in r for r in logged) else None

    assert any("bad MAC" in r for r in wait_for(reasons, what="the oversized frame's refusal logged"))


def test_a_request_the_supervisor_cannot_read_gets_a_bad_request(pegasus, tmp_path: Path) -> None:
    """Authentic but unreadable there (a class only the client has): a clear error, not 10 s of silence."""
    client = pegasus()
    (tmp_path / "only_the_client_has_it.py").write_text(textwrap.dedent("""
        from actors.messages import Request

        class Strange(Request):
            pass
    """))
    sys.path.insert(0, str(tmp_path))  # after the system forked: its processes cannot import it
    try:
        from only_the_client_has_it import Strange  # type: ignore[import-not-found]

        with pytest.raises(RequestError, match="could not read the request: ModuleNotFoundError") as refused:
            client._ask(Strange())
        # An answer, not silence until the client's timeout (that raises SystemNotRunningError, no BadRequest).
        assert refused.value.error_type == "BadRequest"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("only_the_client_has_it", None)
    assert serves(client)


def test_a_message_larger_than_a_frame_is_refused_by_its_sender(pegasus) -> None:
    client = pegasus(system={"max_frame_bytes": 1 << 20})
    with pytest.raises(frames.FrameTooLarge, match=r"frames are limited to 1048576 bytes \(\[system\] max_frame_bytes\)"):
        client.submit("x" * (2 << 20))
    assert serves(client)


# -- conventions -----------------------------------------------------------------------------


def test_a_member_with_another_key_is_refused_on_both_sides(convention: Convention, tmp_path: Path) -> None:
    client = convention.leader()
    wrong = tmp_path / "wrong.key"
    wrong.write_text(secrets.token_hex(32) + "\n")
    settings = convention.member_settings("stranger")
    with pytest.raises(conv.ConventionError, match="refused this member: their frames fail authentication"):
        System.member(settings, convention.leader_address, {"pegasus.tool_workers": 1}).join(key_file=wrong)
    member = conv.member_spec(settings, convention.leader_address, {})
    assert not is_running(member) and system_pids(member) == []  # stopped again, nothing left
    assert client.stats()["rejected_frames"] >= 1  # the leader saw it too
    assert log_lines(client.spec.state_dir, "frame_rejected")
    assert [m["name"] for m in client.stats()["members"]] == [client.spec.member_name]


def test_a_member_needs_a_key(convention: Convention) -> None:
    convention.leader()
    with pytest.raises(conv.ConventionError, match="--key-file"):
        System.member(convention.member_settings("keyless"), convention.leader_address, {}).join()


# -- the command line: one owner per state directory, nothing by port alone -------------------


@pytest.fixture
def cli_home(tmp_path: Path) -> Iterator[tuple[Path, Callable[..., subprocess.CompletedProcess[str]]]]:
    """Run ``pegasus`` with a state directory of the test's; stop whatever it started at the end."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    env["PEGASUS_HOME"] = str(home)
    ports: list[int] = []

    def run(*args: str, port: int) -> subprocess.CompletedProcess[str]:
        ports.append(port)
        return subprocess.run(["pegasus", *args, "--port", str(port)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)

    try:
        yield home, run
    finally:
        seen = procs.identities(system_pids(SystemSpec(admin_port=0, state_dir=home)))
        for port in set(ports):
            if is_running(SystemSpec(admin_port=port, state_dir=home)):
                stop_daemon(SystemSpec(admin_port=port, state_dir=home))  # set-up's end, not a command tested
        assert procs.kill_all(seen, grace=10.0) == []


def test_a_second_system_on_one_state_directory_is_refused(cli_home) -> None:
    home, pegasus = cli_home
    first, second = procs.free_port(), procs.free_port()
    assert pegasus("start", port=first).returncode == 0
    admin = json.loads((home / "system.json").read_text())["admin"][0]
    for command in (("start",), ("run", "echo hi")):
        refused = pegasus(*command, port=second)
        assert refused.returncode == 1
        assert (f"state directory {home} is in use by the Pegasus system on 127.0.0.1:{first} (admin pid {admin})"
                in refused.stderr), refused.stderr
    stop = pegasus("stop", port=second)
    assert stop.returncode == 1 and f"runs on port {first}, not {second}" in stop.stderr
    assert procs.is_alive(admin)
    settings = Settings().with_overrides({"system": {"admin_port": first}, "state": {"home": str(home)}})
    with Client.connect(settings) as client:  # the first system still serves
        assert client.wait(client.submit("echo still one system")["task_id"], timeout=60)["lifecycle_state"] == "done"


@pytest.fixture
def bystander(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes], Path]]:
    """A program that is not Pegasus, listening on a port and writing down every connection it gets."""
    port, log = procs.free_port(), tmp_path / "connections"
    program = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import socket
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", {port}))
        server.listen()
        while True:
            conn, peer = server.accept()
            with open({str(log)!r}, "a") as out:
                out.write(repr(conn.recv(100)) + "\\n")
            conn.close()
    """)])
    wait_for(lambda: procs.listener_pid(port, [program.pid]) is not None, what="the bystander to listen")
    try:
        yield port, program, log
    finally:
        program.kill()
        program.wait()


def test_a_program_on_the_port_is_named_and_never_touched(cli_home, bystander) -> None:
    """stop, status and start with another program on the port: a clear error at once, nothing sent or killed."""
    home, pegasus = cli_home
    port, program, log = bystander
    for command in (("stop",), ("status", "some-task"), ("start",), ("run", "echo hi")):
        result = pegasus(*command, port=port)
        assert result.returncode == 1, (command, result.stderr)
        # Named from the port's owner before any Thespian retry (those end in another error, without the pid).
        assert f"port {port} is used by another program (pid {program.pid}, python" in result.stderr, result.stderr
    assert "pegasus stopped" not in "".join(pegasus("stop", port=port).stdout)
    assert program.poll() is None, "the bystander was killed"
    assert not log.exists(), f"the bystander was sent {log.read_text()!r}"


def test_the_state_directory_is_private(cli_home) -> None:
    home, pegasus = cli_home
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    (home / "old.log").write_text("written by an older Pegasus")
    os.chmod(home / "old.log", 0o644)
    assert pegasus("run", "echo private", port=procs.free_port()).returncode == 0
    wide = []
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode != (0o700 if path.is_dir() else 0o600):
            wide.append(f"{path.relative_to(home)} {mode:o}")
    assert not wide, wide
    assert (home / "system.key").exists() and (home / "lock").exists()
