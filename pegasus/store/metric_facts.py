"""What ``/metrics`` counts from the store, so that its counters survive a gateway or supervisor restart.

One pass over ``tasks`` (outcomes, retries, duration and queue-wait buckets, aggregated in SQL: the
supervisor pays one scan per scrape, no rows come back) and the ``schedules`` rows.  Read by the
supervisor into its ``stats`` answer; turned into metric families by ``pegasus.gateway.metric_families``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Seconds: from a task's submission to its end (duration), to its first run (queue wait).
DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0, 86400.0)
# Ends that stay ends (a blocked task may resume; a failed one retried comes back in ``attempts``).
TERMINAL = ("done", "failed", "canceled")

Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


def _buckets_sql(seconds: str) -> str:
    sums = ", ".join(f"COALESCE(SUM({seconds} <= {bound}), 0)" for bound in DURATION_BUCKETS)
    return f"COUNT({seconds}), COALESCE(SUM({seconds}), 0.0), {sums}"


def _histograms(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [{"machine": row[0], "count": int(row[1]), "sum": float(row[2]),
             "buckets": [int(n) for n in row[3:]]} for row in rows]


def metric_facts(query: Query) -> dict[str, Any]:
    """Outcomes per machine, state and exit reason; retries (``pegasus retry``) and runs per machine; duration
    and queue-wait buckets per machine (cumulative counts at ``DURATION_BUCKETS``); schedule slots fired and
    skipped per schedule."""
    terminal = ", ".join(f"'{state}'" for state in TERMINAL)
    outcomes = [{"machine": machine, "state": state, "exit_reason": reason or "", "count": count}
                for machine, state, reason, count in query(
                    f"SELECT machine, lifecycle_state, exit_reason, COUNT(*) FROM tasks WHERE lifecycle_state IN "
                    f"({terminal}) GROUP BY machine, lifecycle_state, exit_reason ORDER BY 1, 2, 3", ())]
    retries: dict[str, int] = {}
    runs: dict[str, int] = {}
    for machine, retried, ran in query("SELECT machine, COALESCE(SUM(MAX(attempts - 1, 0)), 0), COALESCE(SUM(runs), 0) "
                                       "FROM tasks GROUP BY machine ORDER BY machine", ()):
        retries[machine], runs[machine] = int(retried), int(ran)
    ended = "(julianday(updated_at) - julianday(created_at)) * 86400.0"
    durations = _histograms(query(f"SELECT machine, {_buckets_sql(ended)} FROM tasks WHERE lifecycle_state IN "
                                  f"({terminal}) GROUP BY machine ORDER BY machine", ()))
    # Queue wait: submission to the task's first move to running (its lifecycle transitions, by the task index).
    started = ("(SELECT (julianday(MIN(r.created_at)) - julianday(t.created_at)) * 86400.0 FROM transitions r "
               "WHERE r.task_id = t.task_id AND r.to_state = 'running')")
    waits = _histograms(query(f"SELECT machine, {_buckets_sql('w')} FROM (SELECT t.machine AS machine, {started} AS w "
                              f"FROM tasks t) WHERE w IS NOT NULL GROUP BY machine ORDER BY machine", ()))
    schedules = [{"schedule": name, "fired": int(fired), "skipped": int(skipped)}
                 for name, fired, skipped in query("SELECT name, fired, skipped FROM schedules ORDER BY name", ())]
    return {"buckets": list(DURATION_BUCKETS), "outcomes": outcomes, "retries": retries, "runs": runs,
            "durations": durations, "queue_waits": waits, "schedules": schedules}
