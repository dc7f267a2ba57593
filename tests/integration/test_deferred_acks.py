"""speed/deferred_acks.py on real systems (multiprocTCPBase, the patches installed): a sender whose acknowledgement
waits for a pass that happens anyway still gets its peer's answer behind it, its send's callback at the next pass,
and notices a peer killed before it acknowledged -- all without being asked (what it hears is written to a file)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.deferred_ack_actors import Answerer, Caller

ASK = 60  # seconds: a bound for a loaded machine, never a guess at how long it takes


def _until_written(path: Path, line: str) -> list[str]:
    """The lines of ``path`` once ``line`` is among them (waits for the condition, bounded for a loaded machine)."""
    deadline = time.monotonic() + ASK
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if line in lines:
            return lines
        time.sleep(0.02)
    raise AssertionError(f"{line!r} never written to {path}: {lines}")


def _until_told(asys, caller, lines_wanted: list[str]) -> None:
    """Until the caller has written ``lines_wanted``: each ask is a pass of its loop, which reads an arrived
    acknowledgement (bounded for a loaded machine)."""
    deadline = time.monotonic() + ASK
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = asys.ask(caller, "lines", ASK)
        if lines == lines_wanted:
            return
        assert lines == lines_wanted[:len(lines)], lines
        time.sleep(0.02)
    raise AssertionError(f"{lines_wanted} never written: {lines}")


def test_the_answer_behind_a_deferred_acknowledgement_arrives_and_the_callback_runs_at_the_next_pass(
        tcp_system, tmp_path: Path) -> None:
    _spec, asys = tcp_system
    caller, answerer = asys.createActor(Caller), asys.createActor(Answerer)
    assert asys.ask(caller, ("warm", answerer), ASK) == "warm"
    heard = tmp_path / "heard"
    assert asys.ask(caller, ("call", answerer, str(heard), "plain"), ASK) is True  # its acknowledgement waits
    asys.tell(answerer, "answer now")  # over the question's own connection, behind the acknowledgement
    assert _until_written(heard, "answer") == ["answer"]

    told = tmp_path / "told"
    assert asys.ask(caller, ("call", answerer, str(told), "then"), ASK) is True
    assert told.read_text().splitlines()[:1] == ["left"]  # at once: written whole
    _until_told(asys, caller, ["left", "left"])  # and again at a pass after its acknowledgement
    assert asys.ask(caller, ("call", answerer, str(told), "told"), ASK) is True
    _until_told(asys, caller, ["left", "left", "sent"])


def test_a_peer_killed_before_it_acknowledged_is_noticed_by_a_sender_whose_acknowledgement_waits(
        tcp_system, tmp_path: Path) -> None:
    _spec, asys = tcp_system
    caller, answerer = asys.createActor(Caller), asys.createActor(Answerer)
    pid = asys.ask(answerer, "pid", ASK)
    assert asys.ask(caller, ("warm", answerer), ASK) == "warm"
    heard = tmp_path / "heard"
    os.kill(pid, signal.SIGSTOP)  # it never reads the question, so never acknowledges it
    try:
        assert asys.ask(caller, ("call", answerer, str(heard), "told"), ASK) is True
    finally:
        os.kill(pid, signal.SIGKILL)
    assert _until_written(heard, "failed") == ["failed"]  # its end wakes the sender: retried, then refused
