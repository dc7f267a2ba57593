"""Thespian describes a message for its debug log only when a line is written.

``TransmitIntent.identify`` and ``ReceiveEnvelope.identify`` return an object that builds the same
string when formatted (``thesplog`` formats only when its level is on).
docs/thespian-patches.md#deferred-descriptions.
"""

from __future__ import annotations

from typing import Any

from thespian.system import transport as _transport
from thespian.system import utilis as _utilis

from actors.wire.thespian_patches.base import Kind, Patch, Target

_INTENT = Target(_transport.TransmitIntent, "identify", "source 373a684bcc2b967c")
_ENVELOPE = Target(_transport.ReceiveEnvelope, "identify", "source aae2a5250024f877")
_ENVELOPE_STR = Target(_transport.ReceiveEnvelope, "__str__", "source 96acb7f5855cac01")
PATCH = Patch("deferred_descriptions", Kind.SPEED, "deferred-descriptions", (
    _INTENT, _ENVELOPE, _ENVELOPE_STR,
    Target(_utilis, "thesplog", "source 36ec828f54673d4e"),  # formats its arguments only when the line is written
))


class _Description:
    """What a deferred ``identify()`` returns: Thespian's description, built when formatted."""

    __slots__ = ("describe", "target")

    def __init__(self, describe: Any, target: Any) -> None:
        self.describe, self.target = describe, target

    def __str__(self) -> str:
        return str(self.describe(self.target))

    __repr__ = __str__


def _deferred(identify: Any) -> Any:
    def identify_when_formatted(self: Any) -> _Description:
        return _Description(identify, self)

    return identify_when_formatted


def _envelope_str(self: Any) -> str:
    """``ReceiveEnvelope.__str__``: the string itself, as before (Thespian's own is ``identify()``)."""
    return str(_ENVELOPE.original(self))


_REPLACEMENTS = ((_INTENT, _deferred(_INTENT.original)), (_ENVELOPE, _deferred(_ENVELOPE.original)),
                 (_ENVELOPE_STR, _envelope_str))


def install() -> None:
    """Thespian's per-message debug descriptions are built only when a line is written."""
    for target, replacement in _REPLACEMENTS:
        target.replace(replacement, PATCH.name)
