"""Authenticated frames: their format, the system key's MAC, and the record of rejected ones.

A frame body is ``2 | MAC (32 bytes) | pickle of (sender, message)`` or an acknowledgement
``1 | token (16 bytes)``.  The MAC is keyed BLAKE2b-256 of the pickle, checked before it is
unpickled; the acknowledgement tokens are constants of the system, known by equality and never
unpickled.  A rejected frame is counted (``<state dir>/rejected-frames``) and logged once per
peer, kind and process.  Thespian learns these frames in ``thespian_patches.security.frame_auth``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def refused_why(poison: Any) -> str | None:
    """Why Thespian refused to send a message, handing it back as ``poison``, when it was larger than a frame (its
    ``FrameTooLarge`` says so last in the details); None for any other poison."""
    details = str(getattr(poison, "details", "") or "").strip()
    if FrameTooLarge.__name__ not in details:
        return None
    return details.splitlines()[-1].split(": ", 1)[-1]


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
        # Keyed BLAKE2b is a MAC by design (RFC 7693; no HMAC construction needed) and cheaper than
        # HMAC-SHA256 on every frame sent and received (docs/thespian-patches.md).
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
here = threading.local()  # .trust: the trust of the transport running or sending in this thread
_lock = threading.Lock()
_logged_peers: set[str] = set()


def installed() -> Trust | None:
    return _default


def install(trust: Trust) -> None:
    """The trust transports made from now on in this process (and its forks) take."""
    global _default
    with _lock:
        _default = trust
        _logged_peers.clear()


def current() -> Trust:
    trust = getattr(here, "trust", None) or _default
    if trust is None:
        raise FrameRejected("no system key installed in this process")
    return trust


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
    trust = getattr(here, "trust", None) or _default
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


