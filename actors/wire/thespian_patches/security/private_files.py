"""Every actor and admin process creates its files private (umask 077): logs, the store, Thespian's log.

Wraps Thespian's process starters (``multiprocCommon.startAdmin`` / ``startChild``) to set
``pegasus.files.PRIVATE_UMASK`` in the new process only.  docs/thespian-patches.md#private-files.
"""

from __future__ import annotations

import os
from typing import Any

from thespian.system import multiprocCommon as _multiproc

from actors.wire.thespian_patches.base import Kind, Patch, Target, wrap
from pegasus.files import PRIVATE_UMASK

_STARTERS = (Target(_multiproc, "startChild", "source 607959bb35500ad9"), Target(_multiproc, "startAdmin", "source 7ed08672cf9706e9"))
PATCH = Patch("private_files", Kind.SECURITY, "private-files", _STARTERS)


def _private(start: Any) -> Any:
    def start_private(*args: Any, **kwargs: Any) -> Any:
        os.umask(PRIVATE_UMASK)
        return start(*args, **kwargs)

    return start_private


def install() -> None:
    """Every admin and actor process forked from this one starts with umask 077."""
    for target in _STARTERS:
        wrap(target, PATCH.name, _private)
