"""``System``: the one object that starts, attaches to and stops the Pegasus system of a state directory.

The client and the command line go through it; it goes down to the Thespian boundary
(``system``), the specs (``spec``, ``convention``) and the lock (``ownership``), and nothing
below comes back up, so following a start or a stop walks one way.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from thespian.actors import ActorSystem

from actors.runtime import convention, ownership, system
from actors.runtime.spec import SystemSpec, resolved, spec_for, validate
from actors.runtime.system import SystemStartError
from actors.wire import frames
from pegasus import files
from pegasus.config import Settings

REGISTER_WAIT_S = 3.0  # a joining member waits this long for its leader to answer before it returns


class System:
    """The system ``settings`` describe (state directory resolved), as ``spec``: start, attach, stop."""

    def __init__(self, settings: Settings, spec: SystemSpec) -> None:
        self.settings, self.spec = settings, spec

    @classmethod
    def of(cls, settings: Settings) -> System:
        settings = resolved(settings)
        return cls(settings, spec_for(settings))

    @classmethod
    def leader(cls, settings: Settings) -> System:
        """A convention's leader (``[convention] lead = true``): its pools place workers on members as they join."""
        return cls(*convention.leader(settings))

    @classmethod
    def member(cls, settings: Settings, leader: str | None = None,
               capabilities: dict[str, Any] | None = None) -> System:
        """A member of the convention led at ``leader`` (default ``[convention] leader``)."""
        settings = resolved(settings)
        return cls(settings, convention.member_spec(settings, leader, capabilities))

    # -- start -----------------------------------------------------------------------------------
    def start(self) -> ActorSystem:
        """Start it with its admin forked from this process (shut down by ``stop``); a client of it."""
        return system.start_system(self.spec)

    def start_daemon(self) -> int:
        """Start it in a detached background launcher; the admin pid, once the admin answers."""
        return system.start_daemon(self.spec, timeout=self.settings.system.start_timeout_s)

    def wait_for_http(self, timeout: float) -> None:
        """Return once ``[http]`` (if enabled) accepts connections: a start that returned before its gateway
        listened let the next command (``curl``) find nothing there.  SystemStartError after ``timeout``."""
        http = self.settings.http
        if not http.enabled:
            return
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(http.bind, http.bind)
        deadline = time.monotonic() + timeout
        while not _accepts(host, http.port):
            if time.monotonic() >= deadline:
                raise SystemStartError(
                    f"the system started, but its HTTP gateway did not listen on {http.bind}:{http.port} within "
                    f"{timeout:g}s: see {self.spec.state_dir / 'logs' / 'gateway.log'}", self.spec.admin_port)
            time.sleep(0.05)

    def join(self, key_file: str | Path | None = None) -> int:
        """Start this member's admin in the background; its pid.

        It authenticates its frames with the leader's system key: ``key_file`` (a copy of the
        leader's ``system.key``) is kept in its state directory; without it, the key already there
        is used.  Returns once it has registered with the leader, or after ``REGISTER_WAIT_S`` if
        the leader does not answer (a member may start first: it keeps retrying).  A leader that
        refuses its frames, or that leads no convention, is an error and the member is stopped.
        """
        spec = self.spec
        validate(spec)
        if (spec.advertised or spec.bind, spec.admin_port) == spec.convention_leader:
            raise convention.ConventionError(f"{spec.member_name} is the leader's own address: give this member "
                                             "another --port")
        if key_file is not None:
            files.private_dir(spec.state_dir)
            if self.is_running():
                raise SystemStartError(f"state directory {spec.state_dir} is in use by another system",
                                       spec.admin_port)
            ownership.install_key_file(Path(key_file).expanduser(), spec.state_dir)
        elif not ownership.key_path(spec.state_dir).exists():
            raise convention.ConventionError(
                "a member needs the leader's system key: pegasus join HOST:PORT --key-file PATH "
                "(a copy of the leader's <state dir>/system.key, sent over a secure channel)")
        pid = self.start_daemon()
        leader_at = "{}:{}".format(*spec.convention_leader)  # type: ignore[misc]
        if self._refused_by_leader():
            self.stop()
            raise convention.ConventionError(
                f"the leader at {leader_at} refused this member: their frames fail authentication, so the two "
                "hold different system keys (give the leader's system.key with --key-file)")
        if self._not_a_leader():  # it took the member in, then never used it
            self.stop()
            raise convention.ConventionError(f"the system at {leader_at} is no convention leader: start it with "
                                             "pegasus start --leader, then join it")
        return pid

    # -- attach ----------------------------------------------------------------------------------
    def attach(self) -> ActorSystem:
        """A client of the running system; SystemNotRunningError, saying why, when there is none."""
        return system.attach(self.spec)

    def detach(self, asys: ActorSystem) -> None:
        """Close a client's endpoint; the system runs on."""
        system.detach(asys)

    def is_running(self) -> bool:
        return ownership.is_running(self.spec)

    # -- stop ------------------------------------------------------------------------------------
    def stop(self, asys: ActorSystem | None = None, grace: float = 15.0) -> None:
        """End every process of the system (the lock's holders and their descendants).  Without ``asys``
        (the client that started it), SystemNotRunningError unless it runs on this port."""
        if asys is None:
            ownership.check_owner(self.spec)
        system.shutdown(self.spec, asys, grace)

    # -- a member's leader -------------------------------------------------------------------------
    def _not_a_leader(self) -> bool:
        """Whether the system at the leader's address answers as a Pegasus system that leads no convention.
        No answer (not up yet, another program): False -- a member may start first and keeps trying."""
        from thespian.system.messages.status import Thespian_StatusReq

        asys = self.attach()
        try:
            mine = asys.ask(asys._systemBase.adminAddr, Thespian_StatusReq(), 2.0)
            leader = getattr(mine, "conventionLeader", None)
            answered = leader is not None and getattr(mine, "conventionAttendees", None)  # else: not up yet
            theirs = asys.ask(leader, Thespian_StatusReq(), 5.0) if answered else None
        finally:
            self.detach(asys)
        capabilities = getattr(theirs, "capabilities", None) or {}
        return "Admin Port" in capabilities and "Convention Address.IPv4" not in capabilities

    def _refused_by_leader(self) -> bool:
        """Wait until the member has registered with its leader (False) or a frame between them failed
        authentication (True); False after REGISTER_WAIT_S when the leader does not answer at all."""
        from thespian.system.messages.status import Thespian_StatusReq

        state_dir = self.spec.state_dir
        deadline = time.monotonic() + REGISTER_WAIT_S
        asys = self.attach()
        try:
            admin = asys._systemBase.adminAddr
            while time.monotonic() < deadline:
                if frames.rejected_count(state_dir):
                    return True
                status = asys.ask(admin, Thespian_StatusReq(), 0.5)
                if getattr(status, "conventionAttendees", None):
                    return False
                time.sleep(0.05)
        finally:
            self.detach(asys)
        return bool(frames.rejected_count(state_dir))


def _accepts(host: str, port: int) -> bool:
    """Whether a TCP connection to host:port is accepted (then closed at once)."""
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except OSError:
        return False
    return True
