"""The memory rows' vectors as one matrix per database and model, kept between searches.

Rows are scaled to unit length, so a search is one matrix-vector product instead of reading every
row's BLOB (docs/agent-memory.md, the figures).  Nothing is trusted that was not read: a write of
this process marks the rows it touched (``touched``) and the next search re-reads those (inside a
transaction, again after it); another connection's commit (``PRAGMA data_version``) rebuilds the
whole matrix.  Needs numpy; without it ``nearest`` answers None and the rows are ranked as read.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pegasus.store.database import Database

Ref = tuple[str, str]  # (kind, ref): ("fact", path) or ("episode", "<id>")
_INDEXES: weakref.WeakKeyDictionary[Database, VectorIndex] = weakref.WeakKeyDictionary()


def touched(database: Database, kind: str, ref: str) -> None:
    """A write changed this row (or may have): the index of ``database``, if any, re-reads it at its next search."""
    index = _INDEXES.get(database)
    if index is not None:
        index.dirty.add((kind, ref))


def nearest(database: Database, model: str, kinds: Iterable[str], query: Sequence[float],
            limit: int) -> list[tuple[str, str, float]] | None:
    """(kind, ref, cosine) of the ``limit`` rows of ``kinds`` whose ``model`` vector is most similar to ``query``,
    best first; None without numpy (the caller ranks the rows itself)."""
    try:
        import numpy  # noqa: F401 - only whether it is there
    except ImportError:
        return None
    index = _INDEXES.get(database)
    if index is None or index.model != model:
        index = _INDEXES[database] = VectorIndex(model)
    return index.nearest(database.db, frozenset(kinds), query, limit)


class VectorIndex:
    """Unit rows of one model's vectors (``matrix[:size]``), their (kind, ref) and where each is."""

    def __init__(self, model: str) -> None:
        import numpy as np

        self.np = np
        self.model = model
        self.refs: list[Ref] = []
        self.where: dict[Ref, int] = {}
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.facts = np.zeros(0, dtype=bool)  # per row: a fact (else an episode)
        self.dirty: set[Ref] = set()
        self.version: int | None = None  # PRAGMA data_version when built: None, never built
        self.builds = 0

    @property
    def size(self) -> int:
        return len(self.refs)

    def nearest(self, db: sqlite3.Connection, kinds: frozenset[str], query: Sequence[float],
                limit: int) -> list[tuple[str, str, float]]:
        self._refresh(db)
        np = self.np
        q = np.asarray(query, dtype=np.float32)
        if not self.size or not limit or not kinds or q.shape[0] != self.matrix.shape[1]:
            return []  # a query of other dimensions (another model's) is not comparable
        norm = float(np.sqrt(q @ q))
        if not norm:
            return []
        scores = np.einsum("ij,j->i", self.matrix[:self.size], q / norm)  # not BLAS: its threads spin on busy cores
        if kinds != {"fact", "episode"}:
            scores[self.facts[:self.size] != ("fact" in kinds)] = -np.inf
        limit = min(limit, self.size)
        best = np.argpartition(-scores, limit - 1)[:limit] if limit < self.size else np.arange(self.size)
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(*self.refs[i], float(scores[i])) for i in best.tolist() if scores[i] > -np.inf]

    # -- keeping it true -------------------------------------------------------------------------
    def _refresh(self, db: sqlite3.Connection) -> None:
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if version != self.version:
            self._build(db)
            self.version = version
            return
        if not self.dirty:
            return
        refs = list(self.dirty)
        if not db.in_transaction:  # else read again after it: it may still be rolled back
            self.dirty.clear()
        for kind, ref in refs:
            self._put((kind, ref), self._read(db, kind, ref))

    def _build(self, db: sqlite3.Connection) -> None:
        np = self.np
        rows = [(("fact", path), blob) for path, blob in db.execute(
            "SELECT path, vector FROM memory_facts WHERE current = 1 AND content IS NOT NULL AND vector IS NOT NULL "
            "AND vector_model = ?", (self.model,))]
        rows += [(("episode", str(episode_id)), blob) for episode_id, blob in db.execute(
            "SELECT episode_id, vector FROM memory_episodes WHERE vector IS NOT NULL AND vector_model = ?",
            (self.model,))]
        lengths = Counter(len(blob) for _, blob in rows)  # the model's dimensions: the most common length
        dims = lengths.most_common(1)[0][0] // 4 if lengths else 0  # (a vector of another length is left out)
        rows = [(ref, blob) for ref, blob in rows if len(blob) == 4 * dims]
        self.refs = [ref for ref, _ in rows]
        self.where = {ref: i for i, ref in enumerate(self.refs)}
        matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32).reshape(len(rows), dims)
        self.matrix = _unit(np, matrix)
        self.facts = np.array([ref[0] == "fact" for ref in self.refs], dtype=bool)
        self.dirty.clear()
        self.builds += 1

    def _read(self, db: sqlite3.Connection, kind: str, ref: str) -> bytes | None:
        if kind == "fact":
            row = db.execute("SELECT vector FROM memory_facts WHERE path = ? AND current = 1 AND content IS NOT NULL "
                             "AND vector_model = ?", (ref, self.model)).fetchone()
        elif kind == "episode":
            row = db.execute("SELECT vector FROM memory_episodes WHERE episode_id = ? AND vector_model = ?",
                             (int(ref), self.model)).fetchone()
        else:
            row = None
        return None if row is None else row[0]

    def _put(self, ref: Ref, blob: bytes | None) -> None:
        """The row of ``ref`` set to ``blob``'s vector, added, or (None, another length) removed."""
        np = self.np
        dims = self.matrix.shape[1]
        if blob is not None and self.size and len(blob) != 4 * dims:
            blob = None  # not comparable with the others
        at = self.where.get(ref)
        if blob is None:
            if at is not None:
                self._remove(at)
            return
        vector = _unit(np, np.frombuffer(blob, dtype=np.float32).reshape(1, -1))[0]
        if at is None:
            at = self.size
            if not self.size:
                self.matrix = np.zeros((16, len(vector)), dtype=np.float32)
                self.facts = np.zeros(16, dtype=bool)
            elif at == self.matrix.shape[0]:  # full: a quarter more room (appending stays amortised O(1))
                self.matrix, self.facts = _grown(np, self.matrix, at), _grown(np, self.facts, at)
            self.refs.append(ref)
            self.where[ref] = at
        self.matrix[at] = vector
        self.facts[at] = ref[0] == "fact"

    def _remove(self, at: int) -> None:
        """The last row moved into ``at``'s place."""
        last = self.size - 1
        gone = self.refs[at]
        if at != last:
            moved = self.refs[last]
            self.matrix[at], self.facts[at] = self.matrix[last], self.facts[last]
            self.refs[at], self.where[moved] = moved, at
        self.refs.pop()
        del self.where[gone]

    def view(self) -> dict[str, Any]:
        return {"model": self.model, "rows": self.size, "builds": self.builds, "dirty": len(self.dirty)}


def _grown(np: Any, array: Any, used: int) -> Any:
    """``array`` with room for a quarter more rows; only the ``used`` ones copied (not a zeroed doubling: the
    supervisor's memory, and a search that pays for the copy)."""
    grown = np.empty((used + used // 4 + 16, *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


def _unit(np: Any, matrix: Any) -> Any:
    """Rows scaled to length 1 (a zero row stays zero: similar to nothing); float32, a copy (writable)."""
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    return np.divide(matrix, norms[:, None], out=np.zeros(matrix.shape, dtype=np.float32), where=norms[:, None] > 0)
