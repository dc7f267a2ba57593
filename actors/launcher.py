"""The detached launcher of a background system (``lifecycle.System.start_daemon``), and its watcher.

The launcher holds the state directory's lock for the system's life, starts the admin from a
short-lived starter (so it holds no socket), reaps what the admin orphans (a subreaper) and
starts the system again when the admin dies unasked; its watcher, sharing the lock, takes its
place if it dies.  Who restarts whom: docs/architecture.md, "The top of the tree".  Idle, it sleeps
in ``poll`` on what can happen (the admin's and the watcher's pidfds, a pipe written at every SIGCHLD)
with no timeout: an idle system's launcher never wakes (issue 33).
"""

from __future__ import annotations

import base64
import ctypes
import os
import pickle
import select
import signal
import sys
import time
import traceback
from typing import Any, NoReturn

from setproctitle import setproctitle
from thespian.actors import ActorSystem

from actors.wire import frames
from actors.runtime import ownership, procs, sharing, titles
from actors.runtime.system import SPEC_ENV, SystemSpec, busy_error, prepare_process, write_owner, port_in_use, read_owner
from pegasus import files
from pegasus.supervision import Alarm, ChildSpec, Exceeded, Exited, StartAgain, Started, Supervision

_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
BRING_UP_TIMEOUT_S = 120.0  # the supervisor restores every unfinished task before it answers
ADMIN, WATCHER = "admin", "watcher"
# The top of the tree: nobody above to escalate to, so a crash loop only slows down (and is said).
ADMIN_SPEC = ChildSpec(intensity=5, period_s=60.0, when_exceeded=Exceeded.SLOW_DOWN, first_s=0.0, then_s=1.0,
                       max_s=30.0, stable_s=60.0)
WATCHER_SPEC = ADMIN_SPEC
POLL_MS = 1000  # how often the launcher looks when an event has no fd (no pidfd here)
_CHILDREN: tuple[int, int] | None = None  # the SIGCHLD pipe (read, write): _children_ended


def say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def main() -> None:
    """Entry point of the launcher process."""
    spec: SystemSpec = pickle.loads(base64.b64decode(os.environ.pop(SPEC_ENV)))
    titles.set_launcher_title(spec.state_dir)
    _become_subreaper()
    os.umask(files.PRIVATE_UMASK)
    try:
        try:
            ownership.acquire(spec.state_dir)  # held (and inherited) for the life of the system
        except ownership.StateDirBusy:
            raise busy_error(spec) from None
        spec.write_settings()
        prepare_process(spec, ownership.load_key(ownership.key_path(spec.state_dir)))
        sharing.preload_system(freeze_here=True, settings_json=spec.settings_json)
        titles.install(spec.admin_port, spec.state_dir)
    except Exception as exc:  # noqa: BLE001 - start_daemon shows this line
        print(f"{exc}", file=sys.stderr)
        sys.exit(1)
    frames.reset_count(spec.state_dir)
    spec.stopping_file.unlink(missing_ok=True)
    _run(spec, None, fresh=True)


def _become_subreaper() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _run(spec: SystemSpec, adopted: tuple[int, int] | None, *, fresh: bool) -> NoReturn:
    """Keep the system up until a stop: (re)start it, watch its admin, keep a watcher of this process.

    ``adopted``: the identity of a running admin this launcher took over (from the launcher it replaced);
    ``fresh``: a new system, whose first start failing is start_daemon's error.
    """
    supervision = Supervision({ADMIN: ADMIN_SPEC, WATCHER: WATCHER_SPEC})
    watcher = Watcher(spec, supervision)
    while True:
        watcher.check()  # one that died while the system was down is started again when due
        admin = adopted or _identity(_bring_up(spec))
        adopted = None
        if spec.stopping_file.exists():  # a stop came while the system was (re)starting: nothing is kept
            _end_all(spec, keep=watcher.identity())
            break
        if admin is None:
            _end_all(spec, keep=watcher.identity())
            if fresh:
                sys.exit(1)  # start_daemon reports the reason above
            pause = _pause(supervision.step(Exited(ADMIN, time.monotonic(), reason="it did not come back")))
            say(f"the system did not come back; next try in {pause:g}s")
            time.sleep(pause)
            continue
        fresh = False
        write_owner(spec, admin[0], os.getpid())
        supervision.step(Started(ADMIN, ADMIN, time.monotonic()))
        watcher.ensure()
        sharing.release_file_pages()  # what its preload and start ran (sharing's docstring); it runs a loop from here
        status = _wait_for(admin, watcher)
        if spec.stopping_file.exists():
            break
        pause = _pause(supervision.step(Exited(ADMIN, time.monotonic(), reason=status)))
        say(f"admin pid {admin[0]} died ({status}) without a stop; restarting the system on port {spec.admin_port} "
            f"(restart {supervision.children[ADMIN].count}, in {pause:g}s)")
        _end_all(spec, keep=watcher.identity())
        time.sleep(pause)
    watcher.end()
    _reap_all()
    sys.exit(0)


