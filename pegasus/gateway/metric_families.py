"""The metric families of one ``stats`` answer (pure: a dict in, Prometheus families out; no I/O).

Counters read from the store's facts (``stats["facts"]``, ``pegasus.store.metric_facts``) survive a gateway
or supervisor restart; the others say in their HELP what resets them.  Label values known in advance
(machines, lifecycle states, outcomes, statuses, pools) are exported at zero from the first scrape, so an
alert on ``increase()`` sees the first failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from pegasus.store.metric_facts import DURATION_BUCKETS
from pegasus.task.names import LifecycleState

OUTCOMES = ("done", "failed", "canceled")
MODEL_STATUSES = ("ok", "error", "rate_limited")
GUARDED = ("supervisor", "gateway_keeper")  # the guardian's children (actors/guardian.py)


def families(stats: dict[str, Any], machines: Iterable[str]) -> Iterator[Metric]:
    """Every family ``stats`` gives, ``machines`` the names exported at zero."""
    machines = sorted(machines)
    yield from _system(stats)
    yield from _outcomes(stats.get("facts") or {}, machines)
    yield from _processes(stats)
    yield from _models(stats)
    yield from _mcp(stats)


def _system(stats: dict[str, Any]) -> Iterator[Metric]:
    counts = stats.get("tasks") or {}
    tasks = GaugeMetricFamily("pegasus_tasks", "Tasks by lifecycle state", labels=["state"])
    for state in sorted({*(str(s) for s in LifecycleState), *counts}):
        tasks.add_metric([state], counts.get(state, 0))
    yield tasks
    yield GaugeMetricFamily("pegasus_queue_length", "Tasks waiting for a run", value=stats.get("queue_length", 0))
    yield GaugeMetricFamily("pegasus_active_tasks", "Tasks running", value=stats.get("active", 0))
    yield GaugeMetricFamily("pegasus_max_active_tasks", "The cap on running tasks",
                            value=stats.get("max_active_tasks", 0))
    yield CounterMetricFamily("pegasus_rejected_frames", "Frames refused at the actor transport (unauthenticated or "
                              "malformed) since the system started", value=stats.get("rejected_frames") or 0)


def _outcomes(facts: dict[str, Any], machines: list[str]) -> Iterator[Metric]:
    known = sorted({*machines, *(row["machine"] for row in facts.get("ends", []))})
    ends = CounterMetricFamily("pegasus_task_outcomes", "Task ends, by machine and outcome; a failure later retried "
                               "still counts (the store's transitions)", labels=["machine", "outcome"])
    ended: dict[tuple[str, str], int] = {(machine, outcome): 0 for machine in known for outcome in OUTCOMES}
    for row in facts.get("ends", []):
        ended[(row["machine"], row["outcome"])] = row["count"]
    for pair, count in sorted(ended.items()):
        ends.add_metric(list(pair), count)
    yield ends
    failures = GaugeMetricFamily("pegasus_tasks_failed", "Tasks failed now (not retried since), by machine and exit "
                                 "reason (from the store)", labels=["machine", "exit_reason"])
    for row in facts.get("failed", []):
        failures.add_metric([row["machine"], row["exit_reason"] or "unknown"], row["count"])
    yield failures
    for name, key, text in (("pegasus_task_retries", "retries", "Task retries (pegasus retry), by machine (from the "
                             "store)"), ("pegasus_task_runs", "runs", "Task runs started, a run resumed after a "
                                         "crash included, by machine (from the store)")):
        yield _per_machine(CounterMetricFamily(name, text, labels=["machine"]), facts.get(key) or {}, known)
    bounds = facts.get("buckets") or list(DURATION_BUCKETS)
    yield _histogram(HistogramMetricFamily("pegasus_task_duration_seconds", "Seconds from a task's submission to its "
                                           "end, by machine (from the store)", labels=["machine"]),
                     facts.get("durations", []), bounds, known)
    yield _histogram(HistogramMetricFamily("pegasus_task_queue_wait_seconds", "Seconds from a task's submission to "
                                           "its first run, by machine (from the store)", labels=["machine"]),
                     facts.get("queue_waits", []), bounds, known)
    slots = CounterMetricFamily("pegasus_schedule_slots", "Schedule slots fired and skipped, by schedule (from "
                                "the store)", labels=["schedule", "result"])
    for row in facts.get("schedules", []):
        slots.add_metric([row["schedule"], "fired"], row["fired"])
        slots.add_metric([row["schedule"], "skipped"], row["skipped"])
    yield slots


def _per_machine(family: CounterMetricFamily, counted: dict[str, int], known: list[str]) -> CounterMetricFamily:
    for machine in sorted({*known, *counted}):
        family.add_metric([machine], counted.get(machine, 0))
    return family


def _histogram(family: HistogramMetricFamily, rows: list[dict[str, Any]], bounds: list[float],
               known: list[str]) -> HistogramMetricFamily:
    """Cumulative bucket counts per machine (``metric_facts``' rows), a machine without any at zero."""
    by_machine = {row["machine"]: row for row in rows}
    for machine in sorted({*known, *by_machine}):
        row = by_machine.get(machine) or {"count": 0, "sum": 0.0, "buckets": [0] * len(bounds)}
        buckets = [(str(float(bound)), count) for bound, count in zip(bounds, row["buckets"], strict=True)]
        family.add_metric([machine], [*buckets, ("+Inf", row["count"])], sum_value=row["sum"])
    return family


def _processes(stats: dict[str, Any]) -> Iterator[Metric]:
    pools = stats.get("pools") or {}
    workers = GaugeMetricFamily("pegasus_pool_workers", "Stage workers by pool and status", labels=["pool", "status"])
    queued = GaugeMetricFamily("pegasus_pool_queued", "Stage requests waiting in a pool", labels=["pool"])
    responsive = GaugeMetricFamily("pegasus_pool_up", "1 while the pool answered the last stats request in time",
                                   labels=["pool"])
    restarts = CounterMetricFamily("pegasus_restarts", "Processes started again after they died, by kind "
                                   "(supervisor, gateway_keeper: the guardian's count, reset when the system "
                                   "restarts; gateway: the HTTP gateway, its keeper's count, reset when the keeper "
                                   "restarts; pool: a stage pool, task_actor: a task actor (its runs resumed "
                                   "elsewhere), both reset when the supervisor restarts; worker: a stage worker, "
                                   "reset when its pool restarts)", labels=["kind"])
    pool_restarts = replaced = 0
    for pool, part in sorted(pools.items()):
        size, busy = int(part.get("size", 0) or 0), int(part.get("busy", 0) or 0)
        workers.add_metric([pool, "busy"], busy)
        workers.add_metric([pool, "idle"], max(0, size - busy))
        queued.add_metric([pool], part.get("queued", 0) or 0)
        responsive.add_metric([pool], 1 if part.get("responsive", True) else 0)
        pool_restarts += int((part.get("supervision") or {}).get("restarts", 0) or 0)
        replaced += int(part.get("replaced", 0) or 0)
    guardian = (stats.get("guardian") or {}).get("supervision") or {}
    for kind in sorted({*GUARDED, *guardian}):
        restarts.add_metric([kind], int((guardian.get(kind) or {}).get("restarts", 0) or 0))
    restarts.add_metric(["gateway"], int((stats.get("gateway") or {}).get("restarts", 0) or 0))
    restarts.add_metric(["pool"], pool_restarts)
    restarts.add_metric(["task_actor"], int((stats.get("task_actors") or {}).get("died", 0) or 0))
    restarts.add_metric(["worker"], replaced)
    yield from (workers, queued, responsive, restarts)


def _models(stats: dict[str, Any]) -> Iterator[Metric]:
    usage = (stats.get("usage") or {}).get("models", [])
    calls = CounterMetricFamily("pegasus_model_calls", "Model calls (from the store)", labels=["model", "tier"])
    tokens = CounterMetricFamily("pegasus_model_tokens", "Model tokens (from the store)",
                                 labels=["model", "tier", "kind"])
    cost = CounterMetricFamily("pegasus_model_cost_usd", "Model cost in US dollars, priced models only (from the "
                               "store)", labels=["model", "tier"])
    tiers = {"default"}
    for row in usage:
        labels = [str(row.get("model", "")), str(row.get("tier", ""))]
        tiers.add(labels[1])
        calls.add_metric(labels, row.get("calls", 0))
        for kind in ("prompt", "completion", "cached"):
            tokens.add_metric([*labels, kind], row.get(f"{kind}_tokens", 0) or 0)
        cost.add_metric(labels, row.get("cost_usd") or 0.0)
    yield from (calls, tokens, cost)
    llm = (stats.get("pools") or {}).get("llm") or {}
    settled = {(row["tier"], row["status"]): row["count"] for row in llm.get("model_requests") or []}
    budget = llm.get("budget") or {}
    tiers |= {tier for tier, _ in settled} | set(budget)
    requests = CounterMetricFamily("pegasus_model_requests", "Model stages settled by the llm pool, by tier and "
                                   "status (rate_limited: a 429 after the client's retries; resets when the llm "
                                   "pool restarts)", labels=["tier", "status"])
    for tier in sorted(tiers):
        for status in MODEL_STATUSES:
            requests.add_metric([tier, status], settled.get((tier, status), 0))
    yield requests
    paused = GaugeMetricFamily("pegasus_model_rate_limit_pause_seconds", "Seconds left before the llm pool admits a "
                               "tier's calls again after a 429 (0: not paused; only tiers with a rate budget)",
                               labels=["tier"])
    for tier, view in sorted(budget.items()):
        paused.add_metric([tier], view.get("paused_s", 0) or 0)
    yield paused


UNSETTLED = ("idle", "starting")  # an MCP server's phases before it is up or has failed


def _mcp(stats: dict[str, Any]) -> Iterator[Metric]:
    """The machine's MCP servers (its MCP host's, through the supervisor) and the ``scope = "worker"`` ones (each
    stage worker's copy, as it was at the worker's last stage); no sample for a server none has reported.  A copy
    not started yet, or starting, says nothing of the server: a worker that has not used it reports it so."""
    up = GaugeMetricFamily("pegasus_mcp_server_up", "1 while an MCP server is started and listed its tools (one "
                           "that died is seen at the next call to it, then started again); a scope = worker "
                           "server: 1 while every stage worker's copy that had started or failed was up, at its "
                           "last stage (0 while none had)", labels=["server"])
    errors = CounterMetricFamily("pegasus_mcp_tool_errors", "Tool calls an MCP server failed or refused, by server "
                                 "(resets when the MCP host restarts; scope = worker: summed over the stage "
                                 "workers' copies, less when a worker is replaced)", labels=["server"])
    servers: dict[str, tuple[bool | None, int]] = {
        name: (bool(server.get("up")), int(server.get("tool_errors", 0) or 0))
        for name, server in (stats.get("mcp") or {}).items()}
    for part in (stats.get("pools") or {}).values():
        for worker in part.get("workers") or []:
            for name, copy in (worker.get("mcp") or {}).items():
                was_up, failed = servers.get(name, (None, 0))
                if copy.get("phase") not in UNSETTLED:
                    was_up = (was_up is not False) and bool(copy.get("up"))
                servers[name] = (was_up, failed + int(copy.get("tool_errors", 0) or 0))
    for name, (is_up, failed) in sorted(servers.items()):
        up.add_metric([name], 1 if is_up else 0)
        errors.add_metric([name], failed)
    yield from (up, errors)
