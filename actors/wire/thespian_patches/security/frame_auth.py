"""Nothing that reaches a Pegasus socket is unpickled before its MAC is checked, nor read past its size limit.

Thespian unpickles whatever arrives; this makes every frame one of ``actors.wire.frames``: the
size checked once the header is in, the MAC before anything is unpickled, a failing frame dropped,
counted and logged.  An authentic message that cannot be unpickled reaches the actor as
``UnreadableMessage``.  Each transport uses the key installed when it was made (a process may be a
client of two systems).  docs/thespian-patches.md#frame-authentication.
"""

from __future__ import annotations

import hmac
import io
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from thespian.system.transport import SendStatus
from thespian.system.transport import TCPTransport as _tcp
from thespian.system.transport import streamBuffer as _stream

from actors.wire import frames
from actors.wire.frames import (CONTROL_BODY, MAX_HEADER_DIGITS, MESSAGE_HEAD, TAG_CONTROL, TAG_MESSAGE, FrameRejected,
                           FrameTooLarge, Trust, UnreadableMessage, current, report)
from actors.wire.thespian_patches.base import Kind, Patch, Target

_T = _tcp.TCPTransport
_BUFFER = Target(_tcp, "ReceiveBuffer", "source 04a1121b383379bc")
_ACK, _ACK_DATA_ERROR = Target(_tcp, "ackMsg", "value"), Target(_tcp, "ackDataErrMsg", "value")
_INIT = Target(_T, "__init__", "source eabcf02e37125c2a")
_RUN = Target(_T, "_runWithExpiry", "source 5a6c512c48e9fd0a")
_SCHEDULE = Target(_T, "scheduleTransmit", "source d967b8d19ac0f963")
_SERIALIZER = Target(_T, "serializer", "source edad38c6ae18f32d")
_ADDED = Target(_T, "_addedDataToIncoming", "source 7e2ca3a3f386e2be")
_ACK_DONE = Target(_T, "_check_XMIT_4_done", "source 61163ba5b1d07029")
_INCOMING_INIT = Target(_tcp.TCPIncoming_Common, "__init__", "source ff186a77972acd02")
PATCH = Patch("frame_auth", Kind.SECURITY, "frame-authentication", (
    _BUFFER, _ACK, _ACK_DATA_ERROR, _INIT, _RUN, _SCHEDULE, _SERIALIZER, _ADDED, _ACK_DONE, _INCOMING_INIT,
    # what the replacements build on: where buffers are made and read, and how a send ends
    Target(_T, "_next_XMIT_3", "source 5f5ff30046f7a92e"),
    Target(_T, "_handleReadableIncoming", "source 7e38436b43ee8783"),
    Target(_T, "_acceptNewIncoming", "source eb6c9359870cc547"),
    Target(_T, "_finishIntent", "source bd2b2135d3e1a7f3"),
))


# -- receiving ---------------------------------------------------------------------------


class AuthenticatedBuffer(_stream.ReceiveBuffer):
    """``ReceiveBuffer`` that checks the size at the header and the MAC before unpickling."""

    peer: Any = None  # the socket (or address) it reads from, for the rejection log
    _verdict: bool | None = None
    _buf: bytes
    _blen: int
    _size: int | None
    _extra: bytes

    def addMore(self, buf: bytes) -> None:  # noqa: N802 - Thespian's name
        if self._size is not None:
            super().addMore(buf)
            return
        mark = buf.find(b">")
        if mark < 0:
            self._buf += buf
            self._blen = 1
            if len(self._buf) > MAX_HEADER_DIGITS:
                self.reject("no_header", "no length header")
            return
        header = self._buf + buf[:mark]
        if not header.isdigit() or len(header) > MAX_HEADER_DIGITS:
            self.reject("malformed_header", "malformed length header")
        size = int(header)
        limit = current().limit
        if size > limit:
            self.reject("oversized", f"announced {size} bytes; the limit is {limit} ([system] max_frame_bytes)")
        if size < CONTROL_BODY:
            self.reject("malformed_header", f"announced {size} bytes, too short to be authenticated")
        self._buf, self._blen, self._size = b"", 0, size
        super().addMore(buf[mark + 1:])

    def authentic(self) -> bool:
        """Whether the whole body is in and authentic (reported once when not): a message's MAC is
        right, or a control frame's token is one of this system's."""
        if self._verdict is None:
            body = self._buf
            if self._size is None or self._blen != self._size:
                self._verdict = False
                report(self.peer, "incomplete", "incomplete or unframed data")
            elif body[0] == TAG_MESSAGE and len(body) >= MESSAGE_HEAD:
                self._verdict = hmac.compare_digest(body[1:MESSAGE_HEAD], current().mac(memoryview(body)[MESSAGE_HEAD:]))
            elif body[0] == TAG_CONTROL and len(body) == CONTROL_BODY:
                self._verdict = body[1:] in current().controls
            else:
                self._verdict = False
            if not self._verdict:
                report(self.peer, "bad_mac", "bad MAC: the sender does not hold this system's key")
        return self._verdict

    def completed(self) -> tuple[Any, bytes] | None:
        if self._size is None or self._blen != self._size:
            return None
        if not self.authentic():
            raise FrameRejected("not authentic")
        body = self._buf
        if body[0] == TAG_CONTROL:
            return current().controls[body[1:]], self._extra
        rest = memoryview(body)[MESSAGE_HEAD:]
        try:
            return pickle.loads(rest), self._extra
        except Exception as exc:  # noqa: BLE001 - authentic, but a class or a value this process cannot rebuild
            return _sender_only(rest, exc, self.peer), self._extra

    def reject(self, kind: str, reason: str) -> None:
        self._verdict = False
        report(self.peer, kind, reason)
        raise FrameRejected(reason)


