"""Who owns a state directory: its system key, its lock, and the processes that hold the lock.

Frames are authenticated with ``system.key`` (0600), so only a user who can read the directory
talks to the system.  The ``flock`` is inherited by every process of the system: a process is the
system's exactly when it holds it or descends from one that does, never because of its port.
Also the owner record (``system.json``) and the checks made before anything is sent.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.runtime import procs
from actors.runtime.spec import SystemNotRunningError, SystemSpec, SystemStartError
from pegasus import files
from pegasus.errors import PegasusError

KEY_FILE = "system.key"
LOCK_FILE = "lock"
KEY_BYTES = 32


class OwnershipError(PegasusError):
    """A state directory's key or lock cannot be used (names the file and why)."""


class StateDirBusy(OwnershipError):
    """Another system owns the state directory."""


# -- the key ---------------------------------------------------------------------------


def key_path(state_dir: Path) -> Path:
    return Path(state_dir) / KEY_FILE


def create_key(state_dir: Path) -> bytes:
    """The directory's key; made (0600) when there is none yet."""
    path = key_path(state_dir)
    if not path.exists():
        files.write_private(path, secrets.token_hex(KEY_BYTES).encode() + b"\n")
    return load_key(path)


def load_key(path: Path) -> bytes:
    """The key in ``path``; OwnershipError saying what is wrong with it."""
    try:
        text = Path(path).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise OwnershipError(f"no system key at {path}: no Pegasus system was started with this state "
                             "directory (or give the leader's key file)") from None
    except PermissionError:
        raise OwnershipError(f"cannot read the system key {path}: permission denied (only the user who runs "
                             "the system may talk to it)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OwnershipError(f"cannot read the system key {path}: {exc}") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise OwnershipError(f"the system key {path} is malformed: expected {KEY_BYTES * 2} hex digits")
    return key


def install_key_file(source: Path, state_dir: Path) -> bytes:
    """Copy a key file given on the command line (a convention member's) into the state directory."""
    key = load_key(source)
    files.write_private(key_path(state_dir), key.hex().encode() + b"\n")
    return key


# -- the lock --------------------------------------------------------------------------


def lock_path(state_dir: Path) -> Path:
    return Path(state_dir) / LOCK_FILE


@dataclass
class Lock:
    """An acquired lock of a state directory; ``fd`` is inherited by the system's processes."""

    state_dir: Path
    fd: int

    def close(self) -> None:
        """This process lets go of its descriptor (the lock stays while the system's processes hold theirs)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def acquire(state_dir: Path) -> Lock:
    """Take the state directory for a new system; StateDirBusy names the system that owns it."""
    path = lock_path(state_dir)
    fd = files.open_private(path, os.O_RDWR)  # close-on-exec: forked actors keep it, exec'd tools never see it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StateDirBusy(f"state directory {state_dir} is in use by another Pegasus system") from None
    return Lock(Path(state_dir), fd)


def is_owned(state_dir: Path) -> bool:
    """Whether a live system holds the state directory's lock."""
    path = lock_path(state_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def holders(state_dir: Path) -> list[int]:
    """Live processes (not this one) holding the state directory's lock.

    Holding, not merely having the file open: ``/proc/<pid>/fdinfo`` shows the
    flock on every descriptor that shares the locked open file (the forks of
    the process that took it), and none on a reader's own descriptor.
    """
    try:
        info = lock_path(state_dir).stat()
    except FileNotFoundError:
        return []
    try:
        if not is_owned(state_dir):  # nobody holds it: no scan of every process (a stop's last look, ~10 ms each)
            return []
    except OSError:
        pass  # cannot tell: the scan decides
    wanted = (info.st_dev, info.st_ino)
    me = os.getpid()
    found = [int(entry.name) for entry in os.scandir("/proc")
             if entry.name.isdigit() and int(entry.name) != me and _pid_holds(entry.name, wanted)]
    return sorted(pid for pid in found if procs.is_alive(pid))


def _pid_holds(pid: str, wanted: tuple[int, int]) -> bool:
    """Whether process ``pid`` holds the flock of the file ``wanted`` (device, inode) on one of its descriptors.

    Only descriptors opened by the name ``LOCK_FILE`` are looked at: every holder inherits the one ``acquire`` opened.
    """
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False  # gone, or another user's
    for fd in fds:
        try:
            # The link's name first (a string, no stat): a stop scans every descriptor of every process, several times.
            if os.readlink(f"{fd_dir}/{fd}").rpartition("/")[2] != LOCK_FILE:
                continue
            target = os.stat(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if (target.st_dev, target.st_ino) == wanted and _holds_flock(f"/proc/{pid}/fdinfo/{fd}"):
            return True
    return False


def holds(pid: int, state_dir: Path) -> bool:
    """Whether process ``pid`` holds the state directory's lock (a look at that process only)."""
    try:
        info = lock_path(state_dir).stat()
    except OSError:
        return False
    return _pid_holds(str(pid), (info.st_dev, info.st_ino))


def _holds_flock(fdinfo: str) -> bool:
    try:
        with open(fdinfo, encoding="ascii") as info:
            return any(line.startswith("lock:") and "FLOCK" in line and "WRITE" in line for line in info)
    except OSError:
        return False


def pids_of(state_dir: Path) -> list[int]:
    """Every live process of the system of ``state_dir``: the lock's holders and their descendants (not this one)."""
    roots = holders(state_dir)
    if not roots:
        return []
    stats = procs.all_stats()
    found = set(roots)
    for root in roots:
        found.update(procs.descendants(root, stats))
    found.discard(os.getpid())
    return sorted(found)


# -- a system's owner, its port, and whether it answers -------------------------------


def is_running(spec: SystemSpec) -> bool:
    """Whether a Pegasus system owns spec's state directory (holds its lock)."""
    if spec.base == "simpleSystemBase":
        return False
    return is_owned(spec.state_dir)


def port_in_use(spec: SystemSpec) -> bool:
    """Whether something listens on spec's admin port (probed by binding: nothing reaches it)."""
    return address_in_use(spec.bind or "0.0.0.0", spec.admin_port)


def address_in_use(host: str, port: int) -> bool:
    """Whether something listens on host:port (probed by binding: nothing reaches it)."""
    import socket

    probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        # SO_REUSEADDR: a port in TIME_WAIT after a shutdown is free, only a listener makes the bind fail.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
    except OSError:
        return True
    finally:
        probe.close()
    return False


def port_user(spec: SystemSpec) -> str:
    """Who listens on spec's admin port, for a message: ``pid 1234, python3`` or ``a process of uid 1001``."""
    pid = procs.listener_pid(spec.admin_port)
    if pid is not None:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            name = "?"
        return f"pid {pid}, {name}"
    uid = procs.listener_uid(spec.admin_port)
    return f"a process of uid {uid}" if uid is not None else "a process this user cannot see"


def _check_port_free(spec: SystemSpec) -> None:
    if port_in_use(spec):
        raise SystemStartError(f"port {spec.admin_port} is used by another program ({port_user(spec)})",
                               spec.admin_port)


def read_owner(spec: SystemSpec) -> dict[str, Any] | None:
    """The owner record of the running system (None when it has not written one)."""
    try:
        record = json.loads(spec.pid_file.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_owner(spec: SystemSpec, admin_pid: int, daemon_pid: int | None) -> None:
    def ident(pid: int | None) -> list[int] | None:
        st = procs.read_stat(pid) if pid else None
        return [st.pid, st.starttime] if st else None

    record = {"admin_port": spec.admin_port, "bind": spec.bind, "admin": ident(admin_pid), "daemon": ident(daemon_pid)}
    files.write_private(spec.pid_file, json.dumps(record).encode())


def _admin_pid(spec: SystemSpec) -> int | None:
    """The admin: the process of the system (a lock holder) that listens on the admin port."""
    return procs.listener_pid(spec.admin_port, system_pids(spec))


def system_pids(spec: SystemSpec) -> list[int]:
    """The live pids of the system: the holders of its state directory's lock and their descendants."""
    if spec.base == "simpleSystemBase":
        return []
    return pids_of(spec.state_dir)


def check_owner(spec: SystemSpec) -> None:
    """SystemNotRunningError saying why, unless a system owns spec's state directory on spec's port."""
    where = f"state directory {spec.state_dir}"
    if not is_owned(spec.state_dir):
        if port_in_use(spec):
            raise SystemNotRunningError(f"no Pegasus system is running with {where}; port {spec.admin_port} is "
                                        f"used by another program ({port_user(spec)})", spec.admin_port)
        raise SystemNotRunningError(f"no Pegasus system is running on port {spec.admin_port} with {where} "
                                    "(start one: pegasus start)", spec.admin_port)
    record = read_owner(spec) or {}
    port = record.get("admin_port")
    if port is not None and port != spec.admin_port:
        raise SystemNotRunningError(f"the Pegasus system of {where} runs on port {port}, not {spec.admin_port}",
                                    spec.admin_port)


def _recorded_admin_listens(spec: SystemSpec) -> bool:
    """Whether the owner record's admin is still that process (pid and start time), holds the state directory's
    lock and listens on the admin port: proof enough, from its own /proc entries, where ``_admin_pid`` reads
    every process's (~30 ms of each CLI command).  False: ask ``_admin_pid``."""
    admin = (read_owner(spec) or {}).get("admin")
    if not (isinstance(admin, list) and len(admin) == 2 and all(type(n) is int for n in admin)):
        return False
    pid, start = admin
    return procs.is_alive(pid, start) and holds(pid, spec.state_dir) and procs.listener_pid(spec.admin_port, [pid]) == pid


def check_attachable(spec: SystemSpec) -> None:
    """SystemNotRunningError saying why, unless the system of spec's state directory answers on its port.

    Nothing is sent anywhere: a port held by another program is named, never talked to.
    """
    check_owner(spec)
    where = f"state directory {spec.state_dir}"
    if not _recorded_admin_listens(spec) and _admin_pid(spec) is None:
        if port_in_use(spec):
            raise SystemNotRunningError(f"port {spec.admin_port} is used by another program ({port_user(spec)}), "
                                        f"not by the Pegasus system of {where}", spec.admin_port)
        raise SystemNotRunningError(f"the Pegasus system of {where} does not listen on port {spec.admin_port} "
                                    "(starting, restarting or broken: see its logs)", spec.admin_port)
