"""What a Pegasus actor system is: where it listens, where its state lives, how it joins a convention
(``SystemSpec``), and whether it may be started as described (``validate``).  No process is touched here.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pegasus import files
from pegasus.config import Settings
from pegasus.errors import PegasusError
from pegasus.pool.placement import HOME_CAPABILITY as HOME_CAPABILITY, MEMBER_CAPABILITY as MEMBER_CAPABILITY

BASES = ("multiprocTCPBase", "simpleSystemBase")


class PegasusSystemError(PegasusError):
    """Root of the errors of the actor-system boundary; carries the admin port."""

    def __init__(self, message: str, admin_port: int | None = None) -> None:
        super().__init__(message)
        self.admin_port = admin_port


class SystemStartError(PegasusSystemError):
    """A system could not be started (bad spec, refused bind, port taken, timeout)."""


class SystemNotRunningError(PegasusSystemError):
    """No actor system answers on the given admin port."""


class SystemStopError(PegasusSystemError):
    """Processes of a system survived shutdown and SIGKILL (pids attribute)."""

    def __init__(self, message: str, admin_port: int | None = None, pids: list[int] | None = None) -> None:
        super().__init__(message, admin_port)
        self.pids = pids or []


@dataclass(frozen=True)
class SystemSpec:
    """Where and how an actor system runs.  Immutable; picklable (to the launcher)."""

    admin_port: int
    state_dir: Path
    bind: str = "127.0.0.1"
    base: str = "multiprocTCPBase"
    capabilities: dict[str, Any] = field(default_factory=dict, hash=False)  # hash=False: dicts are unhashable
    allow_non_loopback: bool = False
    # The address other processes use to reach ours; None means the bind
    # address (or Thespian's own detection when binding the wildcard).
    advertise: str | None = None
    # (ip, admin port) of a convention leader this system joins, if any; a
    # leader names itself (Thespian's recipe: 'Convention Address.IPv4' is the
    # leader's own address on the leader, the leader's on every member).
    convention_leader: tuple[str, int] | None = None
    thesplog_level: str = "WARNING"
    # The largest frame any process of the system reads (checked at its header, before its body).
    max_frame_bytes: int = 16 * 1024 * 1024
    # The settings (JSON) the system's guardian configures its supervisor with; written to the state
    # directory by whoever takes its lock.  Empty: a convention member (no supervisor) or a bare system.
    settings_json: str = field(default="", compare=False, repr=False)
    # Thespian's member failure detection (thespian_patches.robustness.convention_timing).
    reregistration_period_s: float = 3.0
    registration_miss_max: int = 2
    restart_period_s: float = 3.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_dir", Path(self.state_dir))
        object.__setattr__(self, "capabilities", dict(self.capabilities))

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def settings_file(self) -> Path:
        return self.state_dir / SETTINGS_FILE

    @property
    def stopping_file(self) -> Path:
        """Present while the system is being stopped on purpose: its launcher must not restart it."""
        return self.state_dir / "stopping"

    def write_settings(self) -> None:
        """The owner (it holds the lock) writes what its guardian configures the supervisor with."""
        if self.settings_json:
            files.write_private(self.settings_file, self.settings_json.encode())

    @property
    def pid_file(self) -> Path:
        """The owner record: port, bind, admin and launcher identities (removed when the system stops)."""
        return self.state_dir / "system.json"

    @property
    def advertised(self) -> str | None:
        if self.advertise:
            return self.advertise
        return None if _is_wildcard(self.bind) else self.bind

    @property
    def member_name(self) -> str:
        """This admin's name in a convention: ``advertised-host:admin-port``."""
        return member_name(self.advertise or "", self.bind, self.admin_port)

    def thespian_capabilities(self) -> dict[str, Any]:
        caps = dict(self.capabilities)
        caps["Admin Port"] = self.admin_port
        # Names this admin in placement requirements (StageWorker.actorSystemCapabilityCheck).
        caps[MEMBER_CAPABILITY] = self.member_name
        # Where workers placed here log (the leader's pools send them settings with this home).
        caps[HOME_CAPABILITY] = str(self.state_dir)
        if self.convention_leader is not None:
            caps["Convention Address.IPv4"] = tuple(self.convention_leader)
        return caps

    def log_defs(self) -> dict[str, Any]:
        """logging dictConfig for Thespian's logger process: one rotating file."""
        return {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"plain": {"format": "%(asctime)s p%(process)d %(levelname)s %(name)s %(message)s"}},
            "handlers": {
                "file": {
                    "class": "logging.handlers.RotatingFileHandler",
                    "filename": str(self.logs_dir / "actors.log"),
                    "maxBytes": 10 * 1024 * 1024,
                    "backupCount": 3,
                    "formatter": "plain",
                }
            },
            "root": {"handlers": ["file"], "level": "INFO"},
        }


