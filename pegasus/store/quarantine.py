"""Quarantine: a stored record no handler can follow is set aside with its error, never raised.

A row written by an old version, a removed plugin or a bug would otherwise raise in the handler
that reads it, at every start, and crash-loop its actor.  Every reader of such rows goes through
``sift``: good ones are yielded, each bad one handed to ``set_aside`` with ``reason(exc)``; a store
fault is never a record's (``reason`` re-raises it).  Pure (docs/durability.md, "Quarantine").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from pegasus.store.errors import StoreUnavailable

Row = TypeVar("Row")
Item = TypeVar("Item")

PREFIX = "quarantined: "
MAX_REASON = 1000  # characters kept of an error (a row's repr may be large)


def reason(exc: BaseException) -> str:
    """What a quarantined record shows: ``quarantined: <ExceptionType>: <message>``, bounded.  A store that
    cannot be used now (``StoreUnavailable``: a full disk, an I/O error) is not the record's fault: re-raised,
    for the store's own handling (the supervisor stops applying changes until it can write), never a quarantine."""
    if isinstance(exc, StoreUnavailable):
        raise exc
    text = str(exc)
    if text.startswith(PREFIX):
        return text[:MAX_REASON]
    return f"{PREFIX}{type(exc).__name__}: {text}"[:MAX_REASON]


def sift(rows: Iterable[Row], read: Callable[[Row], Item], set_aside: Callable[[Row, str], None]) -> Iterator[Item]:
    """``read(row)`` for each row; a row it raises on is ``set_aside(row, reason)`` and skipped."""
    for row in rows:
        try:
            item = read(row)
        except Exception as exc:  # noqa: BLE001 - the record is set aside, not the actor reading it
            set_aside(row, reason(exc))
            continue
        yield item
