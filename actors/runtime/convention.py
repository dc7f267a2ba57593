"""Several machines: the SystemSpec of a convention's leader or member (docs/convention.md).

A leader runs the supervisor, task actors, pools and store; a member runs an admin and the stage
workers the leader's pools place on it.  ``lifecycle.System`` starts them.  Frames are
authenticated with the leader's key but not encrypted: a trusted network only
(``[system] allow_non_loopback`` must say so).
"""

from __future__ import annotations

import socket
from dataclasses import replace
from typing import Any

from actors.runtime.spec import SystemSpec, SystemStartError, resolved
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
    """A leader's settings (``[convention] lead = true``, state directory resolved) and spec."""
    settings = resolved(settings.with_overrides({"convention": {"lead": True}}))
    return settings, leader_spec(settings)
