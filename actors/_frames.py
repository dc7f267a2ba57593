"""Authenticated frames: nothing that reaches a Pegasus socket is unpickled before its MAC is checked.

Thespian 4.0.1's TCP frame is ``b"<size>>" + pickle((sender address, message))``
(``streamBuffer.toSendBuffer``), and ``ReceiveBuffer.completed`` unpickles whatever
arrives -- messages (``TCPIncoming``) and the acknowledgements a sender waits for
(``TCPTransport._next_XMIT_3``/``_check_XMIT_4_done``): anyone who can connect to
any port of the system runs code as its user.  Here every body is::

    a message:          2 | MAC (32 bytes) | Thespian's pickle of (sender address, message)
    an acknowledgement: 1 | token (16 bytes)

MAC = keyed BLAKE2b-256 of the pickle (personalised ``pegasus-message``); the
tokens of ``ACK`` and ``ACK+DATAERR`` are keyed BLAKE2b-128 of the words
(``pegasus-control``): constants of the system, so an acknowledgement, 20 bytes
with its header (Thespian's first read of any frame), is known by equality and
never unpickled.  The
announced size is checked against ``max_frame_bytes`` as soon as the header is
in, before any of the body is read; the MAC before anything is unpickled.  A
frame that fails is dropped unread past what was read, counted
(``<state dir>/rejected-frames``, one byte per frame) and logged once per peer
address, kind and process.  An authentic message its receiver cannot unpickle
(a class it lacks) is read again with the missing classes stood in for, and
reaches the actor as ``UnreadableMessage`` from its sender, who can be told.

Each transport takes the key installed in its process when it is made, and is
the thread's current one while it runs or sends, so one process can be a
client of two systems.  Patched names, all in
``thespian.system.transport.TCPTransport``: ``ReceiveBuffer`` (every buffer
that turns bytes into objects); on ``TCPTransport``: ``__init__`` (takes the
key), ``_runWithExpiry`` and ``scheduleTransmit`` (its key is current),
``serializer`` (every frame sent), ``_addedDataToIncoming`` (authenticated
acknowledgements; an inauthentic frame closed quietly, without Thespian's
traceback), ``_check_XMIT_4_done`` (an inauthentic acknowledgement fails the
send); ``TCPIncoming_Common.__init__`` (a buffer learns its peer); and
``ackMsg``/``ackDataErrMsg`` emptied, never to be sent.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import pickle
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thespian.system.transport import SendStatus
from thespian.system.transport import TCPTransport as _tcp
from thespian.system.transport import streamBuffer as _stream

from pegasus import files
from pegasus.errors import PegasusError

MAC_BYTES = 32
TOKEN_BYTES = 16
TAG_CONTROL, TAG_MESSAGE = 1, 2
MESSAGE_HEAD = 1 + MAC_BYTES  # tag, MAC
CONTROL_BODY = 1 + TOKEN_BYTES  # tag, token: with its header, 20 bytes -- Thespian's first read of a frame
MAX_HEADER_DIGITS = 10
REJECTED_FILE = "rejected-frames"
REJECTED_CAP = 1 << 20  # the counter file stops growing here (a flood must not fill the disk)
_LOGGED_PEERS_CAP = 1024


class FrameRejected(Exception):
    """A frame that is not authentic, too large or malformed: dropped unread."""


class FrameTooLarge(PegasusError):
    """A message to send is larger than every receiver accepts (``[system] max_frame_bytes``)."""


@dataclass(frozen=True)
class UnreadableMessage:
    """An authentic message its receiver could not unpickle; ``error`` says why."""

    error: str


class Trust:
    """One system's key, frame limit and state directory, with its acknowledgement frames."""

    def __init__(self, key: bytes, limit: int, state_dir: Path | None) -> None:
        if len(key) != MAC_BYTES:
            raise ValueError(f"a system key is {MAC_BYTES} bytes, not {len(key)}")
        self.key, self.limit = bytes(key), int(limit)
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.controls = {self._token(text): text for text in (_stream.ackPacket, _stream.ackDataErrPacket)}
        by_text = {text: token for token, text in self.controls.items()}
        self.ack = self._control_frame(by_text[_stream.ackPacket])
        self.ack_data_error = self._control_frame(by_text[_stream.ackDataErrPacket])

    def mac(self, data: bytes | memoryview) -> bytes:
        # Keyed BLAKE2b is a MAC by design (RFC 7693; no HMAC construction needed): 1.0 us for a
        # 700-byte frame here, HMAC-SHA256 1.7 us, on every frame sent and received.
        return hashlib.blake2b(data, key=self.key, digest_size=MAC_BYTES, person=b"pegasus-message").digest()

    def _token(self, text: str) -> bytes:
        return hashlib.blake2b(text.encode(), key=self.key, digest_size=TOKEN_BYTES, person=b"pegasus-control").digest()

    @staticmethod
    def _control_frame(token: bytes) -> bytes:
        return b"%d>" % CONTROL_BODY + bytes((TAG_CONTROL,)) + token

    def message_frame(self, data: bytes) -> bytes:
        """``<size>>`` + tag + MAC + data (a pickle)."""
        return b"".join((b"%d>" % (MESSAGE_HEAD + len(data)), bytes((TAG_MESSAGE,)), self.mac(data), data))


