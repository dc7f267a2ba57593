"""benchmarks/spyprof.py: a py-spy profile's samples split by part and handler, the poll's wait left out."""

from __future__ import annotations

from pathlib import Path

from benchmarks import spyprof

LOOP = "wakeupTransportBase.run (thespian/system/transport/wakeupTransportBase.py:60)"
HANDLE = "Supervisor._handle (actors/supervisor/carrier.py:193)"


def test_samples_go_to_their_innermost_part_and_handler_and_the_poll_is_left_out(tmp_path: Path) -> None:
    raw = tmp_path / "supervisor.raw"
    raw.write_text("\n".join((
        f"main (x.py:1);{LOOP};PollSet.select (actors/wire/thespian_patches/speed/poll_selector.py:59) 50",
        f"main (x.py:1);{LOOP};{HANDLE};task_reports (actors/supervisor/runs.py:18);"
        "Store.cognitive_transition (pegasus/store/sqlite.py:150) 6",
        f"main (x.py:1);{LOOP};{HANDLE};task_reports (actors/supervisor/runs.py:18);"
        "Store.cognitive_transition (pegasus/store/sqlite.py:150);packb (msgpack/__init__.py:30) 2",
        f"main (x.py:1);{LOOP};Supervisor._batch (actors/supervisor/carrier.py:153);"
        "Database.release (pegasus/store/database.py:234);Database._end (pegasus/store/database.py:109) 4",
        f"main (x.py:1);{LOOP};AuthenticatedBuffer.completed (actors/wire/thespian_patches/security/frame_auth.py:103) 8",
        "main (x.py:1);startup (thespian/system/actorManager.py:1) 30",  # before the loop: not the actor's work
    )) + "\n", encoding="utf-8")
    found = spyprof.split(raw)
    assert found["busy_samples"] == 20
    assert found["parts"] == {"frames: MAC, unpickle": 0.4, "store": 0.3, "SQLite COMMIT": 0.2, "pickle, msgpack": 0.1}
    assert found["handlers"] == {"task_reports": 0.4, "outside handlers (receive, MAC, unpickle, acks)": 0.4,
                                 "Supervisor._batch > Database.release": 0.2}


def test_without_py_spy_nothing_is_recorded(tmp_path: Path, monkeypatch: object) -> None:
    monkeypatch.setattr(spyprof.shutil, "which", lambda name: None)  # type: ignore[attr-defined]
    with spyprof.recording(1, tmp_path / "x.raw") as running:
        assert running is False
    assert not (tmp_path / "x.raw").exists()


def test_a_workers_simulated_latency_is_a_wait_and_its_samples_go_to_its_handler_or_a_delivery_callback(
        tmp_path: Path) -> None:
    """A worker forked from the pool (whose loop is in its stack too) at L = 50 ms (issue 33)."""
    parent = f"main (x.py:1);{LOOP};{HANDLE};StagePool.receiveMsg_PoolConfig (actors/pool.py:90);{LOOP}"
    work = "StageWorker.receiveMsg_Work (actors/worker.py:151);StageWorker._run_now (actors/worker.py:227)"
    left = "ResultCallback.resultCallback (thespian/system/transport/__init__.py:40);StageWorker._left (actors/worker.py:270)"
    raw = tmp_path / "llm worker.raw"
    raw.write_text("\n".join((
        f"{parent};{work};_simulated_latency (actors/worker.py:385) 70",
        f"{parent};{left};{work};_simulated_latency (actors/worker.py:385) 20",
        f"{parent};{work};run_stage (pegasus/cognitive/stages.py:80) 3",
        f"{parent};{left};StageWorker._free (actors/worker.py:290);_serialize (actors/wire/thespian_patches/security/frame_auth.py:60) 1",
        f"{parent};TCPTransport._next_XMIT_2 (thespian/system/transport/TCPTransport.py:891) 6",
    )) + "\n", encoding="utf-8")
    found = spyprof.split(raw)
    assert found["busy_samples"] == 10
    assert found["handlers"] == {"outside handlers (receive, MAC, unpickle, acks)": 0.6,
                                 "StageWorker.receiveMsg_Work": 0.3, "delivery callbacks": 0.1}
    assert found["parts"] == {"Thespian loop and transport": 0.6, "the actor's own code (actors/, pegasus/)": 0.3,
                              "pickle, msgpack": 0.1}
