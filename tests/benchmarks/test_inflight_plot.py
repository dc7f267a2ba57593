"""The inflight scenario's pure parts -- its bound, its sizes, its target rows -- and its chart (benchmarks.charts)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks import charts, inflight


def _run(tasks: int, pss: float, tasks_per_s: float | None, stopped: str = "") -> dict[str, Any]:
    run: dict[str, Any] = {"tasks": tasks, "peak_pss_mib": pss, "stopped": stopped, "done": 0 if stopped else tasks,
                           "idle_pss_mib": 100.0, "idle_processes": 206, "processes_at_peak_pss": 206 + tasks,
                           "peak_processes": 206 + tasks, "peak_task_actors": tasks, "task_actor_ceiling": None,
                           "system_start_s": 10.0, "submit_s": 1.0, "cpu_ms_per_task": 30.0,
                           "machine_busy": 0.9, "load_average": [[2.0, 1.0, 1.0], [4.0, 2.0, 1.0]]}
    if tasks_per_s is not None:
        run.update(tasks_per_s=tasks_per_s, bound_tasks_per_s=12.5, completion_s=tasks / tasks_per_s,
                   bound_s=tasks / 12.5, ratio=tasks_per_s / 12.5)
    return run


def _report(path: Path, commit: str, runs: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"mode": "full", "machine": {"git_commit": commit, "git_dirty": False},
                                "scenarios": {"inflight": {"figures": {"runs": runs}, "checks": []}}}))
    return path


def test_bound_is_the_slowest_pool_or_one_tasks_chain() -> None:
    """4 llm stages on 100 workers set 1,000 tasks' bound; a few tasks are bound by their own chain of stages."""
    many = inflight.bound_s(1000, {"llm": 4.0, "tool": 2.0}, {"llm": 100, "tool": 100}, 2.0)
    assert many["pools_s"] == {"llm": 80.0, "tool": 40.0} and many["bound_s"] == 80.0 and many["set_by"] == "llm"
    few = inflight.bound_s(10, {"llm": 4.0, "tool": 2.0}, {"llm": 100, "tool": 100}, 2.0)
    assert few["chain_s"] == 12.0 and few["bound_s"] == 12.0 and few["set_by"] == "chain"


def test_sizes_come_from_the_environment_and_bad_ones_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(inflight.SIZES_ENV, raising=False)
    assert inflight.sizes_from_env(quick=False) == (150, 1000, 5000)
    assert inflight.sizes_from_env(quick=True) == (inflight.QUICK_SIZE,)
    monkeypatch.setenv(inflight.SIZES_ENV, "150, 1000")
    assert inflight.sizes_from_env(quick=False) == (150, 1000)
    for bad in ("many", "0", ","):
        monkeypatch.setenv(inflight.SIZES_ENV, bad)
        with pytest.raises(ValueError, match=inflight.SIZES_ENV):
            inflight.sizes_from_env(quick=False)


def test_targets_are_reported_met_or_not_and_a_stopped_run_says_why() -> None:
    rows = {row["metric"].split(" (")[0]: row for row in inflight.checks_for(_run(1000, 7000.0, 9.0))}
    assert rows["N=1000: ratio bound / completion"]["met"] is False  # 9 / 12.5 = 0.72 < 0.9
    assert rows["N=1000: peak total PSS"]["met"] is False and rows["N=1000: peak total PSS"]["target"] == "<= 2560"
    assert rows["N=1000: peak processes"]["met"] is False  # no task-actor ceiling: one process per task
    stopped = inflight.checks_for(_run(5000, 14000.0, None, stopped="memory guard: system PSS 14000 MiB > 13000 MiB"))
    assert stopped[0]["met"] is False and "STOPPED (memory guard" in stopped[1]["metric"]
    pss = next(row for row in stopped if row["metric"].startswith("N=5000: peak total PSS"))
    assert pss["met"] is False  # under the target or not, a run that did not complete does not meet it
    assert all(row["value"] is not None for row in stopped)
    assert math.isnan(next(row for row in stopped if "completion" in row["metric"])["value"])


