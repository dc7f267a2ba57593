"""The kept vector matrix (issue 29): built once, then kept true by re-reading only the rows a write touched, and
rebuilt when another connection committed; and which model made each vector (a vector of another model, even one
of the same dimensions, counts as missing).  Real SQLite files, no actor system."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pegasus.config import MemorySettings
from pegasus.memory import MemoryNotFound, MemoryStore, vector_index
from pegasus.memory.embeddings import nearest, pack
from pegasus.memory.values import Episode
from pegasus.memory.vectors import has_vector, missing, missing_count, store_vectors
from pegasus.store import Store

MODEL = "e5-small"


def memory(path: Path, model: str = MODEL) -> MemoryStore:
    return MemoryStore(Store(path / "pegasus.db"), MemorySettings(embeddings_model=model))


def test_a_vector_of_another_model_even_of_the_same_dimensions_counts_as_missing_and_is_embedded_again(
        tmp_path: Path) -> None:
    old = memory(tmp_path, "old-model")
    old.write_fact("garage/parking", "The car is in bay 4.", vector=pack([1.0, 0.0, 0.0]))
    db = old.database.db
    assert missing_count(db, "old-model") == 0
    new = MemoryStore(old.database, MemorySettings(embeddings_model=MODEL))  # the model changed, same dimensions
    assert missing_count(db, MODEL) == 1 and not has_vector(db, "fact", "garage/parking", MODEL)
    assert new.search("car", 3, query_vector=[1.0, 0.0, 0.0])[0].id == "fact:garage/parking@1"  # by its words only
    assert new._nearest(("fact",), [1.0, 0.0, 0.0], 3) == []  # the old model's vector is never compared
    rows = missing(db, 10, MODEL)
    assert store_vectors(new.database, rows, [pack([0.0, 1.0, 0.0])], MODEL) == 1  # the background job's batch
    assert [ref for _, ref, _ in new._nearest(("fact",), [0.0, 1.0, 0.0], 3)] == ["garage/parking"]
    assert missing_count(db, MODEL) == 0
    # A vector stored before models were recorded (vector_model NULL after migration 16) is of no known model.
    db.execute("UPDATE memory_facts SET vector_model = NULL")
    assert missing_count(db, MODEL) == 1


def _reference(db: sqlite3.Connection, query: list[float], limit: int) -> list[tuple[str, str, float]]:
    """Every row read afresh and ranked (what each search did before the matrix was kept)."""
    rows = [("fact", p, v) for p, v in db.execute("SELECT path, vector FROM memory_facts WHERE current = 1 AND "
                                                  "content IS NOT NULL AND vector_model = ?", (MODEL,))]
    rows += [("episode", str(i), v) for i, v in db.execute("SELECT episode_id, vector FROM memory_episodes WHERE "
                                                           "vector_model = ?", (MODEL,))]
    return nearest(rows, query, limit)


VECTORS = st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=4, max_size=4).filter(
    lambda v: sum(x * x for x in v) > 0.01)
OPS = st.lists(st.one_of(
    st.tuples(st.just("fact"), st.sampled_from("abc"), st.text("xyz", min_size=1, max_size=3), VECTORS | st.none()),
    st.tuples(st.just("episode"), st.text("xyz", min_size=1, max_size=3), VECTORS | st.none()),
    st.tuples(st.just("forget"), st.sampled_from(["a", "b", "c", "episode:1", "episode:2"])),
    st.tuples(st.just("edit"), st.integers(1, 3)),
    st.tuples(st.just("backfill"), VECTORS),
    st.tuples(st.just("other_process"), st.sampled_from("abc"), VECTORS),
    st.tuples(st.just("search"), VECTORS, st.sampled_from([("fact",), ("episode",), ("fact", "episode")])),
), max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_the_kept_matrix_ranks_as_reading_every_row_afresh_whatever_the_writes(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory(prefix="recall-index-") as folder:
        store = memory(Path(folder))
        db = store.database.db
        try:
            for op in ops:
                _apply(store, op)
                query = [0.3, -0.2, 0.5, 0.1]
                kept = store._nearest(("fact", "episode"), query, 100)
                fresh = _reference(db, query, 100)
                # the same rows, each score equal within 1e-4 (rounding both to 4 places split 0.16275 once)
                assert {r[:2] for r in kept} == {r[:2] for r in fresh}
                scores = {r[:2]: r[2] for r in fresh}
                assert all(abs(r[2] - scores[r[:2]]) <= 1e-4 for r in kept), (kept, fresh)
        finally:
            store.database.close()


def _apply(store: MemoryStore, op: tuple) -> None:
    kind = op[0]
    try:
        if kind == "fact":
            store.write_fact(op[1], op[2], vector=pack(op[3]) if op[3] else None)
        elif kind == "episode":
            store.add_episode(None, op[1], "summary " + op[1], vector=pack(op[2]) if op[2] else None)
        elif kind == "forget":
            store.forget(op[1])
        elif kind == "edit":
            old = store.episode(op[1])
            store.update_episode(Episode(old.episode_id, old.task_id, old.title + "!", old.summary, "", "", ""))
        elif kind == "backfill":
            rows = missing(store.database.db, 2, MODEL)
            store_vectors(store.database, rows, [pack(op[1])] * len(rows), MODEL)
        elif kind == "other_process":  # another connection's commit: this process was told nothing
            other = sqlite3.connect(store.database.path)
            with other:
                other.execute("UPDATE memory_facts SET vector = ?, vector_model = ? WHERE path = ? AND current = 1",
                              (pack(op[2]), MODEL, op[1]))
            other.close()
        elif kind == "search":
            store.search("x y z", 3, kinds=op[2], query_vector=op[1])
    except MemoryNotFound:  # a forget or edit of what is not there: refused, and nothing changed
        pass


def test_the_matrix_is_built_once_and_then_extended_by_writes_and_the_background_job(tmp_path: Path) -> None:
    store = memory(tmp_path)
    for n in range(20):
        store.add_episode(f"t{n}", f"episode {n}", "summary", vector=pack([1.0, float(n), 0.0]))
    store.search("episode", 5, query_vector=[1.0, 0.0, 0.0])
    index = vector_index._INDEXES[store.database]
    assert index.view() == {"model": MODEL, "rows": 20, "builds": 1, "dirty": 0}
    store.add_episode("t-new", "new one", "summary")  # no vector yet
    store.write_fact("ops/key", "in the vault", vector=pack([0.0, 0.0, 1.0]))
    store.forget("episode:1")
    store_vectors(store.database, missing(store.database.db, 10, MODEL), [pack([0.0, 1.0, 0.0])], MODEL)
    found = store._nearest(("fact", "episode"), [0.0, 0.0, 1.0], 1)
    assert found[0][:2] == ("fact", "ops/key")
    assert index.view() == {"model": MODEL, "rows": 21, "builds": 1, "dirty": 0}  # extended, not built again
    assert store._nearest(("archive",), [0.0, 0.0, 1.0], 5) == []  # archived tasks have no vectors
    other = MemoryStore(store.database, MemorySettings(embeddings_model="another"))
    assert other._nearest(("fact", "episode"), [0.0, 0.0, 1.0], 1) == []  # another model: its own matrix
