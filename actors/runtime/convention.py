"""Several machines: a leader admin and member admins that run stage workers (docs/convention.md).

A *convention* is Thespian's name for admins that know each other: one leader
(``pegasus start --leader``) and any number of members (``pegasus join
HOST:PORT``).  The supervisor, the task actors, the pools and the store stay on
the leader -- clients attach to it.  A member runs only an admin and the stage
workers the leader's pools place on it: ``pegasus.llm_workers`` /
``pegasus.tool_workers`` capabilities say how many (pegasus/pool/core.py, "Placement").

This module turns settings into the SystemSpec of a leader or a member and
starts a member (a leader: ``Client.start_leader``); it owns no actor.  A convention belongs on a trusted network, a VPN or a
tunnel, never on an open one (``[system] allow_non_loopback`` must say so): its
frames are authenticated with the leader's system key (members get a copy by
file, ``pegasus join --key-file``) but not encrypted.
"""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from actors.wire import frames
from actors.runtime import ownership
from actors.runtime.spec import resolved
from actors.runtime.system import (
    SystemSpec, SystemStartError, attach, detach, is_running, start_daemon, stop_daemon, validate,
)
from pegasus import files
from pegasus.config import Settings
from pegasus.errors import PegasusError

WORKER_CAPABILITIES = ("pegasus.llm_workers", "pegasus.tool_workers")


class ConventionError(PegasusError):
    """A bad leader address or capability, given on the command line or in settings."""


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (IPv4 address, port); a host name is resolved once, here."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConventionError(f"leader address {text!r} is not HOST:PORT")
    try:
        return socket.gethostbyname(host), int(port)
    except OSError as exc:
        raise ConventionError(f"leader host {host!r} cannot be resolved: {exc}") from None


