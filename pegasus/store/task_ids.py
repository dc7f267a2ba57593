"""Task ids by unique prefix: the 8-character ids the dashboard and ``watch`` show.

``full_task_id(query, task_id)`` answers the full id a prefix names: itself when it
is a task's id, the one task whose id starts with it, else ``task_id`` unchanged
(the caller's own "unknown task" follows).  Two or more tasks: ``AmbiguousTaskId``,
listing them.  ``query(sql, params)`` is a store's read (``Store._query``, or the
read-only reader of ``pegasus.store.reader``): the lookup is one range scan of the
tasks' primary key, never a scan of the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pegasus.errors import PegasusError

Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
SHOWN = 10  # matches an ambiguous prefix lists
FULL_CHARS = 32  # a task id (uuid4 hex): no prefix lookup needed


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
