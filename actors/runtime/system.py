"""The Thespian boundary: start, attach to and shut down an actor system (``lifecycle.System`` calls it).

Here the rules hold for every system: sockets on the configured interface, frames authenticated
with the state directory's key, one system per state directory (its lock), logs under
``<state dir>/logs``, a background system started with no inherited descriptors (an admin keeps
its starter's, and a CLI under ``$(...)`` would hang), and a stop that ends the lock's holders and
their descendants only, never anything found by name or port (docs/security.md).
"""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from thespian.actors import ActorSystem, InvalidActorAddress
from thespian.system import multiprocTCPBase
from thespian.system.transport import SendStatus, TransmitIntent

from actors.wire import frames, thespian_patches
from actors.runtime import ownership, procs, titles
from actors.runtime.ownership import (  # re-exported, as the spec's names
    _admin_pid, _check_port_free, write_owner, check_attachable as check_attachable, check_owner as check_owner,
    is_running as is_running, port_in_use as port_in_use, port_user as port_user, read_owner as read_owner,
    system_pids as system_pids,
)
from actors.runtime.spec import (  # re-exported: every caller of the system boundary names them through here
    BASES as BASES, HOME_CAPABILITY as HOME_CAPABILITY, MEMBER_CAPABILITY as MEMBER_CAPABILITY,
    SETTINGS_FILE as SETTINGS_FILE, PegasusSystemError as PegasusSystemError, SystemNotRunningError as SystemNotRunningError,
    SystemSpec as SystemSpec, SystemStartError as SystemStartError, SystemStopError as SystemStopError,
    member_name as member_name, validate as validate,
)
from pegasus import files

_PROJECT_ROOT = Path(__file__).resolve().parents[2]
SPEC_ENV = "PEGASUS_DAEMON_SPEC"

def prepare_process(spec: SystemSpec, key: bytes) -> None:
    """Validate, then install Thespian's patches in this process (and so in everything it forks): the
    bind address, frames authenticated with ``key``, Thespian's log routed, robustness, speed.

    SystemStartError, before anything is installed, when a security or robustness patch cannot apply
    to the installed Thespian (a speed patch that cannot is left out with a warning line).
    """
    validate(spec)
    try:
        thespian_patches.install(
            bind=spec.bind or "0.0.0.0", advertise=spec.advertised, key=key, max_frame_bytes=spec.max_frame_bytes,
            state_dir=spec.state_dir, logs_dir=spec.logs_dir, thesplog_level=spec.thesplog_level,
            convention=(spec.reregistration_period_s, spec.registration_miss_max, spec.restart_period_s))
    except (thespian_patches.PatchRefused, thespian_patches.BindConflict) as exc:
        raise SystemStartError(str(exc), spec.admin_port) from None


def _verify_thespian(spec: SystemSpec) -> None:
    """SystemStartError when a security or robustness patch cannot apply to Thespian (nothing installed)."""
    try:
        thespian_patches.verify()
    except thespian_patches.PatchRefused as exc:
        raise SystemStartError(str(exc), spec.admin_port) from None


def _private_state(spec: SystemSpec) -> None:
    """The state directory 0700 and everything in it 0600 (also what an older Pegasus wrote)."""
    files.private_dir(spec.state_dir)
    files.tighten(spec.state_dir)
    files.private_dir(spec.logs_dir)


# --- start / attach ---------------------------------------------------------------


class _AttachOnlyTCPBase(multiprocTCPBase.ActorSystemBase):
    """A multiprocTCPBase client that never starts an admin.

    Thespian's systemBase starts a new admin whenever the port is free, so a
    plain ``ActorSystem('multiprocTCPBase', ...)`` would silently start a
    second system instead of failing to attach.
    """

    def _startAdmin(self, adminAddr, addrOfStarter, capabilities, logDefs):  # noqa: N802,N803
        raise SystemNotRunningError(
            f"no actor system is running on admin port {capabilities.get('Admin Port')}",
            capabilities.get("Admin Port"),
        )


def _take(spec: SystemSpec) -> ownership.Lock:
    """The state directory's lock for a new system; SystemStartError naming the owner if it has one."""
    try:
        return ownership.acquire(spec.state_dir)
    except ownership.StateDirBusy:
        raise busy_error(spec) from None


