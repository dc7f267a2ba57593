"""Which memory rows need a vector, how the background job takes them in bounded batches and backs off, and how
full text and vectors are fused (issue 29): policy over real SQLite files, no actor system."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pegasus.config import MemorySettings
from pegasus.memory import MemoryStore
from pegasus.memory.embeddings import fuse, pack
from pegasus.memory.values import Episode
from pegasus.memory.vectors import (MAX_BACKOFF, STALE_AFTER, Backfill, episode_text, fact_text, has_vector, missing,
                                    missing_count, store_vectors)
from pegasus.store import Store

V = pack([1.0, 0.0, 0.5])
MODEL = "e5-small"


def memory(tmp_path: Path, model: str = MODEL) -> MemoryStore:
    return MemoryStore(Store(tmp_path / "pegasus.db"), MemorySettings(embeddings_model=model))


def test_rows_without_a_vector_are_the_current_facts_and_the_episodes_that_lack_one(tmp_path: Path) -> None:
    store = memory(tmp_path)
    db = store.database.db
    store.write_fact("a", "first")
    store.write_fact("a", "second")  # version 1 is not current: it needs none
    store.write_fact("b", "with a vector", vector=V)
    store.write_fact("c", "forgotten soon")
    store.forget("c")
    episode = store.add_episode("t1", "Deploy", "shipped it", lesson="check the key")
    assert [(p.kind, p.ref, p.version, p.text) for p in missing(db, 10, MODEL)] == [
        ("fact", "a", 2, fact_text("second")), ("episode", str(episode.episode_id), 0,
                                                 episode_text("Deploy", "shipped it", "", "check the key"))]
    assert missing_count(db, MODEL) == 2
    assert [p.kind for p in missing(db, 1, MODEL)] == ["fact"]  # bounded: a batch never reads more than it takes


def test_a_vector_is_kept_only_where_the_row_still_holds_the_text_embedded(tmp_path: Path) -> None:
    store = memory(tmp_path)
    store.write_fact("a", "old text")
    store.write_fact("b", "stays")
    episode = store.add_episode("t1", "Title", "summary")
    rows = missing(store.database.db, 10, MODEL)
    store.write_fact("a", "new text")  # a new version while the batch was out: its vector is of the old text
    store.update_episode(Episode(episode.episode_id, "t1", "Title", "edited summary", "", "", episode.created_at))
    assert store_vectors(store.database, rows, [V, V, V], MODEL) == 1
    db = store.database.db
    assert has_vector(db, "fact", "b", MODEL) and not has_vector(db, "fact", "a", MODEL)
    assert not has_vector(db, "episode", str(episode.episode_id), MODEL)
    assert {p.ref for p in missing(db, 10, MODEL)} == {"a", str(episode.episode_id)}  # the next batch takes them


def test_writing_the_same_content_again_gives_a_row_without_a_vector_its_vector(tmp_path: Path) -> None:
    """The regression of issue 29: a fact written while the endpoint was down said "unchanged" when written again
    and never got its vector."""
    store = memory(tmp_path)
    first = store.write_fact("garage/parking", "The automobile is in bay 4.")
    again = store.write_fact("garage/parking", "The automobile is in bay 4.", vector=V)
    assert again.version == first.version  # unchanged: no new version
    assert has_vector(store.database.db, "fact", "garage/parking", MODEL)
    store.write_fact("garage/parking", "The automobile is in bay 4.", vector=pack([0.0, 1.0, 0.0]))
    blob = store.database.db.execute("SELECT vector FROM memory_facts WHERE current = 1").fetchone()[0]
    assert blob == V  # a vector it has is not replaced by a write of the same content


def test_the_background_job_takes_one_bounded_batch_at_a_time_and_goes_on_at_once_after_a_full_one() -> None:
    job = Backfill(interval_s=10, batch=2, timeout_s=5)
    assert job.arm() and not job.arm()  # one timer at a time, however often the supervisor restores
    assert job.due(now=0.0)
    rows = [object(), object(), object()]
    token = job.start(rows, now=0.0)  # type: ignore[arg-type]
    assert token == 1 and len(job.in_flight) == 2
    assert job.start(rows, now=1.0) is None  # type: ignore[arg-type]  # one batch in flight
    assert not job.due(now=1.0)  # its answer is awaited
    kept, more = job.answered(1, True, None, "t")
    assert len(kept) == 2 and more  # a full batch: look again at once
    assert job.start([], now=2.0) is None  # nothing left: no request


def test_a_failing_endpoint_is_asked_less_and_less_often_and_a_lost_batch_is_given_up() -> None:
    job = Backfill(interval_s=10, batch=4, timeout_s=5)
    delays = []
    for attempt in range(8):
        assert job.due(now=attempt * 1000.0)
        token = job.start([object()], now=attempt * 1000.0)  # type: ignore[list-item]
        assert token is not None
        assert job.answered(token, False, "unreachable", "t") == ([], False)
        delays.append(job.next_delay())
    assert delays == [20, 40, 80, 160, 320, 320, 320, 320]
    assert job.view()["last_error"] == "unreachable" and not job.view()["healthy"]
    token = job.start([object()], now=10_000.0)  # type: ignore[list-item]
    assert not job.due(now=10_000.0 + STALE_AFTER * 5 - 1)  # still awaited
    assert job.due(now=10_000.0 + STALE_AFTER * 5)  # lost (its pool died with it): given up
    assert job.answered(token or 0, True, None, "t") == ([], False)  # its late answer is ignored
    token = job.start([object()], now=20_000.0)  # type: ignore[list-item]
    job.answered(token or 0, True, None, "t")
    assert job.next_delay() == 10 and job.view()["healthy"]  # one success: the interval again


@given(st.integers(min_value=0, max_value=10_000), st.floats(min_value=0.001, max_value=86400))
def test_the_wait_between_batches_is_bounded_whatever_the_failures(failures: int, interval: float) -> None:
    job = Backfill(interval_s=interval, batch=1, timeout_s=1, failures=failures)
    assert interval <= job.next_delay() <= interval * MAX_BACKOFF


def test_fusion_ranks_by_both_lists_and_keeps_what_either_found() -> None:
    text = [("fact", "a", 9.0), ("fact", "b", 5.0)]
    vectors = [("fact", "c", 0.9), ("fact", "a", 0.8), ("fact", "b", 0.1)]
    fused = [ref for _, ref, _ in fuse(text, vectors)]
    assert fused[0] == "a"  # near the top of both
    assert set(fused) == {"a", "b", "c"}
    assert [ref for _, ref, _ in fuse([], vectors)] == ["c", "a", "b"]  # no shared word: the vectors' order


def test_nearest_ranks_alike_with_and_without_numpy_and_leaves_out_another_models_vectors(monkeypatch) -> None:
    """numpy is the fast path (the embeddings extra); pure Python must rank the same."""
    import random
    import sys

    from pegasus.memory.embeddings import nearest

    rng = random.Random(7)
    query = [rng.gauss(0, 1) for _ in range(16)]
    rows = [("episode", str(i), pack([rng.gauss(0, 1) for _ in range(16)])) for i in range(50)]
    rows.append(("fact", "other-model", pack([1.0, 2.0, 3.0])))
    fast = nearest(rows, query, 10)
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy fails
    slow = nearest(rows, query, 10)
    assert [r[:2] for r in fast] == [r[:2] for r in slow] and len(fast) == 10
    assert all(abs(a[2] - b[2]) < 1e-5 for a, b in zip(fast, slow))
    assert "other-model" not in [ref for _, ref, _ in nearest(rows, query)]


def test_after_a_failed_call_recalls_do_not_ask_the_endpoint_until_the_wait_passes() -> None:
    """A hung endpoint costs one timeout, not one per recall (each would hold an llm worker that long)."""
    from pegasus.memory.vectors import Breaker

    breaker = Breaker()
    assert breaker.closed(now=0.0)
    breaker.failed(now=100.0, wait=20.0, error="did not answer within 10s")
    assert not breaker.closed(now=119.9) and breaker.error == "did not answer within 10s"
    assert breaker.closed(now=120.0)  # then one recall asks again
    breaker.failed(now=120.0, wait=40.0, error="again")
    breaker.succeeded()  # e.g. the background job's batch went through
    assert breaker.closed(now=121.0) and breaker.error is None


def test_metrics_show_rows_without_a_vector_a_failing_endpoint_and_recalls_by_full_text_alone() -> None:
    from pegasus.gateway.metrics import GatewayMetrics  # noqa: PLC0415 - the gateway's, only here

    text = GatewayMetrics().render({"embeddings": {"model": "e5", "rows_without_vector": 3, "healthy": False,
                                                   "recall_without_vector": 2, "search_without_vector": 4}}).decode()
    assert 'pegasus_memory_rows_without_vector{model="e5"} 3.0' in text
    assert 'pegasus_embeddings_failing{model="e5"} 1.0' in text
    assert 'pegasus_recall_without_vector_total{model="e5"} 2.0' in text
    assert 'pegasus_memory_search_without_vector_total{model="e5"} 4.0' in text
    assert 'model="' not in GatewayMetrics().render({"embeddings": None}).decode()  # off: no sample
