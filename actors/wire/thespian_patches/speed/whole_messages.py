"""Thespian reads and sends a whole message per pass of its loop, not one piece of it.

``_handleReadableIncoming`` and ``_next_XMIT_4`` repeat while the socket has data, and a fully sent
message goes straight on to its acknowledgement.  docs/thespian-patches.md#whole-messages.
"""

from __future__ import annotations

import socket as _socket
from typing import Any

from thespian.system.transport import TCPTransport as _tcp

from actors.wire.thespian_patches.base import Kind, Patch, Target

_T = _tcp.TCPTransport
_READ = Target(_T, "_handleReadableIncoming", "source 7e38436b43ee8783")
_SEND = Target(_T, "_next_XMIT_2", "source 67f5dc3b7dc1ff39")
_ACK = Target(_T, "_next_XMIT_4", "source e41dc7486dd32f0d")
PATCH = Patch("whole_messages", Kind.SPEED, "whole-messages", (
    _READ, _SEND, _ACK,
    Target(_T, "_next_XMIT_3", "source 5f5ff30046f7a92e"),  # called at once after a whole send
))
_read, _send, _read_one_ack = _READ.original, _SEND.original, _ACK.original


def has_data(sock: Any) -> bool:
    """Whether a non-blocking read of ``sock`` would return at once (data, or the end of the stream)."""
    try:
        sock.recv(1, _socket.MSG_PEEK | _socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True  # let Thespian's own read meet the error and handle it as it does
    return True


def _read_incoming(self: Any, inc: Any, has_exclusive_flag: bool = False) -> Any:
    """``TCPTransport._handleReadableIncoming``, repeated until the message is in (or nothing is left to read)."""
    while True:
        result = _read(self, inc, has_exclusive_flag=has_exclusive_flag)
        if result is not inc or inc.failCount or inc.socket is None or not has_data(inc.socket):
            return result


def _send_data(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_2``; once every byte is sent, straight on to waiting for the acknowledgement."""
    result = _send(self, intent)
    if result is True and intent.stage == self._XMITStepShutdownWrite:
        return self._next_XMIT_3(intent)  # all sent: wait for the acknowledgement from now
    return result


def _read_ack(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_4``, repeated until the acknowledgement is in (or nothing is left to read)."""
    while True:
        result = _read_one_ack(self, intent)
        if (result is not True or intent.stage != self._XMITStepWaitForAck
                or getattr(intent, "socket", None) is None or not has_data(intent.socket)):
            return result


STEPS = {_READ.name: _read_incoming, _SEND.name: _send_data, _ACK.name: _read_ack}


def install() -> None:
    """Thespian reads and sends a whole message per pass of its loop."""
    for target in (_READ, _SEND, _ACK):
        target.replace(STEPS[target.name], PATCH.name)