def _pause(commands: list[Any]) -> float:
    """The pause a StartAgain asks for (an Alarm is said too); the longest one when nothing is decided."""
    for command in commands:
        if isinstance(command, Alarm):
            say(f"the {command.kind} died {command.deaths} times within {command.period_s:g}s "
                f"({command.reason}): restarting it at the longest pause")
    return next((c.delay_s for c in commands if isinstance(c, StartAgain)), ADMIN_SPEC.max_s)


def _identity(pid: int | None) -> tuple[int, int] | None:
    found = procs.identities([pid]) if pid else {}
    return next(iter(found.items()), None)


def _bring_up(spec: SystemSpec) -> int | None:
    """Start the admin (and, for a supervised system, its guardian and supervisor); the admin's pid or None."""
    starter = os.fork()
    if starter == 0:
        try:
            asys = ActorSystem(spec.base, spec.thespian_capabilities(), logDefs=spec.log_defs(), transientUnique=True)
            if spec.settings_json:
                from actors import messages as m
                from actors.guardian import GUARDIAN_NAME, Guardian

                guardian = asys.createActor(Guardian, globalName=GUARDIAN_NAME)
                reply = asys.ask(guardian, m.Locate(request_id="launcher"), BRING_UP_TIMEOUT_S)
                if not isinstance(reply, m.Reply) or not reply.ok:
                    reason = reply.error if isinstance(reply, m.Reply) else "no answer from the guardian"
                    print(f"{reason}", file=sys.stderr, flush=True)
                    os._exit(1)
            os._exit(0)  # skip atexit: nothing of this process must linger
        except BaseException:  # noqa: BLE001 - report anything, then exit
            traceback.print_exc()
            os._exit(1)
    _, status = os.waitpid(starter, 0)
    if status != 0:
        return None
    me = os.getpid()
    for _ in range(250):  # the admin is re-parented to us within milliseconds
        admin = procs.listener_pid(spec.admin_port, procs.descendants(me))
        if admin is not None:
            return admin
        time.sleep(0.02)
    print(f"admin on port {spec.admin_port} not found among our descendants", file=sys.stderr)
    return None


def _wait_for(admin: tuple[int, int], watcher: Watcher) -> str:
    """Reap children (orphans come to us) and keep the watcher until the admin has exited; how it ended.

    The admin is our child, or (adopted) not: it is watched by identity through a pidfd either way.
    """
    pid, start = admin
    admin_fd = _pidfd(pid, start)
    children = _children_ended()
    try:
        while True:
            ended = _reap_all(block=False)
            if pid in ended:
                status = ended[pid]
                return f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
            if not procs.is_alive(pid, start):
                return "gone"
            watcher.check()
            ready = select.poll()
            for fd in (admin_fd, watcher.fd, children):
                if fd is not None:
                    ready.register(fd, select.POLLIN)
            # Every event has its fd; a look a second only when one could not be had.
            ready.poll(watcher.wait_ms(None if None not in (admin_fd, watcher.fd, children) else POLL_MS))
            _drain(children)
    finally:
        if admin_fd is not None:
            os.close(admin_fd)


def _children_ended() -> int | None:
    """The read end of a pipe written to at every SIGCHLD of this process (Python's wake-up fd): an orphan
    re-parented to us (a subreaper) that dies is reaped at once, not at the next look.  Made once per process;
    a fork's child drops it (``_drop_children_ended``).  None when it cannot be made: the launcher looks."""
    global _CHILDREN
    if _CHILDREN is None:
        try:
            read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        signal.signal(signal.SIGCHLD, _ignore)  # a handler, so that the signal is delivered (and written)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        os.register_at_fork(after_in_child=_drop_children_ended)
        _CHILDREN = (read, write)
    return _CHILDREN[0]


def _ignore(_signum: int, _frame: object) -> None:
    pass


def _drop_children_ended() -> None:
    """In a forked child (the starter, the watcher): SIGCHLD as it was, and not this process's pipe."""
    global _CHILDREN
    if _CHILDREN is not None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in _CHILDREN:
            os.close(fd)
        _CHILDREN = None


def _drain(fd: int | None) -> None:
    while fd is not None:
        try:
            if not os.read(fd, 512):
                return
        except BlockingIOError:
            return