def test_plot_draws_pss_and_throughput_against_tasks_in_flight(tmp_path: Path) -> None:
    """Two reports (sizes run separately share a label and join up): one line each, a stopped run hollow."""
    before_a = _report(tmp_path / "a.json", "aaaaaaaa11", [_run(150, 3180.0, 7.9)])
    before_b = _report(tmp_path / "b.json", "aaaaaaaa11", [_run(1000, 11000.0, 8.5), _run(5000, 14000.0, None, "guard")])
    after = _report(tmp_path / "c.json", "bbbbbbbb22", [_run(150, 600.0, 12.0), _run(1000, 900.0, 12.3)])
    lines = charts.series([charts.load(str(before_a)), charts.load(str(before_b)),
                           charts.load(f"{after}=virtual task actors")])
    assert list(lines) == ["commit aaaaaaaa", "virtual task actors"]
    fig = charts.inflight_chart(lines)
    pss, throughput = fig.axes
    joined = [line for line in pss.get_lines() if len(line.get_xdata()) > 1]
    assert sorted(len(line.get_xdata()) for line in joined) == [2, 3]  # before: 150, 1,000, 5,000; after: two
    hollow = [line for line in pss.get_lines() if line.get_markerfacecolor() == "white"]
    assert [(line.get_xdata()[0], line.get_ydata()[0]) for line in hollow] == [(5000, 14000.0)]  # the stopped run
    # Throughput: measured (circles) and the bound (dashed squares), completed runs only: 2 of before, 2 of after.
    assert sorted((line.get_marker(), len(line.get_xdata())) for line in throughput.get_lines()) == [
        ("o", 2), ("o", 2), ("s", 2), ("s", 2)]
    assert "≤ 2,560" in [text.get_text() for text in pss.texts]
    out = tmp_path / "inflight.svg"
    assert charts.main([str(before_a), str(before_b), f"{after}=virtual task actors", str(out)]) == 0
    picture = out.read_text(encoding="utf-8")
    assert picture.lstrip().startswith("<?xml") and "<svg" in picture
    assert "commit aaaaaaaa" in picture and "virtual task actors" in picture and "5,000" in picture


def test_repeated_runs_of_one_size_draw_their_median() -> None:
    """A noisy host: three runs of N=1000 under one label draw the middle one by throughput."""
    runs = [_run(1000, pss, tps) for pss, tps in ((11000.0, 5.1), (11800.0, 8.6), (11200.0, 8.0))]
    report = {"scenarios": {"inflight": {"figures": {"runs": runs}}}}
    (point,) = charts.series([("main", report)])["main"]
    assert point["tasks_per_s"] == 8.0 and point["pss_mib"] == 11200.0


def test_plot_refuses_a_report_without_the_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"machine": {}, "scenarios": {"hop": {}}}))
    assert charts.main([str(other), str(tmp_path / "out.svg")]) == 2
    assert "no 'inflight' scenario" in capsys.readouterr().err
    assert not (tmp_path / "out.svg").exists()


def test_the_llm_pools_occupancy_says_its_idle_seconds_and_its_tails_idle_share() -> None:
    """Two workers: both busy 0-2 s, one 2-4 s, one 5-6 s: 2.5 whole-pool seconds idle of 6; the last 1.5 s
    (a quarter) two-thirds idle."""
    figures = inflight.occupancy([(0, 2), (0, 2), (2, 4), (5, 6)], 2)
    assert (figures["span_s"], figures["idle_s"], figures["tail_s"], figures["tail_idle_share"]) == (6, 2.5, 1.5, 0.667)
    assert figures["busy_share_by_bin"] == [1.0, 0.5, 0.25]


def test_a_reflection_within_the_pools_span_is_busy_time_not_idle() -> None:
    """The same pool, a reflection on the idle worker 4-5 s and one after the last stage (not in the span): 1.5
    whole-pool seconds idle; the tail half idle (two-thirds without it)."""
    figures = inflight.occupancy([(0, 2), (0, 2), (2, 4), (5, 6)], 2, reflections=[(4, 5), (6, 8)])
    assert (figures["span_s"], figures["idle_s"], figures["tail_idle_share"], figures["reflections_s"]) == \
        (6, 2.0, 0.5, 1.0)
    assert figures["busy_share_by_bin"] == [1.0, 0.5, 0.5]


def test_the_control_processes_time_waiting_for_a_cpu_is_given_beside_the_ratio() -> None:
    """On a host too busy to run the hops, the wait for a CPU says so (schedstat, per kind), as does the tool
    pool's start beside the llm pool's (the order's part in the tail)."""
    before = {1: ("supervisor", 1_000_000_000, 2_000_000_000)}
    after = {1: ("supervisor", 3_000_000_000, 5_000_000_000), 2: ("task actor", 1_000_000_000, 500_000_000)}
    waits = inflight.cpu_waits(before, after)
    assert waits == {"supervisor": {"run_s": 2.0, "wait_s": 3.0}, "task actor": {"run_s": 1.0, "wait_s": 0.5}}
    run = {**_run(600, 1700.0, 10.0), "control_cpu": waits,
           "tool_pool": {"first_after_llm_s": 21.0, "span_s": 30.0, "idle_s": 5.0}}
    rows = {row["metric"].split(" (")[0]: row["value"] for row in inflight.checks_for(run)}
    assert rows["N=600: waited for a CPU while runnable, supervisor, task actors and pools"] == 3.5
    assert rows["N=600: tool pool: its first stage after the llm pool's first"] == 21.0
