"""``GET /metrics``: the system in Prometheus's text format, with the official ``prometheus_client``.

Most families come from one ``stats`` answer per scrape (``metric_families``: task outcomes, durations and
retries from the store, pools, restarts, model requests and usage); the gateway adds what only it sees:
stage latencies from the transitions it watches (from its first scrape on), webhook deliveries, build info
and its own process and Python collectors.  docs/http.md lists them all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import platform

from prometheus_client import (
    GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry, Counter, Histogram, Info,
    disable_created_metrics, generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pegasus import __version__
from pegasus.config import DEFAULT_TIER
from pegasus.gateway.metric_families import families
from pegasus.task.machines import MACHINES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
disable_created_metrics()  # no *_created series: nothing alerts on them, and they double the counters' lines
WEBHOOK_RESULTS = ("created", "redelivered", "refused", "error")
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class _Stats(Collector):
    """The numbers of one ``stats`` answer, as metric families (``metric_families``)."""

    def __init__(self) -> None:
        self.stats: dict[str, Any] = {}

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        yield from families(stats, MACHINES)
        quarantined = GaugeMetricFamily("pegasus_quarantined", "Stored records set aside with an error (pegasus "
                                        "stats names them)", labels=["kind"])
        for kind, records in sorted((stats.get("quarantined") or {}).items()):
            quarantined.add_metric([kind], len(records))
        yield quarantined
        yield from _embeddings(stats.get("embeddings"))


def _embeddings(view: dict[str, Any] | None) -> Iterator[Metric]:
    """Memory's embedding vectors, labelled by model; no sample when no endpoint is configured."""
    missing = GaugeMetricFamily("pegasus_memory_rows_without_vector", "Facts and episodes still without an "
                                "embedding vector", labels=["model"])
    failing = GaugeMetricFamily("pegasus_embeddings_failing", "1 while the embeddings endpoint's last call failed",
                                labels=["model"])
    fallbacks = CounterMetricFamily("pegasus_recall_without_vector", "Recalls answered by full text alone (the "
                                    "query got no vector)", labels=["model"])
    searches = CounterMetricFamily("pegasus_memory_search_without_vector", "Tasks' memory.search steps answered by "
                                   "full text alone (the query got no vector)", labels=["model"])
    if view:
        model = [str(view.get("model", ""))]
        if view.get("rows_without_vector") is not None:
            missing.add_metric(model, view["rows_without_vector"])
        failing.add_metric(model, 0 if view.get("healthy", True) else 1)
        fallbacks.add_metric(model, view.get("recall_without_vector", 0))
        searches.add_metric(model, view.get("search_without_vector", 0))
    yield from (missing, failing, fallbacks, searches)


class GatewayMetrics:
    """The gateway's registry: the stats of the last scrape and the stage histogram."""

    def __init__(self) -> None:
        self.restarts = 0  # this gateway process's restarts by its keeper (RESTARTS_ENV): restarts{kind="gateway"}
        self.registry = CollectorRegistry(auto_describe=True)
        self._stats = _Stats()
        self.registry.register(self._stats)
        self.stage_seconds = Histogram("pegasus_stage_seconds", "Seconds a stage took, as its worker timed it, by "
                                       "stage, pool and model tier (counted from the gateway's first scrape; resets "
                                       "when it restarts)", ["stage", "pool", "tier"], registry=self.registry,
                                       buckets=STAGE_BUCKETS)
        self.webhooks = Counter("pegasus_webhook_deliveries", "Webhook deliveries by result (created, redelivered: "
                                "the same delivery again, refused: a 4xx, error: a 5xx; resets when the gateway "
                                "restarts)", ["result"], registry=self.registry)
        for result in WEBHOOK_RESULTS:
            self.webhooks.labels(result)
        Info("pegasus_build", "The running Pegasus", registry=self.registry).info(
            {"version": __version__, "python": platform.python_version()})
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):  # the gateway's own process
            self.registry.register(collector)
        self._lock = threading.Lock()

    def observe(self, detail: dict[str, Any]) -> None:
        """A transition's detail: a finished stage with its seconds is counted."""
        seconds, stage = detail.get("seconds"), detail.get("stage")
        if isinstance(seconds, (int, float)) and stage:
            pool = str(detail.get("pool") or "")  # an llm stage's usage names its tier unless it is the default
            tier = str(detail.get("tier") or (DEFAULT_TIER if pool == "llm" else ""))
            self.stage_seconds.labels(str(stage), pool, tier).observe(float(seconds))

    def webhook(self, status: int, redelivered: bool = False) -> None:
        """A webhook delivery answered ``status``."""
        result = ("error" if status >= 500 else "refused" if status >= 400 else
                  "redelivered" if redelivered else "created")
        self.webhooks.labels(result).inc()

    def render(self, stats: dict[str, Any]) -> bytes:
        with self._lock:
            self._stats.stats = {**stats, "gateway": {"restarts": self.restarts}}
            return generate_latest(self.registry)
