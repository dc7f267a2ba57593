"""An acknowledgement nobody waits for does not wake Thespian's loop by itself: the next pass that happens reads it.

Thespian acknowledges every message on its connection, and a sender with nothing more for that peer woke for the
acknowledgement alone when it came after the pass that sent.  A transmit sent whole from a receiving loop, whose
success only the transport's own count waits on (or whose sender says so: ``unhurried``), with nothing queued
behind it, gets ``SO_RCVLOWAT`` one byte past an acknowledgement: the kernel reports its socket only for more (a
message behind it), its end or an error (a dead peer).  docs/thespian-patches.md#deferred-acks.
"""

from __future__ import annotations

import socket as _socket
import threading
from typing import Any

from thespian.system import transport as _transport
from thespian.system.transport import TCPTransport as _tcp
from thespian.system.transport import TransmitOnly as _TransmitOnly
from thespian.system.transport import asyncTransportBase as _async

from actors.wire.frames import ACK_FRAME_BYTES
from actors.wire.thespian_patches.base import Kind, Patch, Target, wrap
from actors.wire.thespian_patches.speed.whole_messages import has_data

_T = _tcp.TCPTransport
_SENT = Target(_T, "_next_XMIT_3", "source 5f5ff30046f7a92e")  # all written: from here it waits for the ack
_ACK = Target(_T, "_next_XMIT_4", "source e41dc7486dd32f0d")  # the only step that reads a transmit's socket
_CONNECT = Target(_T, "_next_XMIT_1", "source f25e978fdce5d56d")  # a second transmit to a peer waits its slot here
_TIMEOUTS = Target(_T, "_processIntentTimeouts", "source c61b40adc4d5f5a7")  # once a pass, after its reads
_RUN = Target(_T, "_runWithExpiry", "source 5a6c512c48e9fd0a")
_QUEUE = Target(_T, "_queue_tx", "source c31a5b53b493a873")
PATCH = Patch("deferred_acks", Kind.SPEED, "deferred-acks", (
    _SENT, _ACK, _CONNECT, _TIMEOUTS, _RUN, _QUEUE,
    Target(_T, "_processIntents", "source ad3cc2f41f844085"),  # steps one transmit by its fileno
    Target(_T, "_waitForSendable", "source a4f4a8642fa94b2d"),  # a transmit waiting for its ack is polled readable
    Target(_T, "_finishIntent", "source bd2b2135d3e1a7f3"),  # its socket becomes idle only after the ack
    Target(_T, "_handlePossibleIncoming", "source dc7cf8671a2d4ee8"),  # an idle connection read as the loop does
    Target(_tcp, "TCPIncomingPersistent", "source 4ac7c74f2f6d7a39"),
    Target(_tcp.IdleSocket, "__init__", "source a158d6c885ebe9a9"),  # socket, rmtaddr
    Target(_tcp, "opsKey", "source 1ad106fc6f32233f"),  # _openSockets' key
    Target(_T, "_XMITStepWaitForAck", "value"),
    Target(_T, "_canSendNow", "source 72fb8b87ff6260f2"),
    Target(_async.asyncTransportBase, "_async_txdone", "source 6ebe5a2578bad834"),  # the transport's own callback
    Target(_tcp, "TransmitOnly", "source 849fc56eee73ef46"),  # what the loop tests its handler against
    Target(_async.asyncTransportBase, "__init__", "source ea452e5ee01aecb0"),  # the transport's queue
    Target(_transport.TransmitIntent, "__init__", "source 40cd9b467a3bd968"),  # _callbackTo: a chain
    Target(_transport, "ResultCallback", "source de56981e0adbd497"),  # _successTo, _thenTo
    Target(_transport.TransmitIntent, "awaitingTXSlot", "source f02112bd6f517e1b"),  # _awaitingTXSlot
))
DEFERRED = "_pegasus_deferred_acks"  # on a transport: {fileno: intent} whose acknowledgement may wait
RECEIVING = "_pegasus_receiving"  # on a transport: the thread running its receiving loop, or None
BEHIND = "_pegasus_freed_connections"  # on a transport: [(opsKey, socket)] an acknowledgement just freed
UNHURRIED = "_pegasus_unhurried"  # on an intent: its sender's own callback need not run at its acknowledgement
LOW_WATER = ACK_FRAME_BYTES + 1  # one byte past an acknowledgement: the least a message behind it adds


def own_callbacks_only(intent: Any) -> bool:
    """Whether no one but the transport's pending count waits for ``intent``'s success (or its sender said so)."""
    if intent.__dict__.get(UNHURRIED):
        return True
    link = intent._callbackTo
    while link is not None:
        success = link._successTo
        if success is not None and getattr(success, "__func__", None) is not _async_txdone:
            return False
        link = link._thenTo
    return True


def may_wait(transport: Any, intent: Any) -> bool:
    """Whether ``intent``'s acknowledgement may wait for a pass that happens anyway: sent whole from the thread
    running the receiving loop, nothing waiting for its success, nothing queued behind it (for its peer, or in
    the transport's queue)."""
    return (transport.__dict__.get(RECEIVING) == threading.get_ident()
            and intent.stage == _T._XMITStepWaitForAck and getattr(intent, "socket", None) is not None
            and own_callbacks_only(intent)
            and not any(waiting.targetAddr == intent.targetAddr for waiting in transport._waitingTransmits)
            and not transport._aTB_queuedPendingTransmits and transport._canSendNow())


