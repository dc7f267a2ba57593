"""Process-wide Thespian settings that must be in place before a system starts.

1. The bind address.  Thespian 4.0.1 builds every listening socket from an
   address object: ``IPActorAddress.__init__`` (thespian/system/transport/
   IPBase.py, ~line 179) sets ``self.bindname = ('', port) if external else sa``
   -- '' is INADDR_ANY -- and ``TCPTransport.__init__`` (TCPTransport.py, line
   300) does ``self.socket.bind(*templateAddr.addressDetails.bindArgs)`` for
   the admin, every actor, the logger and every client endpoint.  The only
   other consumer of ``bindArgs`` is ``TCPTransport.probeAdmin`` (line 481:
   "is something bound to the admin port?"); UDPTransport (lines 87, 176) uses
   it the same way.  ``bindArgs`` is consumed by ``socket.bind`` and nothing
   else, so replacing that one property with one that returns the configured
   host (port unchanged) moves every listening socket to that interface and
   changes nothing about addressing, routing or comparison of addresses.
   Messages are unauthenticated pickles: this is the security boundary.

   The admin is started by ``multiprocessing`` with the *fork* method (and
   forks again to daemonize); every actor is forked from the admin or from
   another actor.  Module state is inherited through fork, so installing the
   patch in the process that creates the ActorSystem covers the admin and every
   actor it will ever create.  A 'spawn' start method would re-import Thespian
   unpatched; system.py refuses it.

2. The advertised address.  Thespian advertises the address it finds by
   "connecting" a UDP socket towards 8.8.8.8 (the host's external IP), unless
   ``THESPIAN_BASE_IPADDR`` is set.  A socket bound to 127.0.0.1 cannot be
   reached at the external IP, so we set ``THESPIAN_BASE_IPADDR`` to the bind
   address (read at each address construction, inherited through fork).

3. Thespian's internal log.  ``thespian.system.utilis`` reads
   ``THESPLOG_THRESHOLD`` / ``THESPLOG_FILE_MAXSIZE`` at import and caches
   ``THESPLOG_FILE`` on first use (default ``$TMPDIR/thespian.log``), so setting
   the environment alone is not enough once Thespian has been imported: we also
   set the module's settings directly.

4. The selector.  ``TCPTransport._runWithExpiry`` (TCPTransport.py, ~line
   1150: "creates selector on each loop, perhaps this could be optimized")
   builds a ``selectors.DefaultSelector()`` -- epoll on Linux -- every time
   round its loop, registers every open socket, selects once and closes it:
   one ``epoll_create``, one ``epoll_ctl`` per socket and a ``close`` per
   message received or sent, in every actor.  One ``poll`` call does the same
   job.  ``use_poll_selector`` gives Thespian's TCP transport module (and only
   it) a ``selectors`` whose DefaultSelector is ``PollSet``: what
   ``selectors.PollSelector`` does for that loop, on a bare ``select.poll``
   without the per-socket ``SelectorKey`` bookkeeping (a stage worker of a busy
   system has ~55 sockets open; PollSelector took ~50 us a loop to register
   them).  Inherited through fork like the rest.

5. Debug strings.  Thespian describes every message it sends and receives
   for its debug log whether or not that log is on: ``thesplog('Attempting
   intent %s', intent.identify(), level=logging.DEBUG)`` (systemCommon.py, line
   164), ``'actualTransmit of %s'`` (asyncTransportBase.py, line 331) and
   ``'ACTOR got %s'`` (actorManager.py, line 133) build the string before
   ``thesplog`` looks at the level: three descriptions per message, ~5% of a
   stage worker's CPU in a py-spy profile.  ``defer_descriptions`` makes
   ``TransmitIntent.identify`` and ``ReceiveEnvelope.identify`` return an object
   that builds the same string when it is formatted (every call site passes it
   to ``%s`` for a log line: thesplog formats at once when its level is on, or
   never); ``ReceiveEnvelope.__str__`` keeps returning the string itself.

6. The frame stack.  CPython 3.11 keeps Python frames in 16 KiB chunks that it
   maps when a call does not fit in the current one and unmaps when the frame
   that opened the chunk returns.  A call made over and over exactly at a chunk
   boundary therefore costs an ``mmap`` and a ``munmap`` (and fresh zeroed
   pages) every time.  Where the boundaries fall in an actor's loop depends on
   how deep the process that forked it was, which depends on the process that
   started the system: measured, the same I/O-bound benchmark run from
   ``python -m benchmarks`` gave the stage workers ~385 ``mmap``/``munmap`` pairs
   per stage (Thespian's idle-socket checks, ``ExpirationTimerView.__init__``,
   sat on a boundary) and twice the CPU per task of the same run started from a
   script: 11.8 against 13.4 tasks/s.  ``own_stack_chunk`` starts every actor and
   admin process (Thespian's ``startChild`` / ``startAdmin``) through a function
   whose frame needs ~33 KiB: CPython gives it a 64 KiB chunk of its own, in
   which the actor's whole loop then runs, and that chunk is never unmapped
   because the function never returns while the process lives.

7. Whole messages.  Thespian's TCP loop (``_runWithExpiry``) does one step of a
   socket's work per readiness event, then goes round again: a new selector
   over every open socket, idle-socket expiry checks, timeouts.  An incoming
   message is read as 20 bytes (enough for the ``<size>>`` header) and, next
   loop, the rest; its 21-byte acknowledgement as 20 bytes and then 1; and a
   send whose bytes have all gone still waits one more loop (selected for
   writing) before it starts waiting for that acknowledgement
   (``_next_XMIT_2`` -> ``_XMITStepShutdownWrite`` -> ``_next_XMIT_3``, which
   only sets up the ack buffer).  Three to four loops per message where one
   does, each costing Python in both processes: a stage worker took ~1.1 ms
   from the end of one stage's handler to the start of the next one already
   in its mailbox (``strace``: five ``poll`` calls).  ``whole_messages`` wraps
   those three steps: a read step is repeated while the socket has data and
   the message (or acknowledgement) is not complete -- each read still asks
   for exactly what Thespian asks for, so nothing of the next message is
   taken early -- and a send that has gone out whole moves on to waiting for
   its acknowledgement at once.  Nothing waits: whether a socket has data is
   asked with a non-blocking ``MSG_PEEK``; with none, the step returns as
   Thespian's does and the loop selects as before.

8. Idle sockets.  On every pass Thespian's loop also walks every idle open
   socket (one per peer it has talked to in the last 20 minutes: ~30-55 for a
   stage worker of a busy system, one per task actor), and for each builds a
   timer view to ask ``IdleSocket.expired`` and hashes the peer's address to
   look it up in ``_openSockets`` -- ``IPActorAddress.__hash__`` builds two
   tuples through two properties every time.  ``cProfile`` of a stage worker
   at scale: ~76 timer views and ~68 address hashes per stage.
   ``quick_idle_checks`` makes ``expired`` the same comparison without the
   view, and keeps an address's hash once computed (of the fields its
   ``__init__`` sets and nothing changes afterwards; the same value Thespian
   computes).  The kept hash is left out when an address is pickled: a string's
   hash differs between processes.

9. Stale idle connections.  A send reuses the idle connection to its target
   when there is one.  When that connection turns out dead (the peer process
   died, or closed it), Thespian schedules the retry ``TRANSMIT_RETRY_PERIOD``
   later: 35 s, before it connects afresh and learns the peer is gone
   (``DeadTarget``).  A client asking a supervisor that was just replaced waited
   35 s.  ``fresh_retry_after_stale_connection`` retries within 1 ms, on a
   new connection, a send that failed on a reused one; later failures keep
   Thespian's backoff.  (Not 0 ms: the loop drops zero delays when it picks
   its select timeout -- ``filter(None, delays)`` -- and would sleep on.)

All are per process and one process can only serve one bind address, so
``install`` refuses a second, different one.
"""