# The trust a transport takes when it is made (this process's system); while a transport runs
# or sends, its own trust is the thread's current one: one process may talk to two systems.
_default: Trust | None = None
_current = threading.local()
_lock = threading.Lock()
_logged_peers: set[str] = set()


def installed() -> Trust | None:
    return _default


def current() -> Trust:
    trust = getattr(_current, "trust", None) or _default
    if trust is None:
        raise FrameRejected("no system key installed in this process")
    return trust


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
            return super().find_class(module, name)
        except (ImportError, AttributeError):
            return _Missing


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


def _peer_text(peer: Any) -> tuple[str, str]:
    """(address, key for 'once per peer') of a socket or an actor address."""
    if isinstance(peer, socket.socket):
        try:
            host, port = peer.getpeername()[:2]
        except OSError:
            return "unknown", "unknown"
        uid = peer_uid(host, port)
        text = f"{host}:{port}" + (f" (uid {uid})" if uid is not None else "")
        return text, f"{host}/{uid}"
    text = str(peer) if peer is not None else "unknown"
    return text, text


def peer_uid(host: str, port: int) -> int | None:
    """The uid owning the other end of a loopback connection (from /proc/net/tcp), if it shows."""
    try:
        want = f"{struct.unpack('<I', socket.inet_aton(host))[0]:08X}:{port:04X}"
        with open("/proc/net/tcp", encoding="ascii") as table:
            for line in table:
                cols = line.split()
                if len(cols) > 7 and cols[1] == want:
                    return int(cols[7])
    except (OSError, ValueError, struct.error):
        pass
    return None


