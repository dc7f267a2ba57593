"""Every child process that dies is announced to its parent, and a dead child's refused exit request
removes that child: a parent's shutdown never waits for a child already gone.

Thespian's ``MultiProcReplicator._childExited`` (run for each ChildActorExited) drops every dead
process from the list ``childDied`` (SIGCHLD) announces from: a child that died while a sibling's
exit was handled is never announced, and its parent waits for it at shutdown until the admin gives
up.  ``ActorManager._shutdownActor``'s error callback names its loop variable late: a dead child's
refused exit request removes the last child, not that one.  docs/thespian-patches.md#child-exits.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any

from thespian.actors import ActorExitRequest, ChildActorExited
from thespian.system import multiprocCommon as _multiproc
from thespian.system.actorManager import ActorManager as _ActorManager
from thespian.system.addressManager import CannotPickleAddress
from thespian.system.transport import TransmitIntent
from thespian.system.utilis import partition, thesplog

from actors.wire.thespian_patches.base import Kind, Patch, Target

_CHILD_EXITED = Target(_multiproc.MultiProcReplicator, "_childExited", "source af183ece40a8bc13")
_SHUTDOWN = Target(_ActorManager, "_shutdownActor", "source 28e6048b823d1674")
PATCH = Patch("child_exits", Kind.ROBUSTNESS, "child-exits", (
    _CHILD_EXITED, _SHUTDOWN,
    Target(_multiproc.MultiProcReplicator, "_checkChildLiveness", "source c16a260aad2df4cf"),  # is_alive, joined when dead
    Target(_ActorManager, "_childInaccessible", "source 4dadb498a3959b32"),  # -> _handleChildExited(child)
    Target(_ActorManager, "_sayGoodbye", "source d977861d39a60821"),
    Target(_multiproc, "ChildInfo", "source ca6e40fcba031fea"),  # childAddr, and childRealAddr once connected
))


def child_exited(self: Any, child_address: Any) -> None:
    """``_childExited``: the dead processes are dropped, and each but ``child_address`` (being
    handled) announced to this actor as ``childDied`` would have (a ChildActorExited to itself)."""
    live, dead = partition(self._checkChildLiveness, getattr(self, "_child_procs", []))
    self._child_procs = live
    for each in dead:
        address = getattr(each, "childRealAddr", each.childAddr)
        if address == child_address or each.childAddr == child_address:
            continue
        try:
            self.transport.scheduleTransmit(None, TransmitIntent(self.transport.myAddress, ChildActorExited(address)))
        except CannotPickleAddress:
            thesplog("child %s is dead but cannot translate address to properly handle it", address,
                     level=logging.ERROR)


def shutdown_actor(self: Any, shutdownChildren: bool = True) -> bool:  # noqa: N803 - Thespian's name
    """``_shutdownActor``, each child's refused exit request removing that child."""
    if hasattr(atexit, "unregister"):
        atexit.unregister(self._shutdownActor)
    if getattr(self, "_exiting", None):
        return True  # already exiting
    self._exiting = True
    children = self.childAddresses
    if shutdownChildren and children:
        for each in children:
            self._send_intent(TransmitIntent(each, ActorExitRequest(recursive=True),
                                             onError=lambda _r, m, child=each: self._childInaccessible(child, m)))
        return True  # waits for its children to exit
    self._sayGoodbye()
    self.transport.abort_run(drain=True)
    return False


def install() -> None:
    """Dead children announced; a refused exit request removes the child it was for."""
    _CHILD_EXITED.replace(child_exited, PATCH.name)
    _SHUTDOWN.replace(shutdown_actor, PATCH.name)
