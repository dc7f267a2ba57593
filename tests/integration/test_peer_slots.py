"""actors/wire/thespian_patches/robustness/peer_slots.py: messages piling up for a peer that never acknowledges
(a stopped pool) do not hold up the sender's messages to anyone else.  Without it, past Thespian's
``MAX_PENDING_TRANSMITS`` of them every other send waited until they failed, a retry period or two after the
peer was killed (a task actor's re-sent stage requests and reports: the fault matrix's ~70 s stall)."""

from __future__ import annotations

import os
import signal

from thespian.system.transport import asyncTransportBase

from actors.runtime import procs
from tests.support.stalled_peer import Peer, Probe, Sender

ASK = 60  # seconds: a bound for a loaded machine; without the patch the answer never comes while the peer is stopped


def test_a_stopped_peer_does_not_hold_up_sends_to_others(tcp_system) -> None:
    spec, asys = tcp_system
    peer, sender, probe = asys.createActor(Peer), asys.createActor(Sender), asys.createActor(Probe)
    pid = asys.ask(peer, "pid", ASK)
    assert isinstance(pid, int)
    identity = procs.identities([pid])
    os.kill(pid, signal.SIGSTOP)
    try:
        # More than the limit: one message in flight to the stopped peer, the rest parked behind it.
        flood = asyncTransportBase.MAX_PENDING_TRANSMITS + 5
        assert asys.ask(sender, ("flood", peer, flood, probe), ASK) == "arrived"
    finally:
        if procs.is_alive(pid, identity.get(pid)):
            os.kill(pid, signal.SIGKILL)
