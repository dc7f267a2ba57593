"""The tests' port picker: a port below the kernel's ephemeral range, so no actor of another system takes it.

Issue 30: a test stopped its system and started it again on the same port; in between an actor of a
system another test ran (every actor listens on a port the kernel picks, bind to port 0) took it,
and the start failed ("port ... is used by another program (pid ..., pegasus: task actor)").
"""

from __future__ import annotations

import os
import socket

from actors.runtime import procs


def test_a_free_port_is_never_one_the_kernel_hands_out() -> None:
    ephemeral = procs.ephemeral_ports()
    ports = [procs.free_port() for _ in range(50)]
    assert not [port for port in ports if port in ephemeral], (ephemeral, ports)
    assert all(procs.PORT_FLOOR <= port < ephemeral.start for port in ports)
    assert len(set(ports)) == len(ports)  # a process walks the range: none handed out twice in a row
    for port in ports:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # free when handed out (and still, nothing took it)


def test_a_port_in_use_is_skipped_and_a_forked_child_walks_from_elsewhere() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", procs.free_port()))
        held.listen()
        taken = held.getsockname()[1]
        procs._walk[1] = taken  # the walk's next port is the one held
        assert procs.free_port() not in (taken, 1900)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a walk of its own (else it would hand out its parent's next ports)
        procs.free_port()
        os.write(write, str(procs._walk[0]).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(write)
    walker = int(os.read(read, 16))
    os.close(read)
    assert walker == pid