class _Missing:
    """Stands in, while a message is read again, for a class this process does not have."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


class _Tolerant(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            found = super().find_class(module, name)
        except (ImportError, AttributeError):
            return _Missing
        return _model_or_missing if (module, name) == ("pegasus.task.models", "_unpickled") else found


def _model_or_missing(kind: str, *fields: Any) -> Any:
    """A task model pickled by class name (``pegasus.task.models``), or a stand-in for one this process lacks."""
    from pegasus.task import models

    try:
        return models._unpickled(kind, *fields)
    except KeyError:
        return _Missing()


def _sender_only(rest: memoryview, error: Exception, peer: Any) -> tuple[Any, UnreadableMessage]:
    """(sender, UnreadableMessage) of an authentic frame whose message cannot be rebuilt here, read again
    with missing classes stood in for; a frame that still cannot be read is rejected (its sender's
    send fails: ``ACK+DATAERR``)."""
    try:
        sender, _ = _Tolerant(io.BytesIO(rest)).load()
    except Exception as again:  # noqa: BLE001 - too deep, truncated pickle, ...: nobody to answer
        report(peer, "unreadable", f"an authentic message that cannot be read: {type(again).__name__}")
        raise FrameRejected("unreadable message") from None
    return sender, UnreadableMessage(f"{type(error).__name__}: {error}")


# -- sending -------------------------------------------------------------------------------


def _serialize(self: Any, intent: Any) -> bytes:
    """``TCPTransport.serializer``: one authenticated message frame."""
    trust = _trust_of(self)
    data = pickle.dumps((self.myAddress, intent.message))
    if MESSAGE_HEAD + len(data) > trust.limit:
        intent.refused = (f"a {type(intent.message).__name__} message is {MESSAGE_HEAD + len(data)} bytes; "
                          f"frames are limited to {trust.limit} bytes ([system] max_frame_bytes)")
        raise FrameTooLarge(intent.refused)
    return trust.message_frame(data)


# -- control flow around rejected frames -------------------------------------------------


def _trust_of(transport: Any) -> Trust:
    trust = transport.__dict__.get("_pegasus_trust") or frames.installed()
    if trust is None:
        raise FrameRejected("no system key installed in this process")
    return trust


def _transport_init(self: Any, *args: Any, **kwargs: Any) -> None:
    self._pegasus_trust = frames.installed()  # before Thespian's init: it may already send
    _INIT.original(self, *args, **kwargs)


def _as_current(target: Target) -> Any:
    original = target.original

    def with_own_trust(self: Any, *args: Any, **kwargs: Any) -> Any:
        previous = getattr(frames.here, "trust", None)
        frames.here.trust = _trust_of(self)
        try:
            return original(self, *args, **kwargs)
        finally:
            frames.here.trust = previous

    with_own_trust.__name__ = f"{target.name}_with_own_trust"
    return with_own_trust


def _incoming_init(self: Any, rmtAddr: Any, baseSock: Any, rcvBuf: Any = None) -> None:  # noqa: N803
    _INCOMING_INIT.original(self, rmtAddr, baseSock, rcvBuf)
    self._rData.peer = baseSock


def _added_data(self: Any, inc: Any, skipFinish: bool = False, has_exclusive_flag: bool = False) -> Any:  # noqa: N803
    """``TCPTransport._addedDataToIncoming`` with authenticated acknowledgements.

    Thespian's own, but: an inauthentic frame is answered ``ACK+DATAERR`` and its socket
    closed, nothing unpickled and no traceback logged; the acknowledgements are this
    transport's system's frames.
    """
    if not inc.receivedAllData():
        return inc
    trust = _trust_of(self)
    if not inc._rData.authentic():
        _send_quietly(inc.socket, trust.ack_data_error)
        inc.close()
        return None
    try:
        rdata, extra = inc.data
        if _stream.isControlMessage(rdata):
            raise FrameRejected(f"a control message {rdata!r} where a message was expected")
        envelope = _tcp.ReceiveEnvelope(*rdata)
    except FrameRejected:
        _send_quietly(inc.socket, trust.ack_data_error)
        inc.close()
        return None
    _send_quietly(inc.socket, trust.ack)
    inc.fromAddress = rdata[0]
    self._processReceivedEnvelope(envelope, has_exclusive_flag=has_exclusive_flag)
    if extra and isinstance(inc, _tcp.TCPIncomingPersistent):
        following = _tcp.TCPIncomingPersistent(inc.fromAddress, inc.socket)
        try:
            following.addData(extra)
        except FrameRejected:
            inc.close()
            return None
        return self._addedDataToIncoming(following, has_exclusive_flag=has_exclusive_flag)
    if not skipFinish:
        self._finishIncoming(inc, envelope.sender)
    return None


def _send_quietly(sock: Any, data: bytes) -> None:
    try:
        sock.send(data)
    except OSError:
        pass  # the peer went away: nothing to acknowledge


def _ack_done(self: Any, intent: Any, rcv: bytes) -> Any:
    """A reply to our send that fails authentication fails the send (no retry against a stranger).

    An acknowledgement is a constant frame of 20 bytes, Thespian's first read: one that arrives
    whole is known by equality, with none of the buffer's work (Thespian's own steps for an ACK or
    a NAK follow).
    """
    buffer = getattr(intent, "ackbuf", None)
    if buffer is not None and buffer.is_empty():
        trust = _trust_of(self)
        if rcv == trust.ack or rcv == trust.ack_data_error:
            intent.result = SendStatus.Sent if rcv == trust.ack else SendStatus.BadPacket
            intent.extraRead = ""
            intent.stage = self._XMITStepFinishCleanup
            return self._nextTransmitStep(intent)
    if buffer is not None and buffer.peer is None:
        buffer.peer = intent.targetAddr
    try:
        return _ACK_DONE.original(self, intent, rcv)
    except FrameRejected:
        return self._finishIntent(intent, SendStatus.BadPacket)


# What install puts in place, made once (so that a second install changes nothing).
_REPLACEMENTS = ((_BUFFER, AuthenticatedBuffer), (_INIT, _transport_init), (_RUN, _as_current(_RUN)),
                 (_SCHEDULE, _as_current(_SCHEDULE)), (_SERIALIZER, _serialize), (_INCOMING_INIT, _incoming_init),
                 (_ADDED, _added_data), (_ACK_DONE, _ack_done),
                 # Thespian's own unauthenticated acknowledgements must never go out (nor be expected).
                 (_ACK, b""), (_ACK_DATA_ERROR, b""))


def install(key: bytes, limit: int, state_dir: Path | None) -> None:
    """Authenticate every frame of this process (and of every process it forks) with ``key``.

    Transports made from now on take this key; one made before keeps its own, so a process may
    be a client of two systems.
    """
    frames.install(Trust(key, limit, state_dir))
    for target, value in _REPLACEMENTS:
        target.replace(value, PATCH.name)


@contextmanager
def bare_thespian() -> Iterator[None]:
    """Thespian's own frames for the duration (tests that drive its transport steps on bare frames)."""
    saved = [(target, getattr(target.owner, target.name)) for target, _ in _REPLACEMENTS]
    for target, _ in _REPLACEMENTS:
        setattr(target.owner, target.name, target.original)
    try:
        yield
    finally:
        for target, value in saved:
            setattr(target.owner, target.name, value)
