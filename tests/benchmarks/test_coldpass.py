"""benchmarks/coldpass.py: each pass of a loop is summed under how long its poll waited (a wait inside it apart) and
what it read, a forked process writes only its own passes, and a recording wraps Thespian's poll only while it is
open."""

from __future__ import annotations

import os
from pathlib import Path

from types import SimpleNamespace

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
    envelopes = coldpass._Counted()
    passes.polling(envelopes)  # the loop's first poll: no pass before it
    clocks.run(0.0, 0.030)
    passes.polled([])  # it waited 30 ms (a timer): the pass after it ran 1 ms
    clocks.run(0.001)
    passes.polling(envelopes)
    passes.polled(["incoming", "ack"])  # at once, a message and an ack: its pass waited 50 ms off the CPU inside
    envelopes.append("message")
    clocks.run(0.002, 0.050)
    child = os.fork()
    if child == 0:
        try:
            passes.polling(envelopes)  # the parent's pass is not the child's
            passes.polled(["ack", "ack"])
            clocks.run(0.0005)
            passes.polling(envelopes)
            passes.dump()
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    passes.polling(envelopes)
    passes.dump()
    assert sorted(path.name for path in tmp_path.glob("*.json")) == sorted([f"{os.getpid()}.json", f"{child}.json"])
    assert coldpass.read(tmp_path)["other"] == {  # a test process's title is not a Pegasus one
        "< 1 ms | ack only": {"passes": 1, "cpu_us_a_pass": 500.0, "ready_a_pass": 2.0},  # the child's own only
        ">= 20 ms | nothing": {"passes": 1, "cpu_us_a_pass": 1000.0, "ready_a_pass": 0.0},
        "< 1 ms, a wait inside | 1 message + ack": {"passes": 1, "cpu_us_a_pass": 2000.0, "ready_a_pass": 2.0},
    }
    assert coldpass.by_what(coldpass.read(tmp_path)["other"], tasks=2) == {
        "1 message + ack": {"passes_a_task": 0.5, "cpu_us_a_pass": 2000.0, "cpu_ms_a_task": 1.0},
        "nothing": {"passes_a_task": 0.5, "cpu_us_a_pass": 1000.0, "cpu_ms_a_task": 0.5},
        "ack only": {"passes_a_task": 0.5, "cpu_us_a_pass": 500.0, "cpu_ms_a_task": 0.25},
    }


def test_a_pass_is_named_by_what_its_poll_returned_and_the_messages_it_took_in() -> None:
    assert coldpass.what_of([], 0) == "nothing"
    assert coldpass.what_of(["ack", "ack"], 0) == "ack only"
    assert coldpass.what_of(["accept", "send", "accept"], 0) == "other: accept, send"
    assert coldpass.what_of(["incoming"], 1) == "1 message"
    assert coldpass.what_of(["incoming", "ack"], 2) == "2 messages + ack"
    assert coldpass.what_of([], 5) == "3+ messages"  # one sent to itself, read without a descriptor
    sock = lambda fd: SimpleNamespace(fileno=lambda: fd)  # noqa: E731
    transport = SimpleNamespace(
        socket=sock(3), _openSockets={"peer": SimpleNamespace(socket=sock(7))}, _incomingSockets={5: object()},
        _transmitIntents={8: SimpleNamespace(stage=coldpass.WAIT_FOR_ACK), 9: SimpleNamespace(stage=2)})
    assert coldpass.ready_kinds(transport, [3, 5, 7, 8, 9, 11]) == ["accept", "incoming", "incoming", "ack", "send",
                                                                     "other"]


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
