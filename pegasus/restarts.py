"""When to start a dead component again: at once the first time, then with a doubling pause while it keeps dying.

The guardian restarts the supervisor with it, the background launcher the
whole system (after its admin died).  Pure: the clock is a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Restarts:
    """A restart policy: ``first_s`` after a death (0: at once), doubled per death up to ``max_s``;
    a component that stayed up ``stable_s`` starts over from ``first_s``."""

    first_s: float = 0.0
    then_s: float = 1.0
    max_s: float = 30.0
    stable_s: float = 60.0
    count: int = 0
    streak: int = 0
    _up_since: float | None = None

    def started(self, now: float) -> None:
        self._up_since = now

    def died(self, now: float) -> float:
        """A death at ``now``: how long to wait before the next start."""
        self.count += 1
        if self._up_since is not None and now - self._up_since >= self.stable_s:
            self.streak = 0
        self._up_since = None
        self.streak += 1
        if self.streak == 1:
            return self.first_s
        return min(self.max_s, self.then_s * 2 ** (self.streak - 2))