def busy_error(spec: SystemSpec) -> SystemStartError:
    """What a start into a state directory that another system holds says: whose it is."""
    record = read_owner(spec) or {}
    admin = record.get("admin")
    owner = (f"the Pegasus system on {record.get('bind', spec.bind)}:{record['admin_port']}"
             + (f" (admin pid {admin[0]})" if admin else "")) if record.get("admin_port") else "another Pegasus system"
    return SystemStartError(f"state directory {spec.state_dir} is in use by {owner}; stop it first "
                            "(pegasus stop) or use another state directory", spec.admin_port)


def start_system(spec: SystemSpec) -> ActorSystem:
    """Start a new system whose admin is forked from this process; return a client.

    For tests and ``pegasus run``.  The admin outlives this process until
    ``shutdown(spec)``.  Raises SystemStartError if the state directory is
    owned or the port taken.
    """
    if spec.base == "simpleSystemBase":
        validate(spec)
        files.private_dir(spec.state_dir)
        spec.write_settings()
        # logDefs=False: simpleSystemBase would otherwise reconfigure this
        # process's logging (its actors run in this process).
        return ActorSystem("simpleSystemBase", spec.thespian_capabilities(), logDefs=False, transientUnique=True)
    validate(spec)
    _private_state(spec)
    lock = _take(spec)
    try:
        _check_port_free(spec)
        spec.write_settings()
        prepare_process(spec, ownership.create_key(spec.state_dir))
        # Imported here: a command that only attaches (status, list ...) needs none of it (~5 ms of each).
        from actors.runtime import sharing  # noqa: PLC0415

        sharing.preload_system(freeze_here=False)  # this process is a client's (a test's, a benchmark's)
        titles.install(spec.admin_port, spec.state_dir)
        frames.reset_count(spec.state_dir)
        before = set(procs.children_of(os.getpid()))
        try:
            asys = ActorSystem(spec.base, spec.thespian_capabilities(), logDefs=spec.log_defs(), transientUnique=True)
        except Exception as exc:
            # Do not leave a half-started admin (and its children) behind: only lock holders are ours.
            lock.close()
            procs.kill_all(procs.identities(system_pids(spec)), grace=0)
            raise SystemStartError(f"actor system did not start on port {spec.admin_port}: {exc}",
                                   spec.admin_port) from exc
        # multiprocessing forked an intermediate child that daemonized the admin
        # (setsid + fork) and exited; nobody joins it, so reap it here.
        stats = procs.all_stats()  # one look at /proc: the intermediates, and the admin in their session
        intermediates = sorted(st.pid for st in stats.values() if st.ppid == os.getpid() and st.pid not in before)
        procs.reap_zombie_children(intermediates)
    finally:
        lock.close()  # the system's processes hold the lock from now on, not this one
    admin = _started_admin(spec, intermediates, stats)
    if admin is not None:
        write_owner(spec, admin, None)
    return asys


def _started_admin(spec: SystemSpec, intermediates: list[int], stats: dict[int, procs.ProcStat]) -> int | None:
    """The admin just started: in the session an intermediate opened (``stats``: /proc as the start left it),
    listening on the admin port and holding the lock; else the one among every process's (``_admin_pid``)."""
    session = [st.pid for st in stats.values() if st.session in intermediates]
    admin = procs.listener_pid(spec.admin_port, session) if session else None
    return admin if admin is not None and ownership.holds(admin, spec.state_dir) else _admin_pid(spec)


def attach(spec: SystemSpec) -> ActorSystem:
    """A client of the system that owns spec's state directory; never starts one.

    Raises SystemNotRunningError at once, saying why, when no system of that
    state directory answers on the port (nothing is sent to another program),
    and OwnershipError when the system key cannot be read.
    """
    if spec.base == "simpleSystemBase":
        raise SystemNotRunningError("a simpleSystemBase system cannot be attached to", spec.admin_port)
    validate(spec)
    check_attachable(spec)
    prepare_process(spec, ownership.load_key(ownership.key_path(spec.state_dir)))
    caps = spec.thespian_capabilities()
    try:
        base = _AttachOnlyTCPBase(SimpleNamespace(capabilities=dict(caps)), logDefs=None)
    except InvalidActorAddress as exc:
        raise SystemNotRunningError(f"no usable admin on port {spec.admin_port}: {exc}", spec.admin_port) from exc
    return ActorSystem(base, caps, transientUnique=True)


