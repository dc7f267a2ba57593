"""Every actor and admin process starts private: umask 077, and an admin with none of its starter's listeners.

Wraps Thespian's process starters (``multiprocCommon.startAdmin`` / ``startChild``) to set
``pegasus.files.PRIVATE_UMASK`` in the new process only.  A new admin also closes every listening
socket it inherited from the process that started it (that process's client, any server of its own):
else every process of the system held them for its whole life, and what connected there queued where
nothing reads.  docs/thespian-patches.md#private-files.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from thespian.system import multiprocCommon as _multiproc

from actors.wire.thespian_patches.base import Kind, Patch, Target, wrap
from pegasus.files import PRIVATE_UMASK

_CHILD = Target(_multiproc, "startChild", "source 607959bb35500ad9")
_ADMIN = Target(_multiproc, "startAdmin", "source 7ed08672cf9706e9")
_STARTERS = (_CHILD, _ADMIN)
PATCH = Patch("private_files", Kind.SECURITY, "private-files", _STARTERS)


def close_inherited_listeners() -> list[int]:
    """Close every listening socket of this process (a new admin's: all are its starter's); their fds."""
    closed = []
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=int(name))
        except (OSError, ValueError):
            continue  # not a socket (or the listing's own descriptor, closed by now)
        try:
            listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        except OSError:
            listening = 0
        if listening:
            sock.close()
            closed.append(int(name))
        else:
            sock.detach()  # a connection of the starter's: left as it is
    return closed


def _private(start: Any) -> Any:
    def start_private(*args: Any, **kwargs: Any) -> Any:
        os.umask(PRIVATE_UMASK)
        return start(*args, **kwargs)

    return start_private


def _private_admin(start: Any) -> Any:
    def start_admin_private(*args: Any, **kwargs: Any) -> Any:
        os.umask(PRIVATE_UMASK)
        close_inherited_listeners()  # before Thespian makes the admin's own
        return start(*args, **kwargs)

    return start_admin_private


def install() -> None:
    """Every admin and actor process forked from this one starts with umask 077; an admin without its
    starter's listening sockets (every actor is forked from the admin, so none has them)."""
    wrap(_CHILD, PATCH.name, _private)
    wrap(_ADMIN, PATCH.name, _private_admin)