def _pidfd(pid: int, start: int) -> int | None:
    """A pidfd of exactly that process (pid and start time), or None when it is gone."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if not procs.is_alive(pid, start):  # opened a later process with that pid, or a zombie
        os.close(fd)
        return None
    return fd


def _end_all(spec: SystemSpec, keep: dict[int, int]) -> None:
    """SIGKILL every other process of the system (the lock's holders and their descendants) but ``keep``
    (the watcher), and wait for the admin port to be free again."""
    doomed = procs.identities(ownership.pids_of(spec.state_dir))
    procs.kill_all({pid: start for pid, start in doomed.items() if keep.get(pid) != start}, grace=0)
    _reap_all(block=False)
    deadline = time.monotonic() + 10.0
    while port_in_use(spec) and time.monotonic() < deadline:
        time.sleep(0.05)


def _reap_all(block: bool = True) -> dict[int, int]:
    """Reap exited children (all of them when ``block``); pid -> wait status."""
    ended: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return ended
        except InterruptedError:
            continue
        if pid == 0:
            return ended
        ended[pid] = status


# -- the watcher: who watches the launcher ---------------------------------------------------------


class Watcher:
    """The launcher's own child that takes its place when it dies; started again when it dies itself."""

    def __init__(self, spec: SystemSpec, supervision: Supervision) -> None:
        self.spec, self.supervision = spec, supervision
        self.pid: int | None = None
        self.start = 0
        self.fd: int | None = None  # a pidfd: readable when it exits
        self.due: float | None = None  # when to start it again

    def identity(self) -> dict[int, int]:
        return {self.pid: self.start} if self.pid is not None else {}

    def ensure(self) -> None:
        """Start it unless it runs or its restart is not due yet."""
        if self.pid is None and (self.due is None or time.monotonic() >= self.due):
            try:
                self._spawn()
            except OSError as exc:  # no fork now: the launcher runs on, and tries again later
                self.due = time.monotonic() + WATCHER_SPEC.max_s
                say(f"no watcher could be started ({exc}); next try in {WATCHER_SPEC.max_s:g}s")

    def check(self) -> None:
        """Notice its death (whoever reaped it) and start it again when due."""
        if self.pid is not None and not procs.is_alive(self.pid, self.start):
            pid = self.pid
            self._forget()
            pause = _pause(self.supervision.step(Exited(WATCHER, time.monotonic(), reason="it died")))
            self.due = time.monotonic() + pause
            say(f"watcher pid {pid} died; starting another in {pause:g}s")
        if self.due is not None:
            self.ensure()

    def wait_ms(self, longest: int | None) -> int | None:
        """How long the launcher may wait: until this watcher's restart is due, ``longest`` at most (None: no bound)."""
        if self.pid is None and self.due is not None:
            due = max(0, int((self.due - time.monotonic()) * 1000) + 1)
            return due if longest is None else min(longest, due)
        return longest

    def end(self) -> None:
        """A deliberate exit of the launcher: its watcher goes first (by identity: it may have been reaped)."""
        if self.pid is not None and procs.is_alive(self.pid, self.start):
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        if self.pid is not None:
            self._forget()

    def _forget(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        self.pid, self.fd = None, None

    def _spawn(self) -> None:
        launcher = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _watch(self.spec, launcher)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - report anything, then exit
                traceback.print_exc()
            sys.stderr.flush()
            os._exit(code)  # never back into the launcher's frames
        found = procs.read_stat(pid)
        self.pid, self.start, self.due = pid, found.starttime if found else 0, None
        self.fd = _pidfd(pid, self.start)
        self.supervision.step(Started(WATCHER, WATCHER, time.monotonic()))


def _watch(spec: SystemSpec, launcher: int) -> None:
    """The watcher process: wait for the launcher's death, then take its place (``_run``, adopting the admin).

    Forked from the launcher, it shares the launcher's open file of the state directory's lock: the lock
    is held across the replacement, and no other system can take the directory meanwhile.
    """
    setproctitle(titles.title("watcher", spec.state_dir))
    try:
        fd: int | None = os.pidfd_open(launcher)
    except OSError:
        fd = None
    if fd is not None and os.getppid() == launcher:  # the pidfd is the launcher's (still our parent)
        ready = select.poll()
        ready.register(fd, select.POLLIN)
        while not ready.poll():
            pass
    if spec.stopping_file.exists():
        sys.exit(0)  # a stop: the launcher ends, and so do we
    titles.set_launcher_title(spec.state_dir)
    _become_subreaper()
    record = read_owner(spec) or {}
    admin = tuple(record["admin"]) if record.get("admin") else None
    if admin is not None and not (procs.is_alive(*admin) and admin[0] in ownership.holders(spec.state_dir)):
        admin = None
    say(f"launcher pid {launcher} died; pid {os.getpid()} takes its place"
        + (f", watching admin pid {admin[0]}" if admin else ", the admin is gone too: restarting the system"))
    if admin is None:
        _end_all(spec, keep={})
    _run(spec, admin, fresh=False)
