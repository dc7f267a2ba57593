"""The detached launcher of a background actor system (see system.start_daemon).

``start_daemon`` runs ``python -P -c "from actors._daemon import main; main()"``
with stdio on /dev/null, no inherited descriptors and a new session, and the
SystemSpec pickled in ``PEGASUS_DAEMON_SPEC``.  This process then:

1. becomes a child *subreaper*: the Thespian admin double-forks to daemonize
   and actors whose parent is SIGKILLed are orphaned; both are re-parented to
   us instead of PID 1 (which, in our containers, never reaps them), so they
   stay in the system's process tree for ``system_pids``/``shutdown`` and get
   reaped when they exit;
2. takes the state directory's lock (``ownership``) and keeps it for the
   life of the system, and installs the bind patch, the frame authentication
   with the system key and the log routing -- inherited by the admin and every
   actor through fork;
3. forks a short-lived starter that creates the ActorSystem (Thespian forks the
   admin from it) and exits, so the long-lived launcher holds no socket;
4. writes the owner record (launcher and admin identities) -- the signal that
   start_daemon waits for -- and reaps children until none is left.
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

from actors import _frames, ownership, procs
from actors.system import _SPEC_ENV, SystemSpec, _busy, _prepare_process, _write_owner
from pegasus import files

_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>


def main() -> None:
    """Entry point of the launcher process."""
    spec: SystemSpec = pickle.loads(base64.b64decode(os.environ.pop(_SPEC_ENV)))
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    os.umask(files.PRIVATE_UMASK)
    try:
        try:
            lock = ownership.acquire(spec.state_dir)  # held (and inherited) for the life of the system
        except ownership.StateDirBusy:
            raise _busy(spec) from None
        _prepare_process(spec, ownership.load_key(ownership.key_path(spec.state_dir)))
    except Exception as exc:  # noqa: BLE001 - start_daemon shows this line
        print(f"{exc}", file=sys.stderr)
        sys.exit(1)
    _frames.reset_count(spec.state_dir)
    starter = os.fork()
    if starter == 0:
        try:
            ActorSystem(spec.base, spec.thespian_capabilities(), logDefs=spec.log_defs(), transientUnique=True)
            os._exit(0)  # skip atexit: nothing of this process must linger
        except BaseException:  # noqa: BLE001 - report anything, then exit
            traceback.print_exc()
            os._exit(1)
    _, status = os.waitpid(starter, 0)
    if status != 0:
        sys.exit(1)
    me = os.getpid()
    admin = None
    for _ in range(250):  # the admin is re-parented to us within milliseconds
        admin = procs.listener_pid(spec.admin_port, procs.descendants(me))
        if admin is not None:
            break
        time.sleep(0.02)
    if admin is None:
        print(f"admin on port {spec.admin_port} not found among our descendants", file=sys.stderr)
        sys.exit(1)
    _write_owner(spec, admin, me)
    while True:  # reap until every process of the system is gone
        try:
            os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    lock.close()
