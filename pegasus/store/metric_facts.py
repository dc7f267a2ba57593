"""What ``/metrics`` counts from the store, so that its counters survive a gateway or supervisor restart.

Task ends (by outcome), durations (submission to end) and queue waits (submission to first run) are the
stored lifecycle transitions, folded into a ``Tally`` from the last transition id it saw: each scrape reads
only the transitions since the previous one (the first scrape after a start reads them all, once).  A failed
task later retried keeps its failure.  The rest are small aggregates: failed tasks by exit reason, retries
and runs per machine (task rows), schedule slots (schedule rows).  Turned into metric families by
``pegasus.gateway.metric_families``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Seconds: from a task's submission to its end (duration), to its first run (queue wait).
DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0, 86400.0)
ENDS = ("done", "failed", "canceled")  # ends that stay ends (a blocked task may resume)

Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]

# Every lifecycle move to running or an end after ``id``, with its task's machine, the seconds since the task's
# submission, and whether it is the task's first run (the transitions index by task finds an earlier one).
_NEW_TRANSITIONS = (
    "SELECT r.id, r.to_state, t.machine, (julianday(r.created_at) - julianday(t.created_at)) * 86400.0, "
    "CASE WHEN r.to_state = 'running' THEN NOT EXISTS (SELECT 1 FROM transitions e WHERE e.task_id = r.task_id "
    "AND e.id < r.id AND e.machine = 'lifecycle' AND e.to_state = 'running') END "
    "FROM transitions r JOIN tasks t ON t.task_id = r.task_id WHERE r.id > ? AND r.machine = 'lifecycle' "
    f"AND r.to_state IN ('running', {', '.join(repr(end) for end in ENDS)}) ORDER BY r.id")


class Histogram:
    """Cumulative counts at ``DURATION_BUCKETS``, their sum and count."""

    def __init__(self) -> None:
        self.buckets = [0] * len(DURATION_BUCKETS)
        self.count, self.sum = 0, 0.0

    def observe(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self.count += 1
        self.sum += seconds
        for index, bound in enumerate(DURATION_BUCKETS):
            if seconds <= bound:
                self.buckets[index] += 1

    def view(self, machine: str) -> dict[str, Any]:
        return {"machine": machine, "count": self.count, "sum": round(self.sum, 6), "buckets": list(self.buckets)}


class Tally:
    """Ends, durations and first-run waits per machine, folded in from the transitions after ``last_id``."""

    def __init__(self) -> None:
        self.last_id = 0
        self.ends: dict[tuple[str, str], int] = {}
        self.durations: dict[str, Histogram] = {}
        self.waits: dict[str, Histogram] = {}

    def fold(self, query: Query) -> None:
        for row_id, state, machine, seconds, first_run in query(_NEW_TRANSITIONS, (self.last_id,)):
            self.last_id = row_id
            if state == "running":
                if first_run and seconds is not None:
                    self.waits.setdefault(machine, Histogram()).observe(float(seconds))
                continue
            self.ends[(machine, state)] = self.ends.get((machine, state), 0) + 1
            if seconds is not None:
                self.durations.setdefault(machine, Histogram()).observe(float(seconds))


def metric_facts(query: Query, tally: Tally) -> dict[str, Any]:
    """Ends per machine and outcome; duration and queue-wait buckets per machine (cumulative counts at
    ``DURATION_BUCKETS``); failed tasks now by exit reason; retries (``pegasus retry``) and runs per machine;
    schedule slots fired and skipped per schedule."""
    tally.fold(query)
    failed = [{"machine": machine, "exit_reason": reason or "", "count": count} for machine, reason, count in query(
        "SELECT machine, exit_reason, COUNT(*) FROM tasks WHERE lifecycle_state = 'failed' "
        "GROUP BY machine, exit_reason ORDER BY 1, 2", ())]
    retries: dict[str, int] = {}
    runs: dict[str, int] = {}
    for machine, retried, ran in query("SELECT machine, COALESCE(SUM(MAX(attempts - 1, 0)), 0), COALESCE(SUM(runs), 0) "
                                       "FROM tasks GROUP BY machine ORDER BY machine", ()):
        retries[machine], runs[machine] = int(retried), int(ran)
    schedules = [{"schedule": name, "fired": int(fired), "skipped": int(skipped)}
                 for name, fired, skipped in query("SELECT name, fired, skipped FROM schedules ORDER BY name", ())]
    return {"buckets": list(DURATION_BUCKETS),
            "ends": [{"machine": m, "outcome": o, "count": n} for (m, o), n in sorted(tally.ends.items())],
            "failed": failed, "retries": retries, "runs": runs,
            "durations": [h.view(m) for m, h in sorted(tally.durations.items())],
            "queue_waits": [h.view(m) for m, h in sorted(tally.waits.items())], "schedules": schedules}
