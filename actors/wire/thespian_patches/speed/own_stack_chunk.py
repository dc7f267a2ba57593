"""Every actor and admin process runs its loop in a frame-stack chunk of its own.

CPython 3.11 maps and unmaps a frame chunk for a call made over and over at a chunk boundary;
Thespian's process starters are wrapped to call through a large frame, so the whole loop runs in
a chunk never unmapped.  docs/thespian-patches.md#own-stack-chunk.
"""

from __future__ import annotations

from typing import Any

from thespian.system import multiprocCommon as _multiproc

from actors.wire.thespian_patches.base import Kind, Patch, Target, wrap

_STARTERS = (Target(_multiproc, "startChild", "source 607959bb35500ad9"), Target(_multiproc, "startAdmin", "source 7ed08672cf9706e9"))
PATCH = Patch("own_stack_chunk", Kind.SPEED, "own-stack-chunk", _STARTERS)

# A frame of ~4,200 slots (8 bytes each, ~33 KiB) fits no 16 or 32 KiB chunk: CPython maps a
# 64 KiB chunk for it, and the actor's loop runs in the ~31 KiB left above it (~150 frames).  The
# slots are value-stack depth, which a code object only declares (4,200 named locals held ~1 MiB of
# names and line table in every process; docs/memory.md).
_WIDE_FRAME_SLOTS = 4200


def _on_own_stack_chunk(run: Any, args: Any, kwargs: Any) -> Any:
    return run(*args, **kwargs)


_on_own_stack_chunk.__code__ = _on_own_stack_chunk.__code__.replace(co_stacksize=_WIDE_FRAME_SLOTS)
on_own_stack_chunk = _on_own_stack_chunk


def _on_own_chunk(start: Any) -> Any:
    def start_on_own_stack_chunk(*args: Any, **kwargs: Any) -> Any:
        return on_own_stack_chunk(start, args, kwargs)

    return start_on_own_stack_chunk


def install() -> None:
    """Every admin and actor process forked from this one runs in a stack chunk of its own."""
    for target in _STARTERS:
        wrap(target, PATCH.name, _on_own_chunk)
