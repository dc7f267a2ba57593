"""Task ids: new ones (``TaskIds``: time-ordered, so a commit's rows share index pages), and the task a
unique prefix names (``full_task_id``: the 8 characters the dashboard and ``watch`` show, or fewer).

``full_task_id(query, task_id)``: itself when it is a task's id, the one task whose id starts with it, else
``task_id`` unchanged (the caller's "unknown task" follows); two or more: ``AmbiguousTaskId``.  ``query`` is a
store's read (``Store._query``, or ``pegasus.store.reader``'s): one range scan of the tasks' primary key.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from pegasus.errors import PegasusError

Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
SHOWN = 10  # matches an ambiguous prefix lists
FULL_CHARS = 32  # a task id (32 hex digits): no prefix lookup needed
TICKS = 1 << 32  # the clock's 8 hex digits: milliseconds, wrapping every 49.7 days


class TaskIds:
    """32 hex digits: 8 of a millisecond clock (mod 2**32) kept rising (a task made in the same millisecond, or
    after the clock stepped back, takes the next value), then 24 random.  Tasks made one after another sit side
    by side in every index led by the task's id (the tasks' key, ``audit_by_task``, ``transitions_by_task``,
    ``checkpoints_by_task``): a commit of many tasks' rows dirties a few pages of each, not one random page a
    task (a uuid4's).  The 8 shown digits differ from task to task (for 49 days: then they wrap).  Ids made
    before (uuid4 hex) keep working, as any 32 hex digits do.  Clock (ns) and randomness are given."""

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns,
                 random_bytes: Callable[[int], bytes] = os.urandom) -> None:
        self.clock_ns, self.random_bytes = clock_ns, random_bytes
        self.last = -1

    def __call__(self) -> str:
        tick = self.clock_ns() // 1_000_000 % TICKS
        # Ahead of the last one (serial-number order, so a wrap counts as ahead), else the next after it.
        ahead = self.last < 0 or 0 < (tick - self.last) % TICKS < TICKS // 2
        self.last = tick if ahead else (self.last + 1) % TICKS
        return f"{self.last:08x}{self.random_bytes(12).hex()}"


class AmbiguousTaskId(PegasusError):
    """A prefix that more than one task's id starts with; ``matches`` lists some of them."""

    def __init__(self, prefix: str, matches: list[str]) -> None:
        self.prefix, self.matches = prefix, list(matches)
        more = ", ..." if len(matches) > SHOWN else ""
        super().__init__(f"task id prefix {prefix!r} is ambiguous: it matches {', '.join(matches[:SHOWN])}{more}; "
                         f"give more characters")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.prefix, self.matches))


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """``[low, high)``: exactly the strings that start with ``prefix`` (non-empty)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def full_task_id(query: Query, task_id: str) -> str:
    """The id of the one task ``task_id`` names, whole or as a unique prefix (see the module docstring)."""
    if not task_id or len(task_id) >= FULL_CHARS:
        return task_id
    low, high = prefix_bounds(task_id)
    rows = query("SELECT task_id FROM tasks WHERE task_id >= ? AND task_id < ? ORDER BY task_id LIMIT ?",
                 (low, high, SHOWN + 1))
    matches = [str(row[0]) for row in rows]
    if task_id in matches or not matches:
        return task_id
    if len(matches) == 1:
        return matches[0]
    raise AmbiguousTaskId(task_id, matches)