from __future__ import annotations

import logging
import math
import os
import select
import selectors
import socket as _socket
import threading
import types
from datetime import timedelta
from pathlib import Path
from typing import Any

from thespian.system import multiprocCommon as _multiproc
from thespian.system import transport as _transport
from thespian.system import timing as _timing
from thespian.system import utilis as _utilis
from thespian.system.transport import IPBase as _ipbase
from thespian.system.transport import TCPTransport as _tcp

from pegasus.files import PRIVATE_UMASK, open_private

_lock = threading.Lock()
_installed: str | None = None  # the bind host this process is patched for
_original_bind_args = _ipbase.IPActorAddress.bindArgs  # the property object


class BindConflict(Exception):
    """A different bind address was already installed in this process."""


def _bind_args(self: _ipbase.IPActorAddress) -> tuple:
    """Replacement for ``IPActorAddress.bindArgs``: same port, our host."""
    (args,) = _original_bind_args.fget(self)
    if _installed is None or self.af != _ipbase.socket.AF_INET:
        # Only IPv4 is patched: TCPTransport builds TCPv4 addresses only.
        return (args,)
    return ((_installed, args[1]),)


def installed_bind() -> str | None:
    """The bind host installed in this process, or None."""
    return _installed


def install(bind: str, advertise: str | None) -> None:
    """Make every Thespian socket of this process (and its forks) bind to bind.

    advertise is the address other processes use to reach ours (normally the
    bind address itself; None leaves Thespian's own detection, needed when
    binding the wildcard address).  Idempotent for the same bind address.
    """
    global _installed
    with _lock:
        if _installed is not None and _installed != bind:
            raise BindConflict(
                f"this process already binds Thespian sockets to {_installed}; "
                f"cannot also use {bind} (one bind address per process)"
            )
        _ipbase.IPActorAddress.bindArgs = property(_bind_args)
        _installed = bind
        if advertise:
            os.environ["THESPIAN_BASE_IPADDR"] = advertise
            # ThisSystem read the variable at import; teach it the address so
            # it still recognises our own addresses as local.
            _ipbase.thisSystem.add_local_addr(advertise)


