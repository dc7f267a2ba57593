"""How well a leader's pool hears each convention member: round-trip time and last contact (pure).

Round trips are measured on the pool's own monotonic clock (the ping carries its send time back, so
no two hosts' clocks are compared); any message from a member's worker is a contact.  The pings
also tell a member's idle workers they still have a pool: one that hears nothing for
``orphan_after_s`` exits (docs/architecture.md, "The pool").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pegasus.config import ConventionSettings

EWMA_WEIGHT = 0.2  # each new round trip's share of the running average
ORPHAN_PERIODS = 3  # an idle member worker unpinged for this many detection times exits


def ping_period_s(convention: ConventionSettings) -> float:
    return convention.reregistration_period_s


def orphan_after_s(convention: ConventionSettings) -> float:
    """How long an idle worker on a member waits unpinged before it exits: a few times the time the
    leader takes to declare a member dead, so a worker never leaves a pool that still counts on it."""
    detection = convention.reregistration_period_s * (convention.registration_miss_max + 1)
    return ORPHAN_PERIODS * detection


@dataclass
class Contact:
    """One member's round trips (seconds, on the pool's clock) and last contact (wall clock)."""

    rtt_s: float | None = None  # the last one
    rtt_avg_s: float | None = None
    rtt_min_s: float | None = None
    rtt_max_s: float | None = None
    pings: int = 0
    answers: int = 0
    last: float | None = None

    def sent(self) -> None:
        self.pings += 1

    def heard(self, wall: float) -> None:
        self.last = wall if self.last is None else max(self.last, wall)

    def answered(self, rtt_s: float, wall: float) -> None:
        rtt_s = max(0.0, rtt_s)
        self.answers += 1
        self.rtt_s = rtt_s
        self.rtt_avg_s = rtt_s if self.rtt_avg_s is None else (1 - EWMA_WEIGHT) * self.rtt_avg_s + EWMA_WEIGHT * rtt_s
        self.rtt_min_s = rtt_s if self.rtt_min_s is None else min(self.rtt_min_s, rtt_s)
        self.rtt_max_s = rtt_s if self.rtt_max_s is None else max(self.rtt_max_s, rtt_s)
        self.heard(wall)

    def view(self) -> dict[str, Any]:
        def ms(value: float | None) -> float | None:
            return None if value is None else round(value * 1000, 3)

        return {"rtt_ms": ms(self.rtt_s), "rtt_avg_ms": ms(self.rtt_avg_s), "rtt_min_ms": ms(self.rtt_min_s),
                "rtt_max_ms": ms(self.rtt_max_s), "pings": self.pings, "answers": self.answers,
                "last_contact": self.last}


def merged(views: list[dict[str, Any]]) -> dict[str, Any]:
    """One member's contact as several pools saw it: the freshest last contact, the lowest minimum, the
    highest maximum, the average and last round trip of the pool heard from last."""
    if not views:
        return Contact().view()
    latest = max(views, key=lambda v: v.get("last_contact") or 0.0)
    mins = [v["rtt_min_ms"] for v in views if v.get("rtt_min_ms") is not None]
    maxes = [v["rtt_max_ms"] for v in views if v.get("rtt_max_ms") is not None]
    return {**latest, "rtt_min_ms": min(mins) if mins else None, "rtt_max_ms": max(maxes) if maxes else None,
            "pings": sum(v.get("pings", 0) for v in views), "answers": sum(v.get("answers", 0) for v in views)}



@dataclass
class PoolWatch:
    """A worker's view of its pool: pinged (so on a member) and then unheard of for ``orphan_after_s``
    while idle means its pool is gone.  A worker never pinged (a local one) is never orphaned: it dies
    with its pool's process."""

    orphan_after_s: float
    heard: float | None = None  # monotonic clock of the last message from the pool
    armed: bool = False  # the worker's check timer is pending

    def touch(self, now: float) -> None:
        """Something came from the pool, or a stage just ended (a long one must not count as silence)."""
        if self.heard is not None:
            self.heard = max(self.heard, now)

    def pinged(self, now: float) -> bool:
        """A ping came; True when the worker should arm its first check."""
        self.heard = now if self.heard is None else max(self.heard, now)
        first, self.armed = not self.armed, True
        return first

    def orphaned(self, now: float, idle: bool) -> bool:
        return idle and self.heard is not None and now - self.heard > self.orphan_after_s

    @property
    def check_period_s(self) -> float:
        return self.orphan_after_s / ORPHAN_PERIODS
