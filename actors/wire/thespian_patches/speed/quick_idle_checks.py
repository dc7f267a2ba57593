"""Thespian's per-pass look at every idle socket costs a comparison, not objects.

``IdleSocket.expired`` becomes the same comparison without a timer view, and an address keeps its
hash once computed (left out when pickled).  docs/thespian-patches.md#quick-idle-checks.
"""

from __future__ import annotations

from typing import Any

from thespian.system import timing as _timing
from thespian.system.transport import IPBase as _ipbase
from thespian.system.transport import TCPTransport as _tcp

from actors.wire.thespian_patches.base import Kind, Patch, Target

_EXPIRED = Target(_tcp.IdleSocket, "expired", "source 3ec19963bcdbb8c7")
_HASH = Target(_ipbase.IPActorAddress, "__hash__", "source 795c8ddadc30d882")
_GETSTATE = Target(_ipbase.IPActorAddress, "__getstate__", "source 4ea76b1c81dc3586")
PATCH = Patch("quick_idle_checks", Kind.SPEED, "quick-idle-checks", (
    _EXPIRED, _HASH, _GETSTATE,
    Target(_ipbase.IPActorAddress, "__init__", "source 9924b8617002bf51"),  # sets the hashed fields, once
    Target(_timing, "ExpirationTimer", "source 85cd8571db720c8e"),  # _time_to_quit, compared here as its view does
    Target(_timing, "ExpirationTimerView", "source 649d0f64a3b0cb5d"),
    Target(_timing, "currentTime", "builtin perf_counter"),
))
_ADDRESS_HASH = "_pegasus_hash"  # never pickled: a str hash differs between processes
_own_hash, _own_getstate = _HASH.original, _GETSTATE.original


def _idle_expired(self: Any) -> bool:
    """``IdleSocket.expired`` without building a timer view: the same comparison."""
    due = self.validity._time_to_quit
    return due is not None and _timing.currentTime() >= due


def _address_hash(self: Any) -> int:
    """Thespian's ``IPActorAddress.__hash__`` (of fields set once in ``__init__``), kept once computed."""
    cached = self.__dict__.get(_ADDRESS_HASH)
    if cached is None:
        cached = self.__dict__[_ADDRESS_HASH] = _own_hash(self)
    return cached


def _address_getstate(self: Any) -> dict[str, Any]:
    state = _own_getstate(self)
    if _ADDRESS_HASH in state:
        state = {k: v for k, v in state.items() if k != _ADDRESS_HASH}
    return state


def install() -> None:
    """Quick idle-socket expiry checks and kept address hashes."""
    _EXPIRED.replace(_idle_expired, PATCH.name)
    _HASH.replace(_address_hash, PATCH.name)
    _GETSTATE.replace(_address_getstate, PATCH.name)