class _Ready:
    """The part of a ``selectors.SelectorKey`` Thespian's loop reads: ``fd``."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd


class PollSet:
    """``selectors.PollSelector`` as far as Thespian's loop uses one, without its per-fd bookkeeping.

    Thespian builds a selector, registers every socket, selects once and closes
    it, on every loop: ``PollSelector.register`` (a ``SelectorKey`` and two dicts
    per fd) cost ~0.9 us per socket, ~50 us a loop for a stage worker with ~55
    open sockets; this is ~0.15 us.  ``select`` reports what PollSelector reports
    (``(key, events)`` with ``key.fd``; a hang-up or error counts as readable
    and writable, masked by what was registered), and so does its timeout.
    """

    __slots__ = ("_poll", "_events")

    def __init__(self) -> None:
        self._poll = select.poll()
        self._events: dict[int, int] = {}

    def register(self, fileobj: Any, events: int) -> None:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if fd in self._events:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")  # as PollSelector
        self._events[fd] = events
        self._poll.register(fd, (select.POLLIN if events & selectors.EVENT_READ else 0)
                            | (select.POLLOUT if events & selectors.EVENT_WRITE else 0))

    def select(self, timeout: float | None = None) -> list[tuple[_Ready, int]]:
        wait = None if timeout is None else 0 if timeout <= 0 else math.ceil(timeout * 1e3)
        ready = []
        for fd, event in self._poll.poll(wait):
            events = (selectors.EVENT_WRITE if event & ~select.POLLIN else 0) \
                | (selectors.EVENT_READ if event & ~select.POLLOUT else 0)
            ready.append((_Ready(fd), events & self._events.get(fd, 0)))
        return ready

    def close(self) -> None:
        self._events.clear()


def use_poll_selector() -> None:
    """Make Thespian's TCP transport select with one ``poll`` call per loop (point 4 above)."""
    if getattr(_tcp.selectors, "DefaultSelector", None) is not PollSet:
        _tcp.selectors = types.SimpleNamespace(DefaultSelector=PollSet,
                                               EVENT_READ=selectors.EVENT_READ, EVENT_WRITE=selectors.EVENT_WRITE)