def listen(asys: ActorSystem, timeout: float) -> Any:
    """``asys.listen(timeout)``, but a message already delivered is taken at once: on simpleSystemBase a
    ``send`` runs the whole exchange, and its listen slept until the next timer before looking."""
    if type(asys._systemBase).__module__ == "thespian.system.simpleSystemBase":  # named: importing it costs
        waiting = asys.listen(0.0)
        if waiting is not None:
            return waiting
    return asys.listen(timeout)


# A client's send that failed (a connection reset) is tried again after this times the attempt, not Thespian's
# 35 s: its target is a local supervisor or guardian, and one that died refuses the next connect at once.
CLIENT_RETRY = timedelta(milliseconds=250)
# The longest a send runs the transport before it looks at its own message again.  Thespian's transmit-only run
# returns when a transmit ends, except when exactly one other is left pending (its count, 1, reads as True); and
# one pass can sleep in its select to the deadline with an intent left behind (seen: a failed connect at stage 2,
# its pause over, untouched for 30 s): a short run starts a new pass.
SEND_LOOK_S = 0.05


class _Outcome:
    """How one transmit ended (a SendStatus), None while Thespian is still trying it."""

    status: Any = None

    def done(self, status: Any, _intent: Any) -> None:
        self.status = status


def _finish_ended(transport: Any) -> None:
    """Call the callbacks of the transmits that ended where Thespian's loop does not: a connect the kernel
    refused at once (inside ``scheduleTransmit``) ends the intent there, and the transmit-only run, finding
    no transmit in flight, returns before it calls them (a lost client request, seen after an admin's death)."""
    if not hasattr(transport, "_finished_intents"):
        return
    ended, transport._finished_intents = transport._finished_intents, []
    for intent, status in ended:
        intent.tx_done(status)


def send(asys: ActorSystem, address: Any, message: Any, timeout: float = 10.0) -> str | None:
    """Send ``message`` from a client and wait until it is delivered; None, or why it was not.

    ``ActorSystem.tell`` returns silently when the target is dead, so a client could not tell a delivered
    request from one sent to a supervisor just replaced.  This looks at its own message's outcome only (not
    every transmit of the process, as ``tell`` does) within ``timeout``, retried after ``CLIENT_RETRY``
    (docs/durability.md, "Recovery after a supervisor's death"): ``"DeadTarget"``, ``"BadPacket"`` (the
    frame refused), ``"Failed"``, or ``"Timeout"``.
    """
    base = asys._systemBase
    if not hasattr(base, "_tx_to_actor"):  # simpleSystemBase: delivered in this process, or not at all
        asys.tell(address, message)
        return None
    outcome = _Outcome()
    base.transport.scheduleTransmit(None, TransmitIntent(
        address, message, onSuccess=outcome.done, onError=outcome.done,
        maxPeriod=timedelta(seconds=timeout), retryPeriod=CLIENT_RETRY))
    deadline = time.monotonic() + timeout
    while outcome.status is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return "Timeout"
        if base._run_transport(timedelta(seconds=min(left, SEND_LOOK_S)), txonly=True) == 0 and outcome.status is None:
            _finish_ended(base.transport)
            if outcome.status is None:
                time.sleep(0.01)  # none in the transport: ours waits in the queue another thread's send drains
    status = outcome.status
    return (None if status == SendStatus.Sent else "DeadTarget" if status == SendStatus.DeadTarget else
            "BadPacket" if status == SendStatus.BadPacket else "Failed")


def detach(asys: ActorSystem) -> None:
    """Close a client's endpoint without shutting the system down."""
    base = getattr(asys, "_systemBase", None)
    transport = getattr(base, "transport", None)
    if transport is not None:
        transport.close()


# --- daemon ---------------------------------------------------------------------


# Lean first (actors/runtime/deferred.py): every process of the system is forked from the launcher.
LAUNCHER = "from actors.runtime.deferred import defer_metadata; defer_metadata(); from actors.launcher import main; main()"


