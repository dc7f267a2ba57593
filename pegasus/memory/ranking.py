"""Ranking one FTS5 index: the best rows for a question's words by BM25, over one connection.

Words found in more than half the rows are left out (``query.informative``).  Counting a word reads
its whole posting list, so counts are kept per process for words in CACHED_FROM rows or more (a
rare or new word is always read) while the index has within 5% of the rows it had then: the counts
only decide which words are too common to rank by (docs/agent-memory.md, "Search").
"""

from __future__ import annotations

import sqlite3

from pegasus.memory.query import informative, match_expression

TITLE_WEIGHT, BODY_WEIGHT = 2.0, 1.0  # a word in a fact's path or an episode's title counts double
# When every word of a question is in over half the rows (a request repeated many times), all of them match:
# only the newest RECENT_ROWS are ranked then, or each such search would score the whole index.
RECENT_ROWS = 1000
CACHED_FROM, CACHE_MAX = 64, 100_000
_COMMON: dict[tuple[str, str, str], tuple[int, int]] = {}  # (database, vocabulary, term) -> (rows with it, rows)


def best_rows(db: sqlite3.Connection, path: str, table: str, terms_table: str, terms: list[str], rows: int,
              limit: int, kind: str | None) -> list[tuple[str, str, float]]:
    """(kind, ref, score) of the best ``limit`` rows of ``table`` (higher score: more relevant); ``kind``: only
    rows of that kind.  ``rows``: how many the index holds; ``path``: the database's (the cache's key)."""
    counts = document_counts(db, path, terms_table, terms, rows)
    kept = informative(terms, counts, rows)
    expression = match_expression(kept)
    if expression is None:
        return []
    # Only the rowid and the score while ranking: reading another column would read every matching row.
    where, params = ("AND kind = ?", (kind,)) if kind else ("", ())
    if rows > RECENT_ROWS and all(counts[term] * 2 > rows for term in kept):
        newest = db.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
        where, params = f"{where} AND rowid > ?", (*params, newest - RECENT_ROWS)
    best = db.execute(f"SELECT rowid, bm25({table}, {TITLE_WEIGHT}, {BODY_WEIGHT}, 0, 0) AS score FROM {table} "
                      f"WHERE {table} MATCH ? {where} ORDER BY score, rowid DESC LIMIT ?",
                      (expression, *params, limit)).fetchall()
    found = []
    for rowid, score in best:
        row = db.execute(f"SELECT kind, ref FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
        found.append((row[0], row[1], -score))
    return found


def document_counts(db: sqlite3.Connection, path: str, table: str, terms: list[str], rows: int) -> dict[str, int]:
    """Term -> rows holding it (fts5vocab ``table``); a term in none is absent."""
    counts: dict[str, int] = {}
    unknown = []
    for term in terms:
        known = _COMMON.get((path, table, term))
        if known is not None and abs(known[1] - rows) * 20 <= rows:
            counts[term] = known[0]
        else:
            unknown.append(term)
    if unknown:
        marks = ", ".join("?" for _ in unknown)
        for term, documents in db.execute(f"SELECT term, doc FROM {table} WHERE term IN ({marks})", unknown):
            counts[term] = documents
            if documents >= CACHED_FROM:
                if len(_COMMON) >= CACHE_MAX:
                    _COMMON.clear()
                _COMMON[(path, table, term)] = (documents, rows)
    return counts
