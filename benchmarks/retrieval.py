"""Memory retrieval: ``MemoryStore.search`` (FTS5, BM25, k = 5) over 10,000 episodes and 200 facts, timed directly.

The store is a real SQLite file (WAL) filled the way the reflector fills it
(``add_episode``, one per task); the questions are free text the way a task's
input is (a few words, some shared with many episodes, some with few, some with
none).  This is the call the supervisor makes before a think / reason stage, so
its p50 is the retrieval figure of issue 19 (target under 5 ms).
"""

from __future__ import annotations

import random
import time
from typing import Any

from benchmarks.common import check, state_dir, summary_ms
from pegasus.config import MemorySettings
from pegasus.memory import MemoryStore
from pegasus.store import Store

NAME = "retrieval"
WORDS = 3000  # the vocabulary episodes are written in (Zipf-like: a few words are everywhere)


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(WORDS)]


def _text(rng: random.Random, words: list[str], length: int) -> str:
    return " ".join(words[min(int(rng.paretovariate(1.1)) - 1, WORDS - 1)] if rng.random() < 0.6
                    else rng.choice(words) for _ in range(length))


def measure(episodes: int, queries: int) -> dict[str, Any]:
    rng = random.Random(19)
    words = _vocabulary(rng)
    with state_dir() as state:
        store = MemoryStore(Store(state / "pegasus.db"), MemorySettings(episodes_max=episodes))
        began = time.perf_counter()
        with store.database.group():
            for n in range(episodes):
                store.add_episode(f"task-{n}", _text(rng, words, 6), _text(rng, words, 40),
                                  _text(rng, words, 60), _text(rng, words, 12))
            for n in range(200):
                store.write_fact(f"topic/{words[n]}", _text(rng, words, 30))
        fill_s = time.perf_counter() - began
        questions = [_text(rng, words, rng.randint(3, 12)) for _ in range(queries)]
        for question in questions[:20]:  # warm the page cache as a running supervisor has it
            store.search(question, 5)
        timings, found = [], 0
        for question in questions:
            began = time.perf_counter()
            items = store.search(question, 5)
            timings.append(time.perf_counter() - began)
            found += bool(items)
        db_bytes = sum(p.stat().st_size for p in state.glob("pegasus.db*"))
        store.database.close()
    return {"episodes": episodes, "facts": 200, "queries": queries, "answered": found, "search": summary_ms(timings),
            "fill_s": round(fill_s, 3), "db_files_bytes": db_bytes}


def run(quick: bool) -> dict[str, Any]:
    result = measure(2000 if quick else 10000, 50 if quick else 500)
    search = result["search"]
    checks = [
        check(f"retrieval p50 (search, k=5, {result['episodes']:,} episodes)", search["p50_ms"], "ms", "< 5",
              search["p50_ms"] < 5.0),
        check("retrieval p99", search["p99_ms"], "ms"),
        check(f"fill ({result['episodes']:,} episodes + 200 facts, one commit)", result["fill_s"], "s"),
    ]
    return {"figures": result, "checks": checks, "notes": [
        "retrieval: MemoryStore.search timed with perf_counter on a real WAL file, one process, no actor system "
        "(the call the supervisor makes before think / reason); questions of 3-12 words over a 3,000-word "
        "Zipf-like vocabulary, k = 5."]}
