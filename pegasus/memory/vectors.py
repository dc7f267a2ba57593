"""Rows without an embedding vector, and the background job that gives them one.

A row written without a vector, or whose vector another model made (``vector_model``), has none.
The supervisor's ``Backfill`` takes a batch of such rows on its timer (``missing``), an llm pool
worker embeds them at the lowest priority, and ``store_vectors`` keeps each only where the row
still holds the text embedded.  A failed batch waits twice as long each time (``MAX_BACKOFF``).
Pure policy (``Backfill.step``, ``Breaker.step``) and a few SQL statements: no model call, no Thespian.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from pegasus.core_error import Log, error_log
from pegasus.memory import vector_index
from pegasus.store.database import Database

TEXT_CHARS = 2000  # of a row's text embedded: e5-small-sized models read ~512 tokens of it
MAX_BACKOFF = 32  # a failing endpoint is asked at most every 32 intervals (10 s: every ~5 min)
STALE_AFTER = 4  # a batch unanswered for this many of its timeouts is given up (its pool lost it)
BACKFILL_TASK = "memory-vectors"  # the task id of the background batches' stage requests


def fact_text(content: str) -> str:
    """What a fact's vector is of: its content (the CLI's write embeds the same)."""
    return content[:TEXT_CHARS]


def episode_text(title: str, summary: str, details: str, lesson: str) -> str:
    return "\n".join(part for part in (title, summary, lesson, details) if part)[:TEXT_CHARS]


@dataclass(frozen=True)
class Pending:
    """A row without a vector: a fact (``ref`` its path, at ``version``) or an episode (``ref`` its id)."""

    kind: str
    ref: str
    version: int
    text: str


# A row's vector is current when the configured model made it; any other (NULL: made before models were recorded)
# counts as missing.  ``IS NOT`` so a NULL model compares as "another".
STALE = "(vector IS NULL OR vector_model IS NOT ?)"


def missing(db: sqlite3.Connection, limit: int, model: str) -> list[Pending]:
    """Up to ``limit`` rows that need a vector of ``model``: current facts first, then episodes, newest first."""
    rows = [Pending("fact", path, version, fact_text(content)) for path, version, content in db.execute(
        "SELECT path, version, content FROM memory_facts WHERE current = 1 AND content IS NOT NULL "
        f"AND {STALE} ORDER BY created_at DESC LIMIT ?", (model, limit))]
    if len(rows) < limit:
        rows += [Pending("episode", str(episode_id), 0, episode_text(*texts)) for episode_id, *texts in db.execute(
            f"SELECT episode_id, title, summary, details, lesson FROM memory_episodes WHERE {STALE} "
            "ORDER BY episode_id DESC LIMIT ?", (model, limit - len(rows)))]
    return [row for row in rows if row.text.strip()]


def missing_count(db: sqlite3.Connection, model: str) -> int:
    facts = db.execute("SELECT COUNT(*) FROM memory_facts WHERE current = 1 AND content IS NOT NULL "
                       f"AND {STALE}", (model,)).fetchone()[0]
    episodes = db.execute(f"SELECT COUNT(*) FROM memory_episodes WHERE {STALE}", (model,)).fetchone()[0]
    return int(facts) + int(episodes)


def has_vector(db: sqlite3.Connection, kind: str, ref: str, model: str) -> bool:
    """Whether the row has a vector of ``model``."""
    if kind == "fact":
        row = db.execute("SELECT vector IS NOT NULL AND vector_model IS ? FROM memory_facts WHERE path = ? "
                         "AND current = 1", (model, ref))
    else:
        row = db.execute("SELECT vector IS NOT NULL AND vector_model IS ? FROM memory_episodes WHERE episode_id = ?",
                         (model, int(ref)))
    found = row.fetchone()
    return bool(found and found[0])


def store_vectors(database: Database, rows: list[Pending], vectors: list[bytes], model: str) -> int:
    """Each row's vector (made by ``model``), kept only where the row still holds the text embedded and has none of
    that model (a new version, an edit or a forget meanwhile: that row waits for the next batch).  One
    transaction; how many were kept.  The vector index (``pegasus.memory.vector_index``) re-reads them."""
    kept = 0
    with database.transaction() as db:
        for row, vector in zip(rows, vectors):
            if row.kind == "fact":
                cursor = db.execute("UPDATE memory_facts SET vector = ?, vector_model = ? WHERE path = ? AND "
                                    f"version = ? AND current = 1 AND {STALE} AND content IS NOT NULL",
                                    (vector, model, row.ref, row.version, model))
            else:
                found = db.execute("SELECT title, summary, details, lesson FROM memory_episodes WHERE episode_id = ? "
                                   f"AND {STALE}", (int(row.ref), model)).fetchone()
                if found is None or episode_text(*found) != row.text:
                    continue
                cursor = db.execute("UPDATE memory_episodes SET vector = ?, vector_model = ? WHERE episode_id = ?",
                                    (vector, model, int(row.ref)))
            kept += cursor.rowcount
            vector_index.touched(database, row.kind, row.ref)
    return kept


# -- the background job and the breaker: step(input) -> [command], never raising, the clock in the inputs --
@dataclass(frozen=True)
class Restored:
    """The supervisor (re)started: the job's timer, once."""