def start_daemon(spec: SystemSpec, timeout: float = 30.0) -> int:
    """Start the system in a detached background launcher; return the admin pid.

    Returns once the admin answers and the owner record is written.  Safe to
    call from a process whose stdout is a pipe: the launcher holds none of our
    fds.  The launcher takes the state directory's lock itself (and keeps it).
    """
    validate(spec)
    if spec.base != "multiprocTCPBase":
        raise SystemStartError("only multiprocTCPBase can run as a daemon", spec.admin_port)
    _verify_thespian(spec)  # here, not only in the launcher: the refusal is the caller's own error
    _private_state(spec)
    if ownership.is_owned(spec.state_dir):
        raise busy_error(spec)
    _check_port_free(spec)
    ownership.create_key(spec.state_dir)
    spec.pid_file.unlink(missing_ok=True)
    env = dict(os.environ)
    # The launcher (and every actor forked from it) must import actors/ and
    # the caller's actor classes: put our project root first on its path.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    # Stage workers placed on a convention member log under the member's own
    # state directory (the pool sends them settings without [state] home).
    env["PEGASUS_HOME"] = str(spec.state_dir)
    # The spec travels in the environment, not argv, to keep `ps` readable.
    env[SPEC_ENV] = base64.b64encode(pickle.dumps(spec)).decode()
    log = spec.logs_dir / "daemon.log"
    err = files.open_private(log)
    try:
        launcher = subprocess.Popen(
            # -P: do not put the cwd (state_dir) on sys.path.
            [sys.executable, "-P", "-c", LAUNCHER],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            close_fds=True, start_new_session=True, cwd=spec.state_dir, env=env,
        )
    finally:
        os.close(err)
    _launchers[launcher.pid] = launcher
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = read_owner(spec)
        if record and record.get("daemon") and record["daemon"][0] == launcher.pid and record.get("admin"):
            return int(record["admin"][0])
        if launcher.poll() is not None:
            _launchers.pop(launcher.pid, None)
            raise SystemStartError(f"the background system did not start: {_last_line(log)} (see {log})",
                                   spec.admin_port)
        time.sleep(0.02)
    doomed = procs.identities([launcher.pid, *procs.descendants(launcher.pid)])
    procs.kill_all(doomed, grace=0)
    launcher.wait()
    raise SystemStartError(f"daemon did not answer within {timeout}s", spec.admin_port)


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1].strip() if lines else "no log"


# Launchers this process started: kept so their exit status can be reaped.
_launchers: dict[int, subprocess.Popen] = {}


# --- shutdown ---------------------------------------------------------------------


SETTLED_GRACE_S = 2.0
LATE_ROUNDS = 5


def shutdown(spec: SystemSpec, asys: ActorSystem | None = None, grace: float = 15.0) -> None:
    """Shut the system down and make sure every one of its processes is gone.

    Asks the admin to shut down (through asys, or a fresh attach), waits up
    to grace seconds for the system's processes (the lock's holders and their
    descendants), then SIGKILLs exactly those survivors.  Raises
    SystemStopError if any still lives.
    """
    if spec.base == "simpleSystemBase":
        if asys is not None:
            asys.shutdown()
        return
    doomed = procs.identities(system_pids(spec))
    if doomed:
        files.write_private(spec.stopping_file, b"")  # its launcher must not start it again
    try:
        client = asys if asys is not None else attach(spec)
        client.shutdown()
        # Shutdown is done when this returns; what may linger is the admin retrying,
        # for ~7 s, a ChildActorExited notice about the supervisor to the client that
        # created it and has closed by now (seen in thespian.log).  Nothing of ours
        # is left to wait for, so the survivors get a short grace, then SIGKILL.
        grace = min(grace, SETTLED_GRACE_S)
    except SystemNotRunningError:
        pass
    except Exception:  # noqa: BLE001 - a broken admin is what the SIGKILL is for
        grace = min(grace, 1.0)
    # Actors created after the snapshot are descendants of what we saw.
    doomed.update(procs.identities(system_pids(spec)))
    survivors = procs.kill_all(doomed, grace)
    for _ in range(LATE_ROUNDS):
        # An admin a launcher was starting again as the stop came (a restart in progress) is forked after
        # the snapshots: it holds the lock all the same.
        late = procs.identities(system_pids(spec))
        if not late:
            break
        doomed.update(late)
        survivors = sorted(set(survivors) | set(procs.kill_all(late, grace=0)))
    for pid, launcher in list(_launchers.items()):
        if launcher.poll() is not None or pid in doomed:
            try:
                launcher.wait(timeout=1.0)
                _launchers.pop(pid, None)
            except subprocess.TimeoutExpired:
                pass
    if survivors:
        raise SystemStopError(f"processes {survivors} of port {spec.admin_port} survived SIGKILL", spec.admin_port, survivors)
    spec.pid_file.unlink(missing_ok=True)
    spec.stopping_file.unlink(missing_ok=True)


def stop_daemon(spec: SystemSpec, grace: float = 15.0) -> None:
    """Stop the system that owns spec's state directory (started by start_daemon or not)."""
    shutdown(spec, None, grace)
