"""Every Thespian socket listens on the configured interface, not on all of them.

Replaces ``IPActorAddress.bindArgs`` (INADDR_ANY in Thespian) by the same port on our host, and
sets the advertised address, since a socket bound to 127.0.0.1 cannot be reached at the external
IP Thespian would advertise.  docs/thespian-patches.md#bind-address.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from thespian.system.transport import IPBase as _ipbase
from thespian.system.transport import TCPTransport as _tcp

from actors.wire.thespian_patches.base import Kind, Patch, Target
from pegasus.errors import PegasusError

_BIND_ARGS = Target(_ipbase.IPActorAddress, "bindArgs", "source b6bb15fd3f34d81b")
PATCH = Patch("bind_address", Kind.SECURITY, "bind-address", (
    _BIND_ARGS,
    Target(_ipbase.IPActorAddress, "__init__", "source 9924b8617002bf51"),  # sets bindname and sockname
    Target(_ipbase.ThisSystem, "add_local_addr", "source 755566873259939e"),
    Target(_tcp.TCPTransport, "__init__", "source eabcf02e37125c2a"),  # binds its socket to bindArgs
))

_lock = threading.Lock()
_installed: str | None = None  # the bind host this process is patched for


class BindConflict(PegasusError):
    """A different bind address was already installed in this process."""


def _bind_args(self: Any) -> tuple[Any, ...]:
    """``IPActorAddress.bindArgs``: same port, our host (IPv4 only: TCPTransport makes no other)."""
    (args,) = _BIND_ARGS.original.fget(self)
    if _installed is None or self.af != _ipbase.socket.AF_INET:
        return (args,)
    return ((_installed, args[1]),)


def install(bind: str, advertise: str | None) -> None:
    """Every Thespian socket of this process (and its forks) binds to ``bind``.

    ``advertise``: the address other processes reach ours at (normally the bind address; None
    keeps Thespian's own detection, for the wildcard).  One bind address per process.
    """
    global _installed
    with _lock:
        if _installed is not None and _installed != bind:
            raise BindConflict(f"this process already binds Thespian sockets to {_installed}; "
                               f"cannot also use {bind} (one bind address per process)")
        _BIND_ARGS.replace(property(_bind_args), PATCH.name)
        _installed = bind
        if advertise:
            os.environ["THESPIAN_BASE_IPADDR"] = advertise
            # ThisSystem read the variable at import: teach it the address, so that it still
            # recognises our own addresses as local.
            _ipbase.thisSystem.add_local_addr(advertise)