@dataclass(frozen=True)
class Due:
    """The job's timer fired at ``now``."""

    now: float


@dataclass(frozen=True)
class RowsRead:
    """The rows ``ReadRows`` found without a vector (read at ``now``)."""

    rows: tuple[Pending, ...]
    now: float


@dataclass(frozen=True)
class BatchAnswered:
    """The llm pool's answer to batch ``token``: ``ok`` with ``vectors`` (how many), or ``error``; ``when``: ISO."""

    token: int
    ok: bool
    vectors: int
    error: str | None
    when: str


@dataclass(frozen=True)
class Kept:
    """``StoreVectors`` kept ``count`` vectors."""

    count: int


BackfillInput = Restored | Due | RowsRead | BatchAnswered | Kept


@dataclass(frozen=True)
class WakeIn:
    """Arm the job's timer: ``Due`` after ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class ReadRows:
    """Read up to ``limit`` rows without a vector (``missing``); step ``RowsRead`` with them."""

    limit: int


@dataclass(frozen=True)
class SendBatch:
    """Ask the llm pool for the vectors of ``rows`` (batch ``token``)."""

    token: int
    rows: tuple[Pending, ...]
    timeout_s: float


@dataclass(frozen=True)
class StoreVectors:
    """Keep the answer's vectors for ``rows`` (``store_vectors``); step ``Kept`` with how many."""

    rows: tuple[Pending, ...]


@dataclass(frozen=True)
class BatchFailed:
    """A batch failed: log it, with when the next one goes."""

    error: str | None
    next_try_s: float


BackfillCommand = WakeIn | ReadRows | SendBatch | StoreVectors | BatchFailed | Log