class _Description:
    """What a deferred ``identify()`` returns: Thespian's description, built when formatted."""

    __slots__ = ("describe", "target")

    def __init__(self, describe: Any, target: Any) -> None:
        self.describe, self.target = describe, target

    def __str__(self) -> str:
        return str(self.describe(self.target))

    __repr__ = __str__


_IDENTIFY = {cls: cls.identify for cls in (_transport.TransmitIntent, _transport.ReceiveEnvelope)}


def defer_descriptions() -> None:
    """Thespian describes a message for its debug log only when a line is written (point 5 above)."""
    for cls, identify in _IDENTIFY.items():
        cls.identify = lambda self, identify=identify: _Description(identify, self)
    _transport.ReceiveEnvelope.__str__ = _IDENTIFY[_transport.ReceiveEnvelope]


# A frame of ~4,200 slots (8 bytes each, ~33 KiB) fits no 16 or 32 KiB chunk: CPython maps a
# 64 KiB chunk for it, and the actor's loop runs in the ~31 KiB left above it (~150 frames).
_WIDE_FRAME_SLOTS = 4200
_wide_source = "def _on_own_stack_chunk(run, args, kwargs):\n" \
    "    if run is None:\n        " + " = ".join(f"_{i}" for i in range(_WIDE_FRAME_SLOTS)) + " = None\n" \
    "    return run(*args, **kwargs)\n"
_namespace: dict[str, Any] = {}
exec(compile(_wide_source, "<actors._bind>", "exec"), _namespace)  # noqa: S102 - generated locals only
on_own_stack_chunk = _namespace["_on_own_stack_chunk"]
_STARTERS = {name: getattr(_multiproc, name) for name in ("startChild", "startAdmin")}


def own_stack_chunk() -> None:
    """Every actor and admin process this one forks runs its loop in a frame-stack chunk of its own (point 6),
    and creates its files private (umask 077: logs, the store, Thespian's log)."""
    for name, start in _STARTERS.items():
        def starter(*args: Any, _start: Any = start, **kwargs: Any) -> Any:
            os.umask(PRIVATE_UMASK)
            return on_own_stack_chunk(_start, args, kwargs)
        starter.__name__ = f"{name}_on_own_stack_chunk"
        setattr(_multiproc, name, starter)


