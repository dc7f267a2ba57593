"""The inflight benchmark stops a run that would hang or exhaust the host and reports it; its system is shut down
(``pegasus_system`` raises if any of its processes survived)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import inflight

pytestmark = pytest.mark.integration

SLOW = {"latency_ms": 2000.0, "llm_workers": 1, "tool_workers": 1}  # 8 tasks: ~64 s of llm stages


def _stopped_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for row in inflight.checks_for(result) if "STOPPED" in row["metric"]]


def test_a_run_past_its_timeout_is_reported_stopped() -> None:
    result = inflight.measure(8, SLOW, timeout=3.0)
    assert result["stopped"] == "timeout after 3 s"
    assert result["done"] < 8 and "completion_s" not in result  # no completion figure for a run that did not end
    assert result["peak_processes"] >= result["idle_processes"] and result["peak_pss_mib"] > 0
    assert _stopped_rows(result) and inflight.checks_for(result)[0]["met"] is False


def test_the_memory_guard_stops_a_run_before_it_exhausts_the_host() -> None:
    result = inflight.measure(8, SLOW, timeout=600.0, guard_kib=1)  # any system passes 1 KiB
    assert result["stopped"].startswith("memory guard: "), result["stopped"]
    assert result["done"] < 8 and _stopped_rows(result)
