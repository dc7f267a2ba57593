"""An actor's TCP address travels as its four values, not as two pickled objects.

Thespian pickles every frame's sender (and each address a message carries: a Work's requester) as an
``ActorAddress`` holding a ``TCPv4ActorAddress``, class paths, attribute names and two enums, 257 bytes
that unpickle with two enum calls.  A ``copyreg`` reducer writes the plain IPv4 TCP address as
``(host, port, bind host, bind port)`` and rebuilds the same two objects without their ``__init__``
(which may resolve names); any other address pickles as before.  docs/thespian-patches.md#compact-addresses.
"""

from __future__ import annotations

import copyreg
import pickle
import socket
from typing import Any

from thespian import actors as _actors
from thespian.system import addressManager as _manager
from thespian.system.transport import IPBase as _ip

from actors.wire.thespian_patches.base import Kind, Patch, Target
from actors.wire.thespian_patches.speed.quick_idle_checks import _ADDRESS_HASH

_Address, _Tcp4 = _actors.ActorAddress, _ip.TCPv4ActorAddress
PATCH = Patch("compact_addresses", Kind.SPEED, "compact-addresses", (
    Target(_actors, "ActorAddress", "source dee52a7cb0347740"),  # its one attribute, _aaddr
    Target(_ip, "TCPv4ActorAddress", "source c9261200fd26abf4"),  # its five attributes (IPActorAddress.__init__)
    Target(_ip, "IPActorAddress", "source 0aa0a7b922386c1a"),
    Target(_manager, "_pickle_clean", "source 6522aa06957ff971"),  # what importAddr's __getstate__ leaves: _aaddr
))
_TCP = int(socket.IPPROTO_TCP)  # a plain 6, as Thespian's own pickle brings it (getaddrinfo's proto)
_FIELDS = frozenset({"af", "socktype", "proto", "sockname", "bindname"})
# What Thespian's own pickle leaves out: __str__'s text, quick_idle_checks' hash, and on the ActorAddress the
# address manager's marks of an address it imported (importAddr: its __getstate__ is _pickle_clean).
_CACHED = _FIELDS | {"_str_form", _ADDRESS_HASH}
_MARKS = frozenset({"_aaddr", "eqOverride", "__getstate__"})


def tcp_address(host: str, port: int, bind_host: str, bind_port: int) -> Any:
    """The ``ActorAddress`` of an IPv4 TCP actor, as unpickling Thespian's own pickle of it builds it."""
    if not (type(host) is str and type(bind_host) is str and type(port) is int and type(bind_port) is int):
        raise pickle.UnpicklingError("not an actor address")
    details = _Tcp4.__new__(_Tcp4)
    details.__dict__.update(af=socket.AF_INET, socktype=socket.SOCK_STREAM, proto=_TCP,
                            sockname=(host, port), bindname=(bind_host, bind_port))
    address = _Address.__new__(_Address)
    address.__dict__["_aaddr"] = details
    return address


def _reduce(address: Any) -> Any:
    """``copyreg`` reducer of ``ActorAddress``: the four values of a plain IPv4 TCP address, else pickle's own."""
    state = address.__dict__
    details = state.get("_aaddr")
    getstate = state.get("__getstate__")
    if type(address) is _Address and type(details) is _Tcp4 and state.keys() <= _MARKS \
            and (getstate is None or getattr(getstate, "__func__", None) is _manager._pickle_clean):
        fields = details.__dict__
        if (_FIELDS <= fields.keys() <= _CACHED and fields["af"] == socket.AF_INET
                and fields["socktype"] == socket.SOCK_STREAM and fields["proto"] == socket.IPPROTO_TCP
                and len(fields["sockname"]) == 2 and len(fields["bindname"]) == 2):
            return tcp_address, (*fields["sockname"], *fields["bindname"])
    return address.__reduce_ex__(pickle.DEFAULT_PROTOCOL)


def install() -> None:
    """Plain IPv4 TCP actor addresses pickle as their four values in this process."""
    copyreg.pickle(_Address, _reduce)
