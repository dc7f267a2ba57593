"""benchmarks/wirefloor.py: the floor probe runs on a real multiprocTCPBase system and accounts both processes."""

from __future__ import annotations

from benchmarks import wirefloor


def test_the_floor_probe_accounts_both_processes_of_each_round() -> None:
    figures = wirefloor.measure(5, (0.0,), repeats=1)["gap 0 ms"]
    assert figures["asker_us_a_round"] > 0 and figures["answerer_us_a_round"] > 0
    assert abs(figures["both_us_a_message"] * wirefloor.MESSAGES_A_ROUND - figures["both_us_a_round"]) < 1
    assert figures["wakeups_a_round"] >= 0