def defer(transport: Any, intent: Any) -> bool:
    """Let ``intent``'s acknowledgement wait (``may_wait``): its socket polls readable only past it."""
    if not may_wait(transport, intent):
        return False
    try:
        intent.socket.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVLOWAT, LOW_WATER)
    except OSError:
        return False  # a socket already broken: Thespian's read meets it at once, as before
    transport.__dict__.setdefault(DEFERRED, {})[intent.socket.fileno()] = intent
    return True


def hurry(transport: Any, intent: Any) -> None:
    """``intent``'s socket polls readable at any byte again (before anything reads it)."""
    deferred = transport.__dict__.get(DEFERRED)
    sock = getattr(intent, "socket", None)
    if not deferred or sock is None or deferred.get(sock.fileno()) is not intent:
        return
    del deferred[sock.fileno()]
    try:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVLOWAT, 1)
    except OSError:
        pass  # broken: its next read fails and Thespian retries or ends the transmit


def hurry_all(transport: Any) -> None:
    for intent in list(transport.__dict__.get(DEFERRED, {}).values()):
        hurry(transport, intent)


def read_arrived(transport: Any) -> None:
    """Step every deferred transmit whose acknowledgement is in (Thespian's own step); forget those that went."""
    deferred = transport.__dict__.get(DEFERRED)
    for fileno, intent in list(deferred.items()) if deferred else ():
        sock = getattr(intent, "socket", None)
        if (transport._transmitIntents.get(fileno) is not intent or intent.stage != _T._XMITStepWaitForAck
                or sock is None or sock.fileno() != fileno):
            deferred.pop(fileno, None)  # retried or ended (its socket shut): nothing left to read
        elif has_data(sock):
            transport._processIntents(fileno)


def unhurried(transport: Any, intent: Any) -> bool:
    """Called by a sender whose callback of ``intent`` has nothing left to wait for (``send_then``, a message
    written whole): let its acknowledgement wait if the rest of ``may_wait`` holds (and the patch is in)."""
    if not _installed or not isinstance(transport, _T):
        return False
    intent.__dict__[UNHURRIED] = True
    return defer(transport, intent)


_async_txdone = _async.asyncTransportBase._async_txdone
_installed = False  # in this process (and so in every process forked from it)


def _sent(original: Any) -> Any:
    def sent_whole(self: Any, intent: Any) -> Any:
        result = original(self, intent)
        if result is True:
            defer(self, intent)
        return result
    return sent_whole


def _ack(original: Any) -> Any:
    def read_ack_hurried(self: Any, intent: Any) -> Any:
        hurry(self, intent)
        sock = getattr(intent, "socket", None)
        result = original(self, intent)
        if result is False and sock is not None:  # its last business done: its connection may be idle now
            self.__dict__.setdefault(BEHIND, []).append((_tcp.opsKey(intent.targetAddr), sock))
        return result
    return read_ack_hurried


def read_behind(transport: Any) -> None:
    """Each connection an acknowledgement freed since the last pass, idle now with a message behind it, is read
    as Thespian's loop reads an idle connection that polls readable: here, not one pass later."""
    freed = transport.__dict__.pop(BEHIND, None)
    open_sockets = getattr(transport, "_openSockets", None)
    for key, sock in freed if freed and open_sockets is not None else ():
        idle = open_sockets.get(key)
        if idle is None or idle.socket is not sock or not has_data(sock):
            continue
        del open_sockets[key]
        incoming = transport._handlePossibleIncoming(_tcp.TCPIncomingPersistent(idle.rmtaddr, sock), sock.fileno(),
                                                     has_exclusive_flag=True)
        if incoming:
            transport._incomingSockets[incoming.socket.fileno()] = incoming


def _connect(original: Any) -> Any:
    def connect(self: Any, intent: Any) -> Any:
        result = original(self, intent)
        if result is True and intent.__dict__.get("_awaitingTXSlot"):  # queued behind its peer's transmit
            for other in list(self.__dict__.get(DEFERRED, {}).values()):
                if other.targetAddr == intent.targetAddr:
                    hurry(self, other)
        return result
    return connect


def _timeouts(original: Any) -> Any:
    def timeouts(self: Any) -> Any:
        if self.__dict__.get(DEFERRED):
            read_arrived(self)
        if self.__dict__.get(BEHIND):
            read_behind(self)
        return original(self)
    return timeouts


def _run(original: Any) -> Any:
    def run(self: Any, incomingHandler: Any) -> Any:  # noqa: N803 - Thespian's name
        receiving = not (incomingHandler == _TransmitOnly or isinstance(incomingHandler, _TransmitOnly))
        if not receiving:
            hurry_all(self)  # a transmit-only run waits for its transmits' ends
        previous = self.__dict__.get(RECEIVING)
        self.__dict__[RECEIVING] = threading.get_ident() if receiving else None
        try:
            return original(self, incomingHandler)
        finally:
            self.__dict__[RECEIVING] = previous
    return run


def _queue(original: Any) -> Any:
    def queue_tx(self: Any, intent: Any) -> Any:
        result = original(self, intent)
        if not self._canSendNow():
            hurry_all(self)  # the pending count is full: each acknowledgement lets a queued transmit go
        return result
    return queue_tx


WRAPPERS = ((_SENT, _sent), (_ACK, _ack), (_CONNECT, _connect), (_TIMEOUTS, _timeouts), (_RUN, _run),
            (_QUEUE, _queue))


def install() -> None:
    """Acknowledgements nobody waits for are read at the next pass that happens anyway."""
    for target, make in WRAPPERS:
        wrap(target, PATCH.name, make)
    global _installed
    _installed = True