def _is_wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0")


SETTINGS_FILE = "settings.json"


def member_name(advertise: str, bind: str, admin_port: int) -> str:
    """How an admin is named among convention members: the address others reach it at, and its port.

    Unique in a convention (two admins on one host differ by port).  Pure: the
    leader's pools compute their own name from the settings with it.
    """

    host = advertise or ("" if _is_wildcard(bind) else bind) or socket.gethostname()
    return f"{host}:{admin_port}"


def validate(spec: SystemSpec) -> None:
    """Raise SystemStartError unless spec describes a system we may start."""
    if spec.base not in BASES:
        raise SystemStartError(f"unknown system base {spec.base!r}; use one of {BASES}", spec.admin_port)
    if not 0 < spec.admin_port < 65536:
        raise SystemStartError(f"admin port {spec.admin_port} is out of range", spec.admin_port)
    try:
        address = ipaddress.ip_address(spec.bind or "0.0.0.0")
    except ValueError:
        raise SystemStartError(f"bind address {spec.bind!r} is not an IP address", spec.admin_port) from None
    if address.version != 4:
        raise SystemStartError(f"bind address {spec.bind} is not IPv4 (Thespian's TCP is IPv4 only)", spec.admin_port)
    if not address.is_loopback and not spec.allow_non_loopback:
        raise SystemStartError(
            f"refusing to bind the actor system to {spec.bind}: its frames are authenticated but not "
            "encrypted (tasks, prompts and results cross the network in clear); "
            "set allow_non_loopback=True to open it deliberately, on a trusted network or a VPN",
            spec.admin_port,
        )
    if not _is_wildcard(spec.bind) and not _is_local_address(spec.bind):
        raise SystemStartError(f"bind address {spec.bind} is not an address of this host", spec.admin_port)
    if spec.convention_leader is not None:
        _validate_leader(spec)
    if spec.reregistration_period_s < 1 or spec.restart_period_s < 1 or spec.registration_miss_max < 1:
        raise SystemStartError("convention timing must be at least 1 s and 1 missed check-in", spec.admin_port)
    method = spec.capabilities.get("Process Startup Method", "fork")
    if method != "fork":
        # A spawned process re-imports Thespian without our bind patch.
        raise SystemStartError(f"Process Startup Method {method!r} is unsupported; only 'fork'", spec.admin_port)


def _is_local_address(host: str) -> bool:
    """Whether this host has ``host`` (a bind to it works; port 0 takes nothing that lasts)."""

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, 0))
        except OSError:
            return False
    return True


def _validate_leader(spec: SystemSpec) -> None:
    """A convention address must be IPv4, and reachable both ways with this bind.

    A member bound to loopback cannot be reached by a leader on another
    interface (and the other way round): refuse the mix instead of a member
    that registers and then never receives a worker.
    """
    host, port = spec.convention_leader  # type: ignore[misc]
    try:
        leader = ipaddress.ip_address(host)
    except ValueError:
        raise SystemStartError(f"convention leader {host!r} is not an IPv4 address", spec.admin_port) from None
    if leader.version != 4 or not 0 < int(port) < 65536:
        raise SystemStartError(f"convention leader {host}:{port} is not an IPv4 address and port", spec.admin_port)
    local = ipaddress.ip_address(spec.advertised or spec.bind or "0.0.0.0")
    if leader.is_loopback != local.is_loopback and not _is_wildcard(spec.bind):
        raise SystemStartError(
            f"this system listens on {spec.advertised or spec.bind} but its convention leader is {host}: "
            "both must be loopback (one machine) or both reachable addresses (several machines)",
            spec.admin_port,
        )


def spec_for(settings: Settings) -> SystemSpec:
    """The SystemSpec of the system these settings describe (they are what its guardian configures it with)."""
    system = settings.system
    return SystemSpec(admin_port=system.admin_port, state_dir=settings.state_dir(), bind=system.bind,
                      base=system.base, allow_non_loopback=system.allow_non_loopback,
                      max_frame_bytes=system.max_frame_bytes, settings_json=settings.model_dump_json())


def resolved(settings: Settings) -> Settings:
    """Settings with the state directory made absolute, as every actor process needs it."""
    return settings.with_overrides({"state": {"home": str(settings.state_dir())}})
