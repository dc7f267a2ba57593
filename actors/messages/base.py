"""What every message between Pegasus's own actors shares: a short repr."""

from __future__ import annotations


class _Brief:
    """A short repr: Thespian formats every message it sends (``str(message)``) for a
    debug line it then filters out, and a full dataclass repr prints whole task
    contexts -- 13-20% of a pool's or task actor's CPU, measured (benchmarks/)."""

    def __repr__(self) -> str:
        fields = ("task_id", "job", "run", "token", "stage", "state", "to_state", "ok")
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in fields if hasattr(self, name))
        return f"{type(self).__name__}({shown})"
