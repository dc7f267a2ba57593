"""Polling for the integration tests: wait until a condition holds, or fail saying what was awaited."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any


POLL_FIRST_S, POLL_MAX_S = 0.02, 0.1


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition",
             poll_max_s: float = POLL_MAX_S) -> Any:
    """The first truthy value of ``predicate()``; AssertionError after ``timeout``.  Polled after 20 ms, then
    half as often again each time, to every ``poll_max_s``: a poll of a real system costs CPU there and here,
    and a long wait on a loaded machine made that CPU the machine's load (at every 20 ms, 50 polls a second).
    A cheap predicate that must be seen at once (a file read inside a short window) passes 0.02.  A predicate
    with a ``last`` attribute (what it saw last) has it shown when the wait times out."""
    deadline = time.monotonic() + timeout
    pause = min(POLL_FIRST_S, poll_max_s)
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(pause)
        pause = min(pause * 1.5, poll_max_s)
    seen = getattr(predicate, "last", None)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}"
                         + (f"; last seen: {seen}" if seen is not None else ""))


def not_answering(url: str, server: subprocess.Popen[bytes], log: Path, name: str, timeout: float) -> str | None:
    """None once ``url`` answers 200; else why not (``name`` exited, or did not answer in time) with its log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return f"{name} exited {server.returncode}:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                if reply.status == 200:
                    return None
        except OSError:
            pass
        time.sleep(0.2)
    return f"{name} did not answer within {timeout:g}s:\n{log.read_text()[-3000:]}"
