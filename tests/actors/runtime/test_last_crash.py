"""The guardian names what a supervisor died of outside its handlers: the exception Thespian logged for its pid."""

from __future__ import annotations

from pathlib import Path

from actors.guardian import last_crash

LOG = """2026-11-26 05:02:11.624262 p14919 ERR  Socket error sending to ActorAddr-(T|:34785)
2026-11-26 05:02:12.000000 p777 ERR  Actor <class 'actors.supervisor.Supervisor'> @ ActorAddr-(T|:1) transport run \
exception: Traceback (most recent call last):
  File "thespian/system/transport/TCPTransport.py", line 1200, in _runWithExpiry
    rrecv, rsend, _ = select.select(wrecv, wsend, wexc, delay)
OverflowError: timestamp too large to convert to C _PyTime_t

2026-11-26 05:02:13.000000 p14919 ERR  another record
"""


def test_the_last_line_of_the_pids_traceback_is_named(tmp_path: Path) -> None:
    log = tmp_path / "thespian.log"
    log.write_text("x" * 100_000 + "\n" + LOG)  # only the tail is read
    assert last_crash(log, 777) == "OverflowError: timestamp too large to convert to C _PyTime_t"


def test_nothing_is_named_without_such_a_record(tmp_path: Path) -> None:
    log = tmp_path / "thespian.log"
    log.write_text(LOG)
    assert last_crash(log, 14919) is None  # its records are not a crash
    assert last_crash(log, 5) is None and last_crash(log, None) is None
    assert last_crash(tmp_path / "missing.log", 777) is None
