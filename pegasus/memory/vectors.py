"""Rows without an embedding vector, and the background job that gives them one.

A row written without a vector, or whose vector another model made (``vector_model``), has none.
The supervisor's ``Backfill`` takes a batch of such rows on its timer (``missing``), an llm pool
worker embeds them at the lowest priority, and ``store_vectors`` keeps each only where the row
still holds the text embedded.  A failed batch waits twice as long each time (``MAX_BACKOFF``).
Pure policy and a few SQL statements: no model call, no Thespian; the clock is a parameter.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

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


@dataclass
class Backfill:
    """The background job's state: one batch at a time, a timer chain, a back-off after failures.

    The carrier arms a timer for ``next_delay()`` whenever ``arm()`` says so, calls ``due`` when it fires, and
    sends the batch ``start`` returns; ``answered`` says whether its vectors are to be stored and whether the next
    batch goes at once (a full batch: there may be more)."""

    interval_s: float
    batch: int
    timeout_s: float
    armed: bool = False
    token: int = 0
    in_flight: tuple[Pending, ...] = ()
    started: float = 0.0
    failures: int = 0
    filled: int = 0
    last_error: str | None = None
    last_error_at: str | None = None
    last_ok_at: str | None = None

    def arm(self) -> bool:
        """Whether a timer must be armed now (none is pending)."""
        if self.armed:
            return False
        self.armed = True
        return True

    def next_delay(self) -> float:
        return self.interval_s * min(2 ** self.failures, MAX_BACKOFF)

    def due(self, now: float) -> bool:
        """The timer fired: whether to look for rows now (no batch in flight, or the one in flight is lost)."""
        self.armed = False
        if self.in_flight and now - self.started < STALE_AFTER * self.timeout_s:
            return False
        self.in_flight = ()
        return True

    def start(self, rows: list[Pending], now: float) -> int | None:
        """The token of the batch of ``rows`` to send (None: nothing to do)."""
        if not rows or self.in_flight:
            return None
        self.token += 1
        self.in_flight, self.started = tuple(rows[:self.batch]), now
        return self.token

    def answered(self, token: int, ok: bool, error: str | None, when: str) -> tuple[list[Pending], bool]:
        """(the rows whose vectors to store, whether to look for the next batch at once) of an answer; a late
        answer of a batch given up is ignored."""
        if token != self.token or not self.in_flight:
            return [], False
        rows, self.in_flight = list(self.in_flight), ()
        if not ok:
            self.failures += 1
            self.last_error, self.last_error_at = error or "failed", when
            return [], False
        self.failures, self.last_ok_at = 0, when
        return rows, len(rows) >= self.batch

    def kept(self, count: int) -> None:
        self.filled += count

    def view(self) -> dict[str, Any]:
        return {"healthy": self.failures == 0, "filled": self.filled, "in_flight": len(self.in_flight), "failures": self.failures,
                "last_error": self.last_error, "last_error_at": self.last_error_at, "last_ok_at": self.last_ok_at,
                "next_try_s": self.next_delay()}


@dataclass
class Breaker:
    """Whether a recall asks the endpoint for its query's vector: not for ``wait`` seconds after a call failed
    (the background job's back-off), so an endpoint that is down or hung costs one timeout, not one per recall
    (each would hold an llm worker that long).  Any call that succeeds closes it again."""

    open_until: float = 0.0
    error: str | None = None

    def closed(self, now: float) -> bool:
        return now >= self.open_until

    def failed(self, now: float, wait: float, error: str) -> None:
        self.open_until, self.error = now + wait, error

    def succeeded(self) -> None:
        self.open_until, self.error = 0.0, None