def parse_capability(text: str) -> tuple[str, Any]:
    """``NAME=VALUE``: the value as an int, a float, a boolean or else a string."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConventionError(f"capability {text!r} is not NAME=VALUE")
    raw = raw.strip()
    value: Any = raw
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        for convert in (int, float):
            try:
                value = convert(raw)
                break
            except ValueError:
                continue
    if name in WORKER_CAPABILITIES and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ConventionError(f"capability {name} must be a whole number >= 0, not {raw!r}")
    return name, value


def _spec(settings: Settings, leader: tuple[str, int], capabilities: dict[str, Any]) -> SystemSpec:
    system, convention = settings.system, settings.convention
    # Pegasus never ships actor source code between machines (Thespian's loadActorSource):
    # refuse it, one less thing a peer can ask an admin to do.
    capabilities = {"AllowRemoteActorSources": "no", **capabilities}
    return SystemSpec(
        admin_port=system.admin_port, state_dir=settings.state_dir(), bind=system.bind, base=system.base,
        capabilities=capabilities, allow_non_loopback=system.allow_non_loopback,
        advertise=system.advertise or None, convention_leader=leader, max_frame_bytes=system.max_frame_bytes,
        reregistration_period_s=convention.reregistration_period_s,
        registration_miss_max=convention.registration_miss_max,
        restart_period_s=convention.restart_period_s,
    )


def leader_spec(settings: Settings) -> SystemSpec:
    """The leader: its own address is the convention address (Thespian's recipe).

    It advertises the workers it runs itself: ``[pools]`` sizes, or 0 and 0
    with ``[convention] local_workers = false``.
    """
    system = settings.system
    host = system.advertise or system.bind
    if host in ("", "0.0.0.0"):
        raise SystemStartError("a leader bound to every interface needs [system] advertise (the address members "
                               "reach it at)", system.admin_port)
    local = settings.convention.local_workers
    caps = {"pegasus.llm_workers": settings.pools.llm_workers if local else 0,
            "pegasus.tool_workers": settings.pools.tool_workers if local else 0}
    return replace(_spec(settings, (host, system.admin_port), caps), settings_json=settings.model_dump_json())


def member_spec(settings: Settings, leader: str | None = None,
                capabilities: dict[str, Any] | None = None) -> SystemSpec:
    """A member of the convention led at ``leader`` (default ``[convention] leader``).

    It offers ``pegasus.llm_workers`` / ``pegasus.tool_workers`` from
    ``capabilities``, each defaulting to this machine's ``[pools]`` size;
    other capabilities are advertised as given (shown by ``pegasus stats``).
    """
    address = leader or settings.convention.leader
    if not address:
        raise ConventionError("no leader to join: give HOST:PORT (or set [convention] leader)")
    caps: dict[str, Any] = {"pegasus.llm_workers": settings.pools.llm_workers,
                            "pegasus.tool_workers": settings.pools.tool_workers}
    caps.update(capabilities or {})
    for name in WORKER_CAPABILITIES:
        parse_capability(f"{name}={caps[name]}")  # the same check as on the command line
    return _spec(settings, parse_address(address), caps)


def leader(settings: Settings) -> tuple[Settings, SystemSpec]:
    """A leader's settings (``[convention] lead = true``, state directory resolved) and spec
    (``Client.start_leader`` starts it)."""
    settings = resolved(settings.with_overrides({"convention": {"lead": True}}))
    return settings, leader_spec(settings)


def join(settings: Settings, leader: str | None = None, capabilities: dict[str, Any] | None = None,
         key_file: str | Path | None = None) -> tuple[SystemSpec, int]:
    """Start this machine's member admin in the background; (its spec, admin pid).

    The member authenticates its frames with the leader's system key: ``key_file``
    (a copy of the leader's ``system.key``) is kept in the member's state
    directory; without it, the key already there is used.  Returns once the
    admin runs and has registered with the leader, or after ``REGISTER_WAIT_S``
    if the leader does not answer (a member may start first, or outlive a
    restarted leader: it keeps retrying every ``restart_period_s``).  A leader
    that refuses the member's frames (another key) is an error: the member is
    stopped.
    """
    spec = member_spec(resolved(settings), leader, capabilities)
    validate(spec)
    if (spec.advertised or spec.bind, spec.admin_port) == spec.convention_leader:
        raise ConventionError(f"{spec.member_name} is the leader's own address: give this member another --port")
    if key_file is not None:
        files.private_dir(spec.state_dir)
        if is_running(spec):
            raise SystemStartError(f"state directory {spec.state_dir} is in use by another system", spec.admin_port)
        ownership.install_key_file(Path(key_file).expanduser(), spec.state_dir)
    elif not ownership.key_path(spec.state_dir).exists():
        raise ConventionError("a member needs the leader's system key: pegasus join HOST:PORT --key-file PATH "
                              "(a copy of the leader's <state dir>/system.key, sent over a secure channel)")
    pid = start_daemon(spec, timeout=settings.system.start_timeout_s)
    leader_at = "{}:{}".format(*spec.convention_leader)  # type: ignore[misc]
    if _refused_by_leader(spec):
        stop_daemon(spec)
        raise ConventionError(f"the leader at {leader_at} refused this member: their frames fail authentication, "
                              "so the two hold different system keys (give the leader's system.key with "
                              "--key-file)")
    if _not_a_leader(spec):  # issue 31: it took the member in, then never used it ("pegasus joined", exit 0)
        stop_daemon(spec)
        raise ConventionError(f"the system at {leader_at} is no convention leader: start it with "
                              "pegasus start --leader, then join it")
    return spec, pid


REGISTER_WAIT_S = 3.0


def _not_a_leader(spec: SystemSpec) -> bool:
    """Whether the system at the leader's address answers as a Pegasus system that leads no convention (its
    own capabilities name no convention address).  No answer (not up yet, another program): False, as
    before -- a member may start first and keeps trying."""
    from thespian.system.messages.status import Thespian_StatusReq

    asys = attach(spec)
    try:
        mine = asys.ask(asys._systemBase.adminAddr, Thespian_StatusReq(), 2.0)
        leader = getattr(mine, "conventionLeader", None)
        answered = leader is not None and getattr(mine, "conventionAttendees", None)  # else: not up yet
        theirs = asys.ask(leader, Thespian_StatusReq(), 5.0) if answered else None
    finally:
        detach(asys)
    capabilities = getattr(theirs, "capabilities", None) or {}
    return "Admin Port" in capabilities and "Convention Address.IPv4" not in capabilities


def _refused_by_leader(spec: SystemSpec) -> bool:
    """Wait until the member has registered with its leader (False) or a frame between them failed
    authentication (True); False after REGISTER_WAIT_S when the leader does not answer at all."""
    from thespian.system.messages.status import Thespian_StatusReq

    deadline = time.monotonic() + REGISTER_WAIT_S
    asys = attach(spec)
    try:
        admin = asys._systemBase.adminAddr
        while time.monotonic() < deadline:
            if frames.rejected_count(spec.state_dir):
                return True
            status = asys.ask(admin, Thespian_StatusReq(), 0.5)
            if getattr(status, "conventionAttendees", None):
                return False
            time.sleep(0.05)
    finally:
        detach(asys)
    return bool(frames.rejected_count(spec.state_dir))
