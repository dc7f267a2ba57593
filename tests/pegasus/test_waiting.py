"""The integration tests' wait (tests/support/waiting.py) says what it saw last when it times out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.waiting import wait_for


def test_a_timed_out_wait_shows_what_its_predicate_saw_last() -> None:
    def check() -> Any:
        check.last = {"tool": ["b", "b"]}  # type: ignore[attr-defined]
        return None

    with pytest.raises(AssertionError, match=r"waiting for the pool to shrink; last seen: \{'tool': \['b', 'b'\]\}"):
        wait_for(check, timeout=0.05, what="the pool to shrink")
    with pytest.raises(AssertionError, match=r"waiting for nothing$"):
        wait_for(lambda: None, timeout=0.05, what="nothing")
