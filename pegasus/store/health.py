"""Whether the store takes writes, and what a refused request is told while it does not.  Pure.

A write that fails for want of a store (a full disk, a database deleted or
replaced) makes the supervisor stop every run and refuse new work; it tries a
write every ``PROBE_S`` and, once one works, restores as at a start.
"""

from __future__ import annotations

from typing import Any

from pegasus.store.errors import StoreReplaced, StoreUnavailable

PROBE_S = 1.0  # how often a supervisor whose store failed tries a write again


class StoreHealth:
    def __init__(self) -> None:
        self.error: StoreUnavailable | None = None

    @property
    def writable(self) -> bool:
        return self.error is None

    def failed(self, error: StoreUnavailable) -> bool:
        """Record a failed write; True when the store was taking writes until now (the first failure)."""
        first = self.error is None
        self.error = error
        return first

    def recovered(self) -> None:
        self.error = None

    def refusal(self) -> str:
        """What a request that would write is told meanwhile."""
        if isinstance(self.error, StoreReplaced):
            return str(self.error)
        return (f"{self.error}; the system takes no new work until the store can be written again "
                f"(it tries every {PROBE_S:g} s and then resumes by itself)")

    def status(self, path: str) -> dict[str, Any]:
        return {"path": path, "writable": self.error is None, "error": None if self.error is None else str(self.error)}
