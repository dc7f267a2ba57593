"""The quick proof that a state directory's system answers on its port (issue 31: ~30 ms of every CLI command
went to reading every process's /proc): the owner record's admin, still that process, holding the lock and
listening on the port.  Anything less is no proof, and the full scan decides."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from actors.runtime import ownership, procs
from actors.runtime.spec import spec_for
from pegasus.config import Settings


def test_the_recorded_admin_is_proof_only_while_it_is_that_process_holding_the_lock_and_listening(
        tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    spec = spec_for(Settings().with_overrides({"system": {"admin_port": port}, "state": {"home": str(tmp_path)}}))
    me = procs.read_stat(os.getpid())
    assert me is not None

    def record(admin: object) -> bool:
        spec.pid_file.write_text(json.dumps({"admin_port": port, "admin": admin}))
        return ownership._recorded_admin_listens(spec)

    lock = ownership.acquire(tmp_path)  # this process stands for the admin: the lock, the listening socket
    try:
        assert record([me.pid, me.starttime])
        assert not record([me.pid, me.starttime + 1])  # a pid used again by another process
        assert not record(None) and not record(["1", "2"])  # no admin recorded, or not as numbers
        listener.close()
        assert not record([me.pid, me.starttime])  # not listening (any more)
    finally:
        lock.close()
        listener.close()
    listener = socket.create_server(("127.0.0.1", port))
    try:
        assert not record([me.pid, me.starttime])  # listening, but without the lock
    finally:
        listener.close()
