"""A leader's pool and its workers on members: ping and answer (pegasus/pool/contact.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerPing:
    """Pool -> idle worker on a member: answer at once (a round trip), and know your pool is alive."""

    sent_at: float  # the pool's monotonic clock, handed back unread


@dataclass(frozen=True)
class WorkerPong:
    """Worker -> pool: the answer to a WorkerPing."""

    sent_at: float