def report(peer: Any, kind: str, reason: str) -> None:
    """Count a rejected frame; log it once per peer (address and uid) and kind of rejection in this process."""
    trust = getattr(_current, "trust", None) or _default
    if trust is None or trust.state_dir is None:
        return
    try:
        counter = files.open_private(trust.state_dir / REJECTED_FILE)
        try:
            if os.fstat(counter).st_size < REJECTED_CAP:
                os.write(counter, b".")
        finally:
            os.close(counter)
    except OSError:
        pass
    address, key = _peer_text(peer)
    key = f"{key}/{kind}"
    with _lock:
        if key in _logged_peers or len(_logged_peers) >= _LOGGED_PEERS_CAP:
            return
        _logged_peers.add(key)
    line = json.dumps({"event": "frame_rejected", "level": "warning", "component": "transport", "pid": os.getpid(),
                       "peer": address, "kind": kind, "reason": reason,
                       "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    try:
        logs = files.private_dir(trust.state_dir / "logs")
        out = files.open_private(logs / "pegasus.jsonl")
        try:
            os.write(out, line.encode() + b"\n")
        finally:
            os.close(out)
    except OSError:
        pass


def rejected_count(state_dir: Path) -> int:
    """Frames rejected since the system started (saturates at REJECTED_CAP)."""
    try:
        return (Path(state_dir) / REJECTED_FILE).stat().st_size
    except FileNotFoundError:
        return 0


def reset_count(state_dir: Path) -> None:
    (Path(state_dir) / REJECTED_FILE).unlink(missing_ok=True)


# -- sending -------------------------------------------------------------------------------


def _serialize(self: Any, intent: Any) -> bytes:
    """``TCPTransport.serializer``: one authenticated message frame."""
    trust = _trust_of(self)
    data = pickle.dumps((self.myAddress, intent.message))
    if MESSAGE_HEAD + len(data) > trust.limit:
        raise FrameTooLarge(f"a {type(intent.message).__name__} message is {MESSAGE_HEAD + len(data)} bytes; "
                            f"frames are limited to {trust.limit} bytes ([system] max_frame_bytes)")
    return trust.message_frame(data)


# -- control flow around rejected frames -------------------------------------------------

_ORIGINAL = {
    "serializer": _tcp.TCPTransport.serializer,
    "added": _tcp.TCPTransport._addedDataToIncoming,
    "init": _tcp.TCPTransport.__init__,
    "run": _tcp.TCPTransport._runWithExpiry,
    "schedule": _tcp.TCPTransport.scheduleTransmit,
    "incoming_init": _tcp.TCPIncoming_Common.__init__,
    "ack_done": _tcp.TCPTransport._check_XMIT_4_done,
}


def _trust_of(transport: Any) -> Trust:
    trust = transport.__dict__.get("_pegasus_trust") or _default
    if trust is None:
        raise FrameRejected("no system key installed in this process")
    return trust


def _transport_init(self: Any, *args: Any, **kwargs: Any) -> None:
    self._pegasus_trust = _default  # before Thespian's init: it may already send
    _ORIGINAL["init"](self, *args, **kwargs)


def _as_current(name: str) -> Any:
    original = _ORIGINAL[name]

    def with_own_trust(self: Any, *args: Any, **kwargs: Any) -> Any:
        previous = getattr(_current, "trust", None)
        _current.trust = _trust_of(self)
        try:
            return original(self, *args, **kwargs)
        finally:
            _current.trust = previous

    with_own_trust.__name__ = f"{name}_with_own_trust"
    return with_own_trust


def _incoming_init(self: Any, rmtAddr: Any, baseSock: Any, rcvBuf: Any = None) -> None:  # noqa: N803
    _ORIGINAL["incoming_init"](self, rmtAddr, baseSock, rcvBuf)
    self._rData.peer = baseSock


def _added_data(self: Any, inc: Any, skipFinish: bool = False, has_exclusive_flag: bool = False) -> Any:  # noqa: N803
    """``TCPTransport._addedDataToIncoming`` with authenticated acknowledgements.

    Thespian's own, but: an inauthentic frame is answered ``ACK+DATAERR`` and its
    socket closed, nothing unpickled and no traceback logged; the
    acknowledgements are this transport's system's frames.
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

    An acknowledgement is a constant frame of 20 bytes, Thespian's first read: one that arrives whole is
    known by equality, with none of the buffer's work (Thespian's own steps for an ACK or a NAK follow).
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
        return _ORIGINAL["ack_done"](self, intent, rcv)
    except FrameRejected:
        return self._finishIntent(intent, SendStatus.BadPacket)


def install(key: bytes, limit: int, state_dir: Path | None) -> None:
    """Authenticate every frame of this process (and of every process it forks) with ``key``.

    Transports made from now on take this key; one made before keeps its own,
    so a process may be a client of two systems.
    """
    global _default
    trust = Trust(key, limit, state_dir)
    with _lock:
        _default = trust
        _logged_peers.clear()
        _tcp.ReceiveBuffer = AuthenticatedBuffer
        _tcp.TCPTransport.__init__ = _transport_init
        _tcp.TCPTransport._runWithExpiry = _as_current("run")
        _tcp.TCPTransport.scheduleTransmit = _as_current("schedule")
        _tcp.TCPTransport.serializer = _serialize
        _tcp.TCPIncoming_Common.__init__ = _incoming_init
        _tcp.TCPTransport._addedDataToIncoming = _added_data
        _tcp.TCPTransport._check_XMIT_4_done = _ack_done
        # Thespian's own unauthenticated acknowledgements must never go out (nor be expected).
        _tcp.ackMsg = _tcp.ackDataErrMsg = b""


_PATCHED_METHODS = {"__init__": "init", "_runWithExpiry": "run", "scheduleTransmit": "schedule",
                    "serializer": "serializer", "_addedDataToIncoming": "added", "_check_XMIT_4_done": "ack_done"}


@contextmanager
def bare_thespian() -> Iterator[None]:
    """Thespian's own frames for the duration (tests that drive its transport steps on bare frames)."""
    saved_module = {name: getattr(_tcp, name) for name in ("ReceiveBuffer", "ackMsg", "ackDataErrMsg")}
    saved = {name: _tcp.TCPTransport.__dict__[name] for name in _PATCHED_METHODS if name in _tcp.TCPTransport.__dict__}
    saved_incoming = _tcp.TCPIncoming_Common.__init__
    _tcp.ReceiveBuffer, _tcp.ackMsg, _tcp.ackDataErrMsg = _stream.ReceiveBuffer, _stream.ackMsg, _stream.ackDataErrMsg
    for name, key in _PATCHED_METHODS.items():
        setattr(_tcp.TCPTransport, name, _ORIGINAL[key])
    _tcp.TCPIncoming_Common.__init__ = _ORIGINAL["incoming_init"]
    try:
        yield
    finally:
        for name, value in saved_module.items():
            setattr(_tcp, name, value)
        for name, value in saved.items():
            setattr(_tcp.TCPTransport, name, value)
        _tcp.TCPIncoming_Common.__init__ = saved_incoming
