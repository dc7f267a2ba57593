"""Process and socket inspection through /proc (Linux), without psutil.

Used to find every process of a system, prove where its sockets listen and end exactly those
processes.  A process is (pid, start time), so a recycled pid is never taken for one of ours.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
_TCP_LISTEN = "0A"  # st column of /proc/net/tcp for TCP_LISTEN


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """In an actor process: be SIGKILLed when the process that forked it ends.

    A worker still starting when its pool exits (a system stopped just after it started) never gets the
    ActorExitRequest (Thespian drops what is queued for a child that has not reported its address) and
    would idle forever as an orphan of init, outside every tree we check: PR_SET_PDEATHSIG ends it with
    its parent.  Only in a multiprocessing child (never in a simpleSystemBase test process), only on
    Linux; a parent already gone by now is checked after setting it.
    """
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent.pid:
        os.kill(os.getpid(), signal.SIGKILL)


def exec_dies_with_parent() -> None:
    """A ``preexec_fn``: the program about to be exec'd is SIGKILLed when the process that starts it ends
    (the death signal survives exec).  Only a prctl: nothing that could deadlock in a forked child."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


# Loaded here, in the parent: a forked child about to exec should only call into it.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat that Pegasus needs."""

    pid: int
    state: str  # R, S, D, Z (zombie), T, ...
    ppid: int
    starttime: int  # clock ticks since boot: with pid, a unique identity
    cpu: int = 0  # utime + stime, clock ticks
    children_cpu: int = 0  # cutime + cstime: of the children it has reaped
    session: int = 0  # the session id: the pid of the process that opened the session (setsid)

    @property
    def is_zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int) -> ProcStat | None:
    """The stat of one process, or None when it does not exist (any more)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    try:
        raw = os.read(fd, 4096)  # one read, no Path nor text file: a stop reads every process's, several times
    except ProcessLookupError:
        return None
    finally:
        os.close(fd)
    # comm (field 2) is in parentheses and may contain spaces or ')': split
    # on the last ')' so the remaining fields are positional.
    rest = raw.rsplit(b")", 1)[1].split()
    return ProcStat(pid=pid, state=rest[0].decode(), ppid=int(rest[1]), starttime=int(rest[19]),
                    cpu=int(rest[11]) + int(rest[12]), children_cpu=int(rest[13]) + int(rest[14]), session=int(rest[3]))


def all_stats() -> dict[int, ProcStat]:
    """Stat of every process visible in /proc, keyed by pid."""
    stats: dict[int, ProcStat] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = read_stat(int(name))
            if st is not None:
                stats[st.pid] = st
    return stats


def is_alive(pid: int, starttime: int | None = None) -> bool:
    """True when pid exists, is not a zombie, and (if given) started at starttime."""
    st = read_stat(pid)
    if st is None or st.is_zombie:
        return False
    return starttime is None or st.starttime == starttime


def kill_own_child(pid: int) -> bool:
    """SIGKILL ``pid`` only when /proc shows it is this process's own living child (never a reused pid, never
    a process of another system on this host); whether it was signalled."""
    stat = read_stat(pid)
    if pid == os.getpid() or stat is None or stat.ppid != os.getpid() or stat.is_zombie:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def descendants(root: int, stats: dict[int, ProcStat] | None = None) -> list[int]:
    """Every live (non-zombie) descendant of root, found via parent links."""
    stats = all_stats() if stats is None else stats
    children: dict[int, list[int]] = {}
    for st in stats.values():
        children.setdefault(st.ppid, []).append(st.pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(pid for pid in found if not stats[pid].is_zombie)


def children_of(parent: int) -> list[int]:
    """Direct children of parent, zombies included (so they can be reaped)."""
    return sorted(st.pid for st in all_stats().values() if st.ppid == parent)


# --- sockets ---------------------------------------------------------------


def _decode_ipv4(hexaddr: str) -> str:
    # /proc/net/tcp prints the address as one host-order (little-endian) word.
    return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(hexaddr, 16)))


def _decode_ipv6(hexaddr: str) -> str:
    # Four host-order 32-bit words.
    words = [int(hexaddr[i : i + 8], 16) for i in range(0, 32, 8)]
    return socket.inet_ntop(socket.AF_INET6, struct.pack("<4I", *words))


def _listening_rows() -> Iterator[tuple[Callable[[str], str], list[str]]]:
    """(address decoder, columns) of every LISTEN row of /proc/net/tcp and /proc/net/tcp6 (our namespace)."""
    for name, decode in (("tcp", _decode_ipv4), ("tcp6", _decode_ipv6)):
        try:
            lines = (_PROC / "net" / name).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) >= 10 and cols[3] == _TCP_LISTEN:
                yield decode, cols


def listening_sockets() -> dict[int, tuple[str, int]]:
    """Every TCP socket in LISTEN state on this host: inode -> (ip, port)."""
    found: dict[int, tuple[str, int]] = {}
    for decode, cols in _listening_rows():
        hexip, hexport = cols[1].split(":")
        found[int(cols[9])] = (decode(hexip), int(hexport, 16))
    return found


def listener_uid(port: int) -> int | None:
    """The uid owning a socket that listens on ``port`` (any address): shown even for another user's."""
    for _, cols in _listening_rows():
        if int(cols[1].rsplit(":", 1)[1], 16) == port:
            return int(cols[7])
    return None


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process pid holds open (empty if it is gone)."""
    inodes: set[int] = set()
    fd_dir = _PROC / str(pid) / "fd"
    try:
        fds = os.listdir(fd_dir)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue  # closed between listdir and readlink
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def listening_addresses(pid: int, listening: dict[int, tuple[str, int]] | None = None) -> list[tuple[str, int]]:
    """The (ip, port) of every TCP socket pid listens on."""
    listening = listening_sockets() if listening is None else listening
    return sorted(listening[i] for i in socket_inodes(pid) if i in listening)


def pids_listening_on(port: int, candidates: list[int] | None = None) -> list[int]:
    """Live processes holding a socket that listens on port (any address).

    candidates limits the scan (cheaper than reading every /proc/<pid>/fd).
    """
    inodes = {i for i, (_, p) in listening_sockets().items() if p == port}
    if not inodes:
        return []
    pids = candidates if candidates is not None else [p for p in all_stats()]
    return sorted(pid for pid in pids if is_alive(pid) and socket_inodes(pid) & inodes)


# --- ending processes --------------------------------------------------------


def _reap_if_child(pid: int) -> None:
    # A zombie child of ours stays in the process table until we wait for it.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: its own parent (or init) reaps it


def reap_zombie_children(pids: list[int]) -> None:
    """waitpid() those of pids that are our own zombie children."""
    me = os.getpid()
    for pid in pids:
        st = read_stat(pid)
        if st is not None and st.ppid == me and st.is_zombie:
            _reap_if_child(pid)


def wait_gone(idents: dict[int, int], timeout: float) -> list[int]:
    """Wait until every (pid -> starttime) is gone; return the survivors."""
    deadline = time.monotonic() + timeout
    while True:
        reap_zombie_children(list(idents))
        alive = [pid for pid, start in idents.items() if is_alive(pid, start)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.02)


def kill_all(idents: dict[int, int], grace: float, kill_timeout: float = 5.0) -> list[int]:
    """End exactly these processes: wait grace seconds, then SIGKILL survivors.

    idents maps pid -> start time, checked before each signal so a recycled
    pid is never signalled.  Returns the pids still alive at the end (should
    be empty).
    """
    survivors = wait_gone(idents, grace)
    for pid in survivors:
        if is_alive(pid, idents[pid]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return wait_gone({pid: idents[pid] for pid in survivors}, kill_timeout)


def identities(pids: list[int]) -> dict[int, int]:
    """pid -> start time for those of pids that are alive now."""
    out: dict[int, int] = {}
    for pid in pids:
        st = read_stat(pid)
        if st is not None and not st.is_zombie:
            out[pid] = st.starttime
    return out


def listener_pid(port: int, candidates: list[int] | None = None) -> int | None:
    """The process that listens on port, not a forked child that inherited the socket.

    Thespian's forked children (its logger, for one) keep the admin's
    listening socket open, so several processes "listen" on the admin port:
    the owner is the one whose parent is not among them.
    """
    pids = pids_listening_on(port, candidates)
    stats = {pid: read_stat(pid) for pid in pids}
    tops = [pid for pid, st in stats.items() if st is not None and st.ppid not in stats]
    return tops[0] if tops else None


def freeze_and_kill(list_pids: Callable[[], list[int]]) -> dict[int, int]:
    """SIGKILL a whole process tree at once (a crash test); return what was killed (pid -> start time).

    Every process is frozen (SIGSTOP) first and the tree listed again until
    nothing new appears: a child forked between a listing and the kill would
    otherwise be re-parented to init and outlive the system.
    """
    frozen: dict[int, int] = {}
    while True:
        fresh = {pid: start for pid, start in identities(list_pids()).items() if pid not in frozen}
        if not fresh:
            break
        for pid in fresh:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        frozen.update(fresh)
    for pid, start in frozen.items():
        if is_alive(pid, start):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return frozen


PORT_FLOOR = 24000  # free_port: from here to the ephemeral range (clear of the default 19190 and ports picked by hand)
_walk: list[int] = [0, 0]  # (pid, next port) of free_port's walk, made again in a forked child


def ephemeral_ports() -> range:
    """The ports the kernel gives a ``bind`` to port 0 and an outgoing connection (ip_local_port_range)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, below the ephemeral range, never Thespian's default 1900.

    Below that range no other process is given it by the kernel meanwhile (every actor listens on an
    ephemeral port): a port handed to a system that starts later, or starts again, is still free then.
    Each process walks the range from a random point, so two processes seldom hold the same port at once.
    """
    ports = range(PORT_FLOOR, ephemeral_ports().start)
    if len(ports) < 1000:  # an unusual ip_local_port_range: the kernel's choice
        return _kernels_port(host)
    if _walk[0] != os.getpid():
        _walk[:] = [os.getpid(), ports.start + int.from_bytes(os.urandom(4), "little") % len(ports)]
    for _ in range(len(ports)):
        port = _walk[1]
        _walk[1] = ports.start + (port + 1 - ports.start) % len(ports)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
        return port
    return _kernels_port(host)


def _kernels_port(host: str) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
        if port != 1900:
            return port
