"""The detached launcher of a background actor system (see system.start_daemon), and its watchdog.

``start_daemon`` runs ``python -P -c "from actors._daemon import main; main()"``
with stdio on /dev/null (stderr on ``logs/daemon.log``), no inherited
descriptors and a new session, and the SystemSpec pickled in
``PEGASUS_DAEMON_SPEC``.  This process then:

1. becomes a child *subreaper*: the Thespian admin double-forks to daemonize
   and actors whose parent is SIGKILLed are orphaned; both are re-parented to
   us instead of PID 1 (which, in our containers, never reaps them), so they
   stay in the system's process tree and get reaped when they exit;
2. takes the state directory's lock (``ownership``) and keeps it for the
   life of the system, writes the settings the guardian configures the
   supervisor with, and installs Thespian's patches (``thespian_patches``:
   bind address, frames authenticated with the system key, log routing,
   speed) -- inherited by the admin and every actor through fork;
3. forks a short-lived starter that creates the ActorSystem (Thespian forks the
   admin from it), brings the guardian and its supervisor up, and exits, so the
   long-lived launcher holds no socket;
4. writes the owner record (launcher and admin identities) -- the signal that
   start_daemon waits for -- and reaps children;
5. when the admin dies without a stop being asked for (``stopping`` file), ends
   every other process of the system (the logger holds the admin's port, the
   actors would be unreachable) and starts it again on the same port and state
   directory: the supervisor restores every task, as after any restart.  Deaths
   in a row wait longer each time (``pegasus.restarts``).
"""

from __future__ import annotations

import base64
import ctypes
import os
import pickle
import sys
import time
import traceback

from thespian.actors import ActorSystem

from actors import frames, ownership, procs, titles
from actors.system import _SPEC_ENV, SystemSpec, _busy, _prepare_process, _write_owner, port_in_use
from pegasus import files
from pegasus.restarts import Restarts

_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
BRING_UP_TIMEOUT_S = 120.0  # the supervisor restores every unfinished task before it answers


def say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def main() -> None:
    """Entry point of the launcher process."""
    spec: SystemSpec = pickle.loads(base64.b64decode(os.environ.pop(_SPEC_ENV)))
    titles.set_launcher_title(spec.state_dir)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    os.umask(files.PRIVATE_UMASK)
    try:
        try:
            lock = ownership.acquire(spec.state_dir)  # held (and inherited) for the life of the system
        except ownership.StateDirBusy:
            raise _busy(spec) from None
        spec.write_settings()
        _prepare_process(spec, ownership.load_key(ownership.key_path(spec.state_dir)))
        titles.install(spec.admin_port, spec.state_dir)
    except Exception as exc:  # noqa: BLE001 - start_daemon shows this line
        print(f"{exc}", file=sys.stderr)
        sys.exit(1)
    frames.reset_count(spec.state_dir)
    spec.stopping_file.unlink(missing_ok=True)
    restarts = Restarts()
    while True:
        admin = _bring_up(spec)
        if admin is None:
            _end_all(spec)
            if not restarts.count:
                sys.exit(1)  # the first start failed: start_daemon reports the reason above
            pause = restarts.died(time.monotonic())
            say(f"the system did not come back; next try in {pause:g}s")
            time.sleep(pause)
            continue
        _write_owner(spec, admin, os.getpid())
        restarts.started(time.monotonic())
        status = _wait_for(admin)
        if spec.stopping_file.exists():
            break
        pause = restarts.died(time.monotonic())
        say(f"admin pid {admin} died ({status}) without a stop; restarting the system on port {spec.admin_port} "
            f"(restart {restarts.count}, in {pause:g}s)")
        _end_all(spec)
        time.sleep(pause)
    _reap_all()
    lock.close()


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


def _wait_for(admin: int) -> str:
    """Reap children until the admin has exited; how it ended."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            if not procs.is_alive(admin):
                return "gone"
            time.sleep(0.2)  # not our child (yet): look again
            continue
        except InterruptedError:
            continue
        if pid == admin:
            return f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"


def _end_all(spec: SystemSpec) -> None:
    """SIGKILL every other process of the system (the lock's holders and their descendants) and wait for
    the admin port to be free again."""
    procs.kill_all(procs.identities(ownership.pids_of(spec.state_dir)), grace=0)
    _reap_all(block=False)
    deadline = time.monotonic() + 10.0
    while port_in_use(spec) and time.monotonic() < deadline:
        time.sleep(0.05)


def _reap_all(block: bool = True) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        if pid == 0:
            return
