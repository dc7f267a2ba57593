"""``GET /metrics``: the system in Prometheus's text format, with the official ``prometheus_client``.

Gauges and counters are read from ``stats`` at each scrape (tasks by state, queue, active tasks,
pool workers busy and idle, model calls and tokens); stage latencies are a histogram the gateway
fills from the transitions it watches (each finished stage's seconds, as its worker timed it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class _Stats(Collector):
    """The numbers of one ``stats`` answer, as metric families."""

    def __init__(self) -> None:
        self.stats: dict[str, Any] = {}

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        tasks = GaugeMetricFamily("pegasus_tasks", "Tasks by lifecycle state", labels=["state"])
        for state, count in sorted((stats.get("tasks") or {}).items()):
            tasks.add_metric([state], count)
        yield tasks
        yield GaugeMetricFamily("pegasus_queue_length", "Tasks waiting for a run", value=stats.get("queue_length", 0))
        yield GaugeMetricFamily("pegasus_active_tasks", "Tasks running", value=stats.get("active", 0))
        yield GaugeMetricFamily("pegasus_max_active_tasks", "The cap on running tasks",
                                value=stats.get("max_active_tasks", 0))
        workers = GaugeMetricFamily("pegasus_pool_workers", "Stage workers by pool and status",
                                    labels=["pool", "status"])
        queued = GaugeMetricFamily("pegasus_pool_queued", "Stage requests waiting in a pool", labels=["pool"])
        for pool, part in sorted((stats.get("pools") or {}).items()):
            size, busy = int(part.get("size", 0)), int(part.get("busy", 0))
            workers.add_metric([pool, "busy"], busy)
            workers.add_metric([pool, "idle"], max(0, size - busy))
            queued.add_metric([pool], part.get("queued", 0))
        yield workers
        yield queued
        calls = CounterMetricFamily("pegasus_model_calls", "Model calls", labels=["model", "tier"])
        tokens = CounterMetricFamily("pegasus_model_tokens", "Model tokens", labels=["model", "tier", "kind"])
        for row in (stats.get("usage") or {}).get("models", []):
            labels = [str(row.get("model", "")), str(row.get("tier", ""))]
            calls.add_metric(labels, row.get("calls", 0))
            for kind in ("prompt", "completion", "cached"):
                tokens.add_metric([*labels, kind], row.get(f"{kind}_tokens", 0) or 0)
        yield calls
        yield tokens
        quarantined = GaugeMetricFamily("pegasus_quarantined", "Stored records set aside with an error (pegasus "
                                        "stats names them)", labels=["kind"])
        for kind, records in sorted((stats.get("quarantined") or {}).items()):
            quarantined.add_metric([kind], len(records))
        yield quarantined
        yield from _embeddings(stats.get("embeddings"))


def _embeddings(view: dict[str, Any] | None) -> Iterator[Metric]:
    """Memory's embedding vectors (issue 29), labelled by model; no sample when no endpoint is configured."""
    missing = GaugeMetricFamily("pegasus_memory_rows_without_vector", "Facts and episodes still without an "
                                "embedding vector", labels=["model"])
    failing = GaugeMetricFamily("pegasus_embeddings_failing", "1 while the embeddings endpoint's last call failed",
                                labels=["model"])
    fallbacks = CounterMetricFamily("pegasus_recall_without_vector", "Recalls answered by full text alone (the "
                                    "query got no vector)", labels=["model"])
    if view:
        model = [str(view.get("model", ""))]
        if view.get("rows_without_vector") is not None:
            missing.add_metric(model, view["rows_without_vector"])
        failing.add_metric(model, 0 if view.get("healthy", True) else 1)
        fallbacks.add_metric(model, view.get("recall_without_vector", 0))
    yield from (missing, failing, fallbacks)


class GatewayMetrics:
    """The gateway's registry: the stats of the last scrape and the stage histogram."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._stats = _Stats()
        self.registry.register(self._stats)
        self.stage_seconds = Histogram("pegasus_stage_seconds", "Seconds a stage took, as its worker timed it",
                                       ["stage"], registry=self.registry, buckets=STAGE_BUCKETS)
        self._lock = threading.Lock()

    def observe(self, detail: dict[str, Any]) -> None:
        """A transition's detail: a finished stage with its seconds is counted."""
        seconds, stage = detail.get("seconds"), detail.get("stage")
        if isinstance(seconds, (int, float)) and stage:
            self.stage_seconds.labels(str(stage)).observe(float(seconds))

    def render(self, stats: dict[str, Any]) -> bytes:
        with self._lock:
            self._stats.stats = stats
            return generate_latest(self.registry)
