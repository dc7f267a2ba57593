"""/metrics' families from a stats answer (pure), the store's facts behind them, the llm budget's counts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pegasus.gateway.metrics import GatewayMetrics
from pegasus.llm.budget import LlmBudget
from pegasus.llm.ratelimit import RateLimiter
from pegasus.store.metric_facts import DURATION_BUCKETS
from pegasus.store.sqlite import Store
from pegasus.task import TaskContext


def _samples(stats: dict) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = GatewayMetrics().render(stats).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_known_label_values_are_exported_at_zero_before_anything_happened() -> None:
    samples = _samples({})
    for key in (("pegasus_tasks", (("state", "failed"),)),
                ("pegasus_task_outcomes_total", (("machine", "classic"), ("outcome", "failed"))),
                ("pegasus_task_retries_total", (("machine", "reason_act"),)),
                ("pegasus_task_duration_seconds_count", (("machine", "classic"),)),
                ("pegasus_task_queue_wait_seconds_bucket", (("le", "+Inf"), ("machine", "classic"))),
                ("pegasus_restarts_total", (("kind", "worker"),)),
                ("pegasus_restarts_total", (("kind", "task_actor"),)),
                ("pegasus_restarts_total", (("kind", "gateway"),)),
                ("pegasus_model_requests_total", (("status", "rate_limited"), ("tier", "default"))),
                ("pegasus_webhook_deliveries_total", (("result", "refused"),)),
                ("pegasus_rejected_frames_total", ())):
        assert samples[key] == 0, key
    assert any(name == "pegasus_build_info" for name, _ in samples)
    assert any(name == "process_cpu_seconds_total" for name, _ in samples)


def _store_with_tasks(path: Path) -> Store:
    store = Store(path)
    db = sqlite3.connect(path)
    rows = [("t1", "classic", "done", None, 1, 1, "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:03+00:00"),
            ("t2", "classic", "failed", "max_steps", 2, 4, "2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00"),
            ("t3", "reason_act", "running", None, 1, 1, "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:01+00:00")]
    for task_id, machine, state, reason, attempts, runs, created, updated in rows:
        db.execute("INSERT INTO tasks (task_id, machine, lifecycle_state, cognitive_state, priority, seq, attempts, "
                   "runs, exit_reason, input, source, created_at, updated_at) VALUES (?, ?, ?, 'x', 0, 0, ?, ?, ?, "
                   "'in', 'cli', ?, ?)", (task_id, machine, state, attempts, runs, reason, created, updated))
    moves = [("t1", "running", "00:00:02"), ("t1", "done", "00:00:03"), ("t2", "running", "00:00:01"),
             ("t2", "failed", "00:00:10"), ("t2", "running", "00:00:20"), ("t2", "failed", "00:01:00"),
             ("t3", "running", "00:00:01")]
    for task_id, target, at in moves:
        _move(db, task_id, target, at)
    db.execute("INSERT INTO transitions (task_id, machine, run, from_state, to_state, event, created_at) VALUES "
               "('t1', 'reason_act', 1, 'x', 'done', 'E', '2026-01-01T00:00:02+00:00')")  # a cognitive state: not an end
    db.execute("INSERT INTO schedules (name, id, spec, paused, cursor, fired, skipped, created_at) VALUES "
               "('nightly', 's1', '{}', 0, 0, 5, 2, '2026-01-01T00:00:00+00:00')")
    db.commit()
    db.close()
    return store


def _move(db: sqlite3.Connection, task_id: str, target: str, at: str) -> None:
    db.execute("INSERT INTO transitions (task_id, machine, run, from_state, to_state, event, created_at) VALUES "
               "(?, 'lifecycle', 1, 'x', ?, 'E', ?)", (task_id, target, f"2026-01-01T{at}+00:00"))


def test_outcomes_retries_durations_and_schedule_slots_come_from_the_store(tmp_path: Path) -> None:
    facts = _store_with_tasks(tmp_path / "p.db").metric_facts()
    samples = _samples({"facts": facts})
    assert samples[("pegasus_task_outcomes_total", (("machine", "classic"), ("outcome", "done")))] == 1
    # t2 failed, was retried, failed again: two failures, the first not lost when the retry brought it back
    assert samples[("pegasus_task_outcomes_total", (("machine", "classic"), ("outcome", "failed")))] == 2
    assert samples[("pegasus_task_outcomes_total", (("machine", "reason_act"), ("outcome", "done")))] == 0
    assert samples[("pegasus_tasks_failed", (("exit_reason", "max_steps"), ("machine", "classic")))] == 1
    assert samples[("pegasus_task_retries_total", (("machine", "classic"),))] == 1
    assert samples[("pegasus_task_runs_total", (("machine", "classic"),))] == 5
    assert samples[("pegasus_task_duration_seconds_count", (("machine", "classic"),))] == 3  # each end: 3, 10, 60 s
    assert samples[("pegasus_task_duration_seconds_sum", (("machine", "classic"),))] == pytest.approx(73, abs=0.01)
    assert samples[("pegasus_task_duration_seconds_bucket", (("le", "5.0"), ("machine", "classic")))] == 1
    assert samples[("pegasus_task_duration_seconds_bucket", (("le", "60.0"), ("machine", "classic")))] == 3
    assert samples[("pegasus_task_queue_wait_seconds_count", (("machine", "classic"),))] == 2  # first runs only
    assert samples[("pegasus_task_queue_wait_seconds_count", (("machine", "reason_act"),))] == 1
    assert samples[("pegasus_task_queue_wait_seconds_bucket", (("le", "1.0"), ("machine", "classic")))] == 1
    assert samples[("pegasus_task_queue_wait_seconds_bucket", (("le", "2.5"), ("machine", "classic")))] == 2
    assert samples[("pegasus_schedule_slots_total", (("result", "skipped"), ("schedule", "nightly")))] == 2
    assert len(facts["durations"][0]["buckets"]) == len(DURATION_BUCKETS)


def test_the_tally_reads_only_new_transitions_and_a_new_store_object_counts_the_same(tmp_path: Path) -> None:
    """Incremental across scrapes; a restarted supervisor (a new Store) folds everything again to the same counts."""
    store = _store_with_tasks(tmp_path / "p.db")
    store.metric_facts()
    db = sqlite3.connect(tmp_path / "p.db")
    _move(db, "t3", "canceled", "00:00:05")
    db.commit()
    db.close()
    later = store.metric_facts()
    assert {(row["outcome"], row["count"]) for row in later["ends"] if row["machine"] == "reason_act"} == {
        ("canceled", 1)}
    assert Store(tmp_path / "p.db").metric_facts() == later


def test_pools_give_restarts_by_kind_model_requests_by_status_and_the_429_pause() -> None:
    llm = {"size": 2, "busy": 1, "queued": 0, "replaced": 3, "responsive": True, "supervision": {"restarts": 1},
           "model_requests": [{"tier": "default", "status": "ok", "count": 4},
                              {"tier": "default", "status": "rate_limited", "count": 1}],
           "budget": {"default": {"paused_s": 2.5}}}
    guardian = {"supervision": {"supervisor": {"kind": "supervisor", "restarts": 2}}}
    samples = _samples({"pools": {"llm": llm, "tool": {"size": 1, "busy": 0, "replaced": 1, "responsive": False}},
                        "guardian": guardian})
    assert samples[("pegasus_restarts_total", (("kind", "supervisor"),))] == 2
    assert samples[("pegasus_restarts_total", (("kind", "gateway_keeper"),))] == 0
    assert samples[("pegasus_restarts_total", (("kind", "worker"),))] == 4
    assert samples[("pegasus_restarts_total", (("kind", "pool"),))] == 1
    assert samples[("pegasus_pool_up", (("pool", "tool"),))] == 0
    assert samples[("pegasus_model_requests_total", (("status", "rate_limited"), ("tier", "default")))] == 1
    assert samples[("pegasus_model_requests_total", (("status", "error"), ("tier", "default")))] == 0
    assert samples[("pegasus_model_rate_limit_pause_seconds", (("tier", "default"),))] == 2.5


def test_the_budget_counts_settled_stages_by_tier_and_status() -> None:
    budget = LlmBudget(RateLimiter(), 100, lambda: 0.0)
    budget.admit(TaskContext(), 1)
    budget.settle(1, {"usage": {"total_tokens": 9}}, requeues=0)
    budget.settle(2, {"retry_after_s": 1.0}, requeues=0)
    budget.settle(3, {}, requeues=0, ok=False)
    assert budget.counts() == [{"tier": "default", "status": status, "count": 1}
                               for status in ("error", "ok", "rate_limited")]


def test_webhook_deliveries_are_counted_by_result() -> None:
    metrics = GatewayMetrics()
    metrics.webhook(201)
    metrics.webhook(200, redelivered=True)
    metrics.webhook(401)
    text = metrics.render({}).decode()
    for result in ("created", "redelivered", "refused"):
        assert f'pegasus_webhook_deliveries_total{{result="{result}"}} 1.0' in text


def test_the_documented_alerts_and_dashboard_name_only_metrics_that_are_exported() -> None:
    """docs/pegasus-alerts.yml, docs/grafana-dashboard.json and docs/http.md's table: every pegasus_* name they use
    is in a scrape (a renamed metric cannot leave them silently empty)."""
    import json
    import re

    docs = Path(__file__).resolve().parents[3] / "docs"
    text = GatewayMetrics().render({}).decode()
    exported = set(re.findall(r"^# HELP (\w+)", text, re.M))  # every family, with samples or not
    exported |= {f"{name}_{suffix}" for name in exported for suffix in ("bucket", "count", "sum")}
    dashboard = json.loads((docs / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for doc in (*exprs, (docs / "pegasus-alerts.yml").read_text(), (docs / "http.md").read_text()):
        used = set(re.findall(r"\b(pegasus_[a-z_]+)\b", doc)) - {"pegasus_"}
        assert used <= exported, sorted(used - exported)


def test_mcp_servers_and_the_restarts_of_task_actors_and_the_gateway() -> None:
    metrics = GatewayMetrics()
    metrics.restarts = 2  # what its keeper said when it started this gateway
    text = metrics.render({"task_actors": {"died": 3}, "mcp": {
        "time": {"phase": "ready", "up": True, "tool_errors": 4}, "git": {"phase": "failed", "up": False}}}).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("pegasus_restarts_total", (("kind", "gateway"),))] == 2
    assert samples[("pegasus_restarts_total", (("kind", "task_actor"),))] == 3
    assert samples[("pegasus_mcp_server_up", (("server", "time"),))] == 1
    assert samples[("pegasus_mcp_server_up", (("server", "git"),))] == 0
    assert samples[("pegasus_mcp_tool_errors_total", (("server", "time"),))] == 4
    assert samples[("pegasus_mcp_tool_errors_total", (("server", "git"),))] == 0
    assert not any(name.startswith("pegasus_mcp") for name, _ in _samples({"mcp": None}))  # none configured


def test_worker_scope_mcp_servers_are_counted_from_each_stage_workers_copy() -> None:
    def worker(**servers: tuple[bool, int]) -> dict:
        return {"pid": 1, "mcp": {name: {"up": up, "tool_errors": n} for name, (up, n) in servers.items()}}
    stats = {"mcp": {"time": {"up": True, "tool_errors": 1}}, "pools": {
        "tool": {"workers": [worker(fetch=(True, 2), flaky=(True, 0)), worker(fetch=(True, 3), flaky=(False, 5)),
                             {"pid": 3}]},
        "llm": {"workers": [worker(fetch=(True, 1))]}}}
    samples = _samples(stats)
    assert {name: samples[("pegasus_mcp_server_up", (("server", name),))] for name in ("time", "fetch", "flaky")} == \
        {"time": 1, "fetch": 1, "flaky": 0}  # flaky: one copy of two down
    assert {name: samples[("pegasus_mcp_tool_errors_total", (("server", name),))]
            for name in ("time", "fetch", "flaky")} == {"time": 1, "fetch": 6, "flaky": 5}


def test_a_worker_copy_not_started_or_starting_says_nothing_of_its_server() -> None:
    """An llm worker whose last stage came before its copy was up (seen as a /metrics 0 for an up server)."""
    def copy(phase: str, errors: int = 0) -> dict:
        return {"phase": phase, "up": phase == "ready", "tool_errors": errors}
    stats = {"pools": {"tool": {"workers": [{"mcp": {"time": copy("ready", 2), "broken": copy("failed"),
                                                     "later": copy("starting")}}]},
                       "llm": {"workers": [{"mcp": {"time": copy("starting"), "broken": copy("idle"),
                                                    "later": copy("idle")}}]}}}
    samples = _samples(stats)
    assert {name: samples[("pegasus_mcp_server_up", (("server", name),))] for name in ("time", "broken", "later")} \
        == {"time": 1, "broken": 0, "later": 0}  # later: no copy up yet
    assert samples[("pegasus_mcp_tool_errors_total", (("server", "time"),))] == 2
