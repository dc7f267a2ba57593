"""A ``time`` module for code that waits, without waiting: ``sleep`` moves ``monotonic`` (patch it in as the
module's ``time``, never the real module's functions, which other threads of the test process use)."""

from __future__ import annotations


class FakeTime:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