@dataclass
class Backfill:
    """The background job's state: one batch at a time, a timer chain, a back-off after failures; a full batch
    kept: the next one at once (there may be more)."""

    interval_s: float
    batch: int
    timeout_s: float
    armed: bool = False
    token: int = 0
    in_flight: tuple[Pending, ...] = ()
    started: float = 0.0
    failures: int = 0
    filled: int = 0
    more: bool = False  # the last batch kept was full
    last_error: str | None = None
    last_error_at: str | None = None
    last_ok_at: str | None = None

    def step(self, event: BackfillInput) -> list[BackfillCommand]:
        try:
            if isinstance(event, Restored):
                return self._arm()
            if isinstance(event, Due):
                return self._due(event.now)
            if isinstance(event, RowsRead):
                return self._start(event.rows, event.now)
            if isinstance(event, BatchAnswered):
                return self._answered(event)
            if isinstance(event, Kept):
                self.filled += event.count
                more, self.more = self.more, False
                return [ReadRows(self.batch)] if more else []
        except Exception as exc:  # noqa: BLE001 - a background job must never take the supervisor down; nothing is decided
            return [error_log("vectors_backfill", event, exc)]
        return []

    def next_delay(self) -> float:
        return self.interval_s * min(2 ** self.failures, MAX_BACKOFF)

    def _arm(self) -> list[BackfillCommand]:
        if self.armed:
            return []  # one timer at a time, however often the supervisor restores
        self.armed = True
        return [WakeIn(self.next_delay())]

    def _due(self, now: float) -> list[BackfillCommand]:
        """Look for rows now unless a batch is in flight and not yet given up as lost."""
        self.armed = False
        if self.in_flight and now - self.started < STALE_AFTER * self.timeout_s:
            return self._arm()
        self.in_flight = ()
        return [ReadRows(self.batch), *self._arm()]

    def _start(self, rows: tuple[Pending, ...], now: float) -> list[BackfillCommand]:
        if not rows or self.in_flight:
            return []
        self.token += 1
        self.in_flight, self.started = tuple(rows[:self.batch]), now
        return [SendBatch(self.token, self.in_flight, self.timeout_s)]

    def _answered(self, event: BatchAnswered) -> list[BackfillCommand]:
        if event.token != self.token or not self.in_flight:
            return []  # a late answer of a batch given up
        rows, self.in_flight = self.in_flight, ()
        if not event.ok:
            self.failures += 1
            self.last_error, self.last_error_at = event.error or "failed", event.when
            return [BatchFailed(event.error, self.next_delay())]
        self.failures, self.last_ok_at = 0, event.when
        if event.vectors != len(rows):
            return []  # an answer that does not fit its batch: those rows go in a later one
        self.more = len(rows) >= self.batch
        return [StoreVectors(rows)]

    def view(self) -> dict[str, Any]:
        return {"healthy": self.failures == 0, "filled": self.filled, "in_flight": len(self.in_flight),
                "failures": self.failures,
                "last_error": self.last_error, "last_error_at": self.last_error_at, "last_ok_at": self.last_ok_at,
                "next_try_s": self.next_delay()}


@dataclass(frozen=True)
class Asking:
    """A recall or a search would ask the endpoint for its query's vector at ``now``."""

    now: float


@dataclass(frozen=True)
class EmbedAnswered:
    """An embed stage's answer: ``ok``, or the endpoint's own failure (``endpoint_failed``: not a pool's
    queue_full or a dead worker) with ``error``; ``wait``: the background job's back-off now."""

    ok: bool
    endpoint_failed: bool
    error: str | None
    now: float
    wait: float


@dataclass(frozen=True)
class Ask:
    """Ask the endpoint."""


@dataclass(frozen=True)
class NotAsked:
    """The breaker is open: go on without a vector, for ``why``."""

    why: str


@dataclass
class Breaker:
    """Whether a recall asks the endpoint for its query's vector: not for ``wait`` seconds after a call failed
    (the background job's back-off), so an endpoint that is down or hung costs one timeout, not one per recall
    (each would hold an llm worker that long).  Any call that succeeds closes it again."""

    open_until: float = 0.0
    error: str | None = None

    def step(self, event: Asking | EmbedAnswered) -> list[Ask | NotAsked | Log]:
        try:
            if isinstance(event, Asking):
                if event.now >= self.open_until:
                    return [Ask()]
                left = self.open_until - event.now
                return [NotAsked(f"embeddings: {self.error} (not asked again for {left:.0f}s)")]
            if isinstance(event, EmbedAnswered):
                if event.ok:
                    self.open_until, self.error = 0.0, None
                elif event.endpoint_failed:
                    self.open_until, self.error = event.now + event.wait, event.error or "failed"
        except Exception as exc:  # noqa: BLE001 - nothing is decided: a recall asks, as with the breaker closed
            return [error_log("embeddings_breaker", event, exc), *([Ask()] if isinstance(event, Asking) else [])]
        return []
