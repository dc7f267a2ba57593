"""procs.kill_own_child: what the pool (a hung worker) and the supervisor (a stopped pool) may SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from actors.runtime import procs
from tests.support.waiting import wait_for


def test_only_a_living_child_of_this_process_is_signalled() -> None:
    """Several admins may run on one host (a leader and members), so a pid is not enough: a remote worker's
    pid may be any process here (that one is never even named for a kill is the pool core's:
    tests/pegasus/pool/test_pool_core.py)."""
    child = subprocess.Popen(["sleep", "30"])
    grandchild = subprocess.Popen([sys.executable, "-c", "import subprocess; subprocess.run(['sleep', '30'])"])
    nephews: dict[int, int] = {}
    try:
        nephew = wait_for(lambda: next(iter(procs.descendants(grandchild.pid)), None), what="a grandchild")
        nephews = procs.identities([nephew])  # alive, on this host, not our child
        assert not procs.kill_own_child(nephew)  # not forked by this process
        assert not procs.kill_own_child(os.getpid())
        assert procs.is_alive(child.pid) and procs.is_alive(nephew)
        assert procs.kill_own_child(child.pid)
        assert child.wait(5) == -signal.SIGKILL
        assert not procs.kill_own_child(child.pid)  # reaped: gone
    finally:
        procs.kill_all(nephews, grace=0)
        for proc in (child, grandchild):
            proc.kill()
            proc.wait()