# -- point 7 --------------------------------------------------------------------------
def _has_data(sock: Any) -> bool:
    """Whether a non-blocking read of ``sock`` would return at once (data, or the end of the stream)."""
    try:
        sock.recv(1, _socket.MSG_PEEK | _socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True  # let Thespian's own read meet the error and handle it as it does
    return True


_ORIGINAL_STEPS = {name: getattr(_tcp.TCPTransport, name)
                   for name in ("_handleReadableIncoming", "_next_XMIT_1", "_next_XMIT_2", "_next_XMIT_4",
                                "_next_XMIT_6")}


def _read_incoming(self: Any, inc: Any, has_exclusive_flag: bool = False) -> Any:
    """``TCPTransport._handleReadableIncoming``, repeated until the message is in (or nothing is left to read)."""
    read = _ORIGINAL_STEPS["_handleReadableIncoming"]
    while True:
        result = read(self, inc, has_exclusive_flag=has_exclusive_flag)
        if result is not inc or inc.failCount or inc.socket is None or not _has_data(inc.socket):
            return result


def _send_data(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_2``; once every byte is sent, straight on to waiting for the acknowledgement."""
    result = _ORIGINAL_STEPS["_next_XMIT_2"](self, intent)
    if result is True and intent.stage == self._XMITStepShutdownWrite:
        return self._next_XMIT_3(intent)  # all sent: wait for the acknowledgement from now
    return result


def _read_ack(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_4``, repeated until the acknowledgement is in (or nothing is left to read)."""
    read = _ORIGINAL_STEPS["_next_XMIT_4"]
    while True:
        result = read(self, intent)
        if (result is not True or intent.stage != self._XMITStepWaitForAck
                or getattr(intent, "socket", None) is None or not _has_data(intent.socket)):
            return result


# -- point 8 --------------------------------------------------------------------------
def _idle_expired(self: Any) -> bool:
    """``IdleSocket.expired`` without building a timer view: the same comparison."""
    due = self.validity._time_to_quit
    return due is not None and _timing.currentTime() >= due


_ADDRESS_HASH = "_pegasus_hash"  # never pickled: a str hash differs between processes
_ADDRESS_OWN_HASH = _ipbase.IPActorAddress.__hash__
_ADDRESS_GETSTATE = _ipbase.IPActorAddress.__getstate__


def _address_hash(self: Any) -> int:
    """Thespian's ``IPActorAddress.__hash__`` (of fields set once in ``__init__``), kept once computed."""
    cached = self.__dict__.get(_ADDRESS_HASH)
    if cached is None:
        cached = self.__dict__[_ADDRESS_HASH] = _ADDRESS_OWN_HASH(self)
    return cached


def _address_getstate(self: Any) -> dict[str, Any]:
    state = _ADDRESS_GETSTATE(self)
    if _ADDRESS_HASH in state:
        state = {k: v for k, v in state.items() if k != _ADDRESS_HASH}
    return state


def whole_messages() -> None:
    """Thespian reads and sends a whole message per loop, not one piece of it (point 7 above)."""
    _tcp.TCPTransport._handleReadableIncoming = _read_incoming
    _tcp.TCPTransport._next_XMIT_2 = _send_data
    _tcp.TCPTransport._next_XMIT_4 = _read_ack


def quick_idle_checks() -> None:
    """Thespian's per-pass look at every idle socket costs a comparison, not objects (point 8 above)."""
    _tcp.IdleSocket.expired = _idle_expired
    _ipbase.IPActorAddress.__hash__ = _address_hash
    _ipbase.IPActorAddress.__getstate__ = _address_getstate


# -- point 9 --------------------------------------------------------------------------
_REUSED = "_pegasus_reused_connection"
_FRESH_RETRY = timedelta(milliseconds=1)


def _connect_step(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_1``, noting whether the send takes an idle connection."""
    if hasattr(self, "_openSockets") and _tcp.opsKey(intent.targetAddr) in self._openSockets:
        intent.__dict__[_REUSED] = True
    return _ORIGINAL_STEPS["_next_XMIT_1"](self, intent)


def _retry_step(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_6``; a send that failed on a reused connection is retried at once."""
    reused = intent.__dict__.pop(_REUSED, False)
    result = _ORIGINAL_STEPS["_next_XMIT_6"](self, intent)
    if reused and result is True and hasattr(intent, "_retryTime"):
        # 1 ms, not 0: the loop computes its select timeout with filter(None, delays), which drops a
        # zero delay, and would then sleep until some other event (up to the whole run time).
        intent._retryTime = _timing.ExpirationTimer(_FRESH_RETRY)
    return result


def fresh_retry_after_stale_connection() -> None:
    """A send that failed on a reused idle connection is retried at once on a new one (point 9 above)."""
    _tcp.TCPTransport._next_XMIT_1 = _connect_step
    _tcp.TCPTransport._next_XMIT_6 = _retry_step


def configure_thesplog(logs_dir: Path, threshold: str = "WARNING", max_size: int = 1024 * 1024) -> Path:
    """Send Thespian's internal log to logs_dir/thespian.log (this process and forks).

    Sets the environment (for processes exec'd later) and the already-imported
    module's cached settings (for this process and everything it forks).
    """
    logs_dir.mkdir(parents=True, exist_ok=True)
    path = logs_dir / "thespian.log"
    os.close(open_private(path))  # whichever process writes first, the file is private
    os.environ["THESPLOG_FILE"] = str(path)
    os.environ["THESPLOG_FILE_MAXSIZE"] = str(max_size)
    os.environ["THESPLOG_THRESHOLD"] = threshold
    level = _utilis.str_to_loglevel(threshold)
    _utilis.thesplog_control(logging.WARNING if level is None else level, False, max_size)
    _utilis._thesplog_file = str(path)
    _utilis._thesplog_old_file = str(path) + ".old"
    return path
