"""benchmarks/coldpass.py: each pass of a loop is summed under how long its poll waited (a wait inside it apart),
a forked process writes only its own passes, and a recording wraps Thespian's poll only while it is open."""

from __future__ import annotations

import os
from pathlib import Path

from actors.wire.thespian_patches.speed.poll_selector import PollSet
from benchmarks import coldpass


class _Clocks:
    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def run(self, cpu_s: float, off_cpu_s: float = 0.0) -> None:
        self.cpu += cpu_s
        self.wall += cpu_s + off_cpu_s


def test_passes_are_summed_by_the_polls_wait_and_a_fork_writes_only_its_own(tmp_path: Path) -> None:
    clocks = _Clocks()
    passes = coldpass._Passes(tmp_path, clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)
    passes.polling()  # the loop's first poll: no pass before it
    clocks.run(0.0, 0.030)
    passes.polled(0)  # it waited 30 ms (a timer): the pass after it ran 1 ms
    clocks.run(0.001)
    passes.polling()
    passes.polled(1)  # at once, a message: its pass waited 50 ms off the CPU inside (a worker's model)
    clocks.run(0.002, 0.050)
    child = os.fork()
    if child == 0:
        try:
            passes.polling()  # the parent's pass is not the child's
            passes.polled(2)
            clocks.run(0.0005)
            passes.polling()
            passes.dump()
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    passes.polling()
    passes.dump()
    assert sorted(path.name for path in tmp_path.glob("*.json")) == sorted([f"{os.getpid()}.json", f"{child}.json"])
    assert coldpass.read(tmp_path)["other"] == {  # a test process's title is not a Pegasus one
        "< 1 ms": {"passes": 1, "cpu_us_a_pass": 500.0, "ready_a_pass": 2.0},  # the child's own only
        ">= 20 ms": {"passes": 1, "cpu_us_a_pass": 1000.0, "ready_a_pass": 0.0},
        "< 1 ms, a wait inside": {"passes": 1, "cpu_us_a_pass": 2000.0, "ready_a_pass": 1.0},
    }


def test_a_recording_wraps_thespians_poll_while_open(tmp_path: Path) -> None:
    original = PollSet.select
    with coldpass.recording(tmp_path):
        poll = PollSet()
        poll.select(0)
        poll.select(0)  # one pass between them, written at once (the first of a process)
    assert PollSet.select is original
    rows = coldpass.read(tmp_path)["other"]
    assert sum(row["passes"] for row in rows.values()) == 1


def test_touching_pages_is_measured_after_each_sleep() -> None:
    figures = coldpass.touch_cost(pages=8, away_ms=(0.0, 1.0), repeats=3)
    assert set(figures) == {"0 ms", "1 ms"} and all(us > 0 for us in figures.values())
