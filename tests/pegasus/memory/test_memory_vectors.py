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
from pegasus.memory.vectors import (
    MAX_BACKOFF, STALE_AFTER, Ask, Asking, Backfill, BatchAnswered, BatchFailed, Breaker, Due, EmbedAnswered, Kept,
    NotAsked, Pending, ReadRows, Restored, RowsRead, SendBatch, StoreVectors, WakeIn, episode_text, fact_text,
    has_vector, missing, missing_count, store_vectors,
)
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


def rows(n: int) -> tuple[Pending, ...]:
    return tuple(Pending("fact", f"p{i}", 1, f"text {i}") for i in range(n))


def sent(job: Backfill, count: int, now: float) -> SendBatch:
    """The timer fires at ``now`` and ``count`` rows are found: the batch sent."""
    assert ReadRows(job.batch) in job.step(Due(now))
    [batch] = job.step(RowsRead(rows(count), now))
    assert isinstance(batch, SendBatch)
    return batch


def test_the_background_job_takes_one_bounded_batch_at_a_time_and_goes_on_at_once_after_a_full_one() -> None:
    job = Backfill(interval_s=10, batch=2, timeout_s=5)
    assert job.step(Restored()) == [WakeIn(10)] and job.step(Restored()) == []  # one timer, however many restores
    assert job.step(Due(0.0)) == [ReadRows(2), WakeIn(10)]
    [batch] = job.step(RowsRead(rows(3), 0.0))
    assert batch == SendBatch(1, rows(2), 5) and len(job.in_flight) == 2
    assert job.step(RowsRead(rows(3), 1.0)) == []  # one batch in flight
    assert job.step(Due(1.0)) == [WakeIn(10)]  # its answer is awaited: not looked for
    assert job.step(BatchAnswered(1, True, 2, None, "t")) == [StoreVectors(rows(2))]
    assert job.step(Kept(2)) == [ReadRows(2)]  # a full batch kept: look again at once
    assert job.step(RowsRead((), 2.0)) == [] and job.view()["filled"] == 2  # nothing left: no request
    batch = sent(job, 1, 3.0)
    assert job.step(BatchAnswered(batch.token, True, 1, None, "t")) == [StoreVectors(rows(1))]
    assert job.step(Kept(1)) == []  # not full: the timer looks next
    batch = sent(job, 2, 4.0)
    assert job.step(BatchAnswered(batch.token, True, 1, None, "t")) == []  # vectors that do not fit: none kept


def test_a_failing_endpoint_is_asked_less_and_less_often_and_a_lost_batch_is_given_up() -> None:
    job = Backfill(interval_s=10, batch=4, timeout_s=5)
    delays = []
    for attempt in range(8):
        batch = sent(job, 1, attempt * 1000.0)
        [failed] = job.step(BatchAnswered(batch.token, False, 0, "unreachable", "t"))
        assert failed == BatchFailed("unreachable", job.next_delay())
        delays.append(job.next_delay())
    assert delays == [20, 40, 80, 160, 320, 320, 320, 320]
    assert job.view()["last_error"] == "unreachable" and not job.view()["healthy"]
    batch = sent(job, 1, 10_000.0)
    assert ReadRows(4) not in job.step(Due(10_000.0 + STALE_AFTER * 5 - 1))  # still awaited
    assert ReadRows(4) in job.step(Due(10_000.0 + STALE_AFTER * 5))  # lost (its pool died with it): given up
    assert job.step(BatchAnswered(batch.token, True, 1, None, "t")) == []  # its late answer is ignored
    batch = sent(job, 1, 20_000.0)
    job.step(BatchAnswered(batch.token, True, 1, None, "t"))
    assert job.next_delay() == 10 and job.view()["healthy"]  # one success: the interval again


def test_the_jobs_core_never_raises() -> None:
    job = Backfill(interval_s=10, batch=2, timeout_s=5)
    assert job.step(RowsRead(None, 0.0)) == []  # type: ignore[arg-type]  # malformed: nothing decided
    assert job.step(object()) == []  # type: ignore[arg-type]
    [error, asked] = Breaker().step(Asking(None))  # type: ignore[arg-type]
    assert error.event == "embeddings_breaker_error" and asked == Ask()


@given(st.integers(min_value=0, max_value=10_000), st.floats(min_value=0.001, max_value=86400))
def test_the_wait_between_batches_is_bounded_whatever_the_failures(failures: int, interval: float) -> None:
    job = Backfill(interval_s=interval, batch=1, timeout_s=1, failures=failures)
    assert interval <= job.next_delay() <= interval * MAX_BACKOFF
    [wake] = job.step(Restored())
    assert isinstance(wake, WakeIn) and wake.seconds == job.next_delay()


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
    breaker = Breaker()
    assert breaker.step(Asking(0.0)) == [Ask()]
    assert breaker.step(EmbedAnswered(False, True, "did not answer within 10s", 100.0, 20.0)) == []
    assert breaker.step(Asking(119.4)) == [NotAsked("embeddings: did not answer within 10s (not asked again for 1s)")]
    assert breaker.step(Asking(120.0)) == [Ask()]  # then one recall asks again
    breaker.step(EmbedAnswered(False, False, "queue_full", 120.0, 40.0))  # a pool's refusal: not the endpoint's
    assert breaker.step(Asking(121.0)) == [Ask()]
    breaker.step(EmbedAnswered(False, True, "again", 120.0, 40.0))
    breaker.step(EmbedAnswered(True, False, None, 121.0, 40.0))  # e.g. the background job's batch went through
    assert breaker.step(Asking(121.0)) == [Ask()] and breaker.error is None


def test_metrics_show_rows_without_a_vector_a_failing_endpoint_and_recalls_by_full_text_alone() -> None:
    from pegasus.gateway.metrics import GatewayMetrics  # noqa: PLC0415 - the gateway's, only here

    text = GatewayMetrics().render({"embeddings": {"model": "e5", "rows_without_vector": 3, "healthy": False,
                                                   "recall_without_vector": 2, "search_without_vector": 4}}).decode()
    assert 'pegasus_memory_rows_without_vector{model="e5"} 3.0' in text
    assert 'pegasus_embeddings_failing{model="e5"} 1.0' in text
    assert 'pegasus_recall_without_vector_total{model="e5"} 2.0' in text
    assert 'pegasus_memory_search_without_vector_total{model="e5"} 4.0' in text
    assert 'model="' not in GatewayMetrics().render({"embeddings": None}).decode()  # off: no sample
